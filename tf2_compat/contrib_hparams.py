"""`tf.contrib.training.HParams` for TF 1.x programs, on TF 2.x.

TF 2.x has no HParams; TF 1.x programs (object_detection, deeplab, NMT,
tensor2tensor's users) build their configuration with it and override it
from a command-line string. This is its TF 1.x behaviour, for the
contrib stubs to hand out:

  hparams = HParams(learning_rate=0.1, layers=[64, 64], use_bn=True)
  hparams.parse('learning_rate=0.05,layers=[32,32,16]')
  hparams.learning_rate          # 0.05
  hparams.values()               # {'learning_rate': 0.05, ...}
  hparams.to_json(sort_keys=True)

A hyperparameter's type is fixed by its first value: int, float, bool,
str, or a list of one of those. A value of another type is refused with a
ValueError naming the hyperparameter, except an int given to a float (it
becomes a float), as in TF 1.x. The protocol-buffer form (`hparam_def`,
`to_proto`) is not supported.
"""

import json
import numbers
import re

# One `name=value`, `name=[v1,v2]` or `name[index]=value` of a parse()
# string, and the comma or end after it.
_ASSIGNMENT = re.compile(
    r'(?P<name>[a-zA-Z][\w.]*)(\[\s*(?P<index>\d+)\s*\])?=\s*'
    r'((?P<value>[^,\[]*)|\[(?P<values>[^\]]*)\])($|,\s*)')

_TRUE_WORDS = ('true', '1')
_FALSE_WORDS = ('false', '0')


def _checked(name, kind, value):
  """`value` as hyperparameter `name` of type `kind`, or a ValueError."""
  if kind is bool:
    if isinstance(value, bool):
      return value
  elif kind is str:
    if isinstance(value, str):
      return value
  elif isinstance(value, bool):
    pass  # A bool is an int to Python, never to HParams.
  elif kind is int:
    if isinstance(value, numbers.Integral):
      return int(value)
  elif isinstance(value, numbers.Real):
    return float(value)
  raise ValueError('hyperparameter %s is of type %s; got %r (%s)'
                   % (name, kind.__name__, value, type(value).__name__))


def _parsed(name, kind, text):
  """The value that the string `text` of parse() gives `name`."""
  text = text.strip()
  if kind is bool:
    if text.lower() in _TRUE_WORDS:
      return True
    if text.lower() in _FALSE_WORDS:
      return False
  else:
    try:
      return kind(text)
    except ValueError:
      pass
  raise ValueError('cannot parse %r as the %s of hyperparameter %s'
                   % (text, kind.__name__, name))


def _kind_of(name, value):
  """(type, is_list) of a new hyperparameter's value."""
  is_list = isinstance(value, (list, tuple))
  if is_list and not value:
    raise ValueError('hyperparameter %s: an empty list gives no type; '
                     'start it with one value' % name)
  first = value[0] if is_list else value
  for kind in (bool, int, float, str):  # bool first: it is an int too.
    if isinstance(first, kind):
      return kind, is_list
  raise ValueError('hyperparameter %s: %r is no int, float, bool or str '
                   '(nor a list of one of those)' % (name, first))


class HParams:
  """Named hyperparameters, with TF 1.x contrib's API (see the module)."""

  def __init__(self, hparam_def=None, model_structure=None, **kwargs):
    if hparam_def is not None:
      raise NotImplementedError(
          'HParams(hparam_def=...) reads a protocol buffer of TF 1.x; pass '
          'the values as keyword arguments instead')
    self._kinds = {}
    self._model_structure = model_structure
    for name, value in kwargs.items():
      self.add_hparam(name, value)

  def add_hparam(self, name, value):
    """Adds hyperparameter `name`, of the type of `value`."""
    if getattr(self, name, None) is not None or name in self._kinds:
      raise ValueError('hyperparameter name is reserved or taken: %s'
                       % name)
    self._kinds[name] = _kind_of(name, value)
    self._set(name, value)

  def set_hparam(self, name, value):
    """Sets an existing hyperparameter, checking the value's type."""
    if name not in self._kinds:
      raise ValueError('unknown hyperparameter %s; add it with add_hparam'
                       % name)
    self._set(name, value)

  def _set(self, name, value):
    kind, is_list = self._kinds[name]
    if is_list != isinstance(value, (list, tuple)):
      raise ValueError('hyperparameter %s is %s; got %r'
                       % (name, 'a list' if is_list else 'no list', value))
    if is_list:
      value = [_checked(name, kind, item) for item in value]
    else:
      value = _checked(name, kind, value)
    setattr(self, name, value)

  def del_hparam(self, name):
    if name in self._kinds:
      del self._kinds[name]
      delattr(self, name)

  def parse(self, values):
    """Overrides hyperparameters from 'a=1,b=[1,2],c[0]=3'; returns self."""
    changes = {}
    position = 0
    while position < len(values):
      match = _ASSIGNMENT.match(values, position)
      if not match:
        raise ValueError('cannot parse the hyperparameters %r from %r on'
                         % (values, values[position:]))
      position = match.end()
      name = match.group('name')
      if name not in self._kinds:
        raise ValueError('unknown hyperparameter %s in %r' % (name, values))
      kind, is_list = self._kinds[name]
      if match.group('index') is not None:
        changes.setdefault(name, list(getattr(self, name)))
        changes[name][int(match.group('index'))] = _parsed(
            name, kind, match.group('value'))
      elif match.group('values') is not None:
        changes[name] = [_parsed(name, kind, item)
                         for item in match.group('values').split(',')
                         if item.strip()]
      elif is_list:
        raise ValueError('hyperparameter %s is a list: write %s=[%s]'
                         % (name, name, match.group('value').strip()))
      else:
        changes[name] = _parsed(name, kind, match.group('value'))
    return self.override_from_dict(changes)

  def override_from_dict(self, values_dict):
    """Sets each hyperparameter of `values_dict`; returns self."""
    for name, value in values_dict.items():
      self.set_hparam(name, value)
    return self

  def parse_json(self, values_json):
    """Overrides hyperparameters from a JSON object; returns self."""
    return self.override_from_dict(json.loads(values_json))

  def to_json(self, indent=None, separators=None, sort_keys=False):
    return json.dumps(self.values(), indent=indent, separators=separators,
                      sort_keys=sort_keys)

  def values(self):
    """A dict of the hyperparameters' names and values."""
    return {name: getattr(self, name) for name in self._kinds}

  def get(self, key, default=None):
    """The value of `key`, or `default` if there is none; a default of
    another type than the hyperparameter's is a ValueError."""
    if key not in self._kinds:
      return default
    if default is not None:
      kind, is_list = self._kinds[key]
      defaults = default if is_list else [default]
      for item in defaults:
        _checked(key, kind, item)
    return getattr(self, key)

  def set_model_structure(self, model_structure):
    self._model_structure = model_structure

  def get_model_structure(self):
    return self._model_structure

  def __contains__(self, key):
    return key in self._kinds

  def __str__(self):
    return str(sorted(self.values().items()))

  def __repr__(self):
    return '%s(%s)' % (type(self).__name__, self)
