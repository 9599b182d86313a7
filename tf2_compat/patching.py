"""How the compatibility layer changes a library in place, and undoes it.

A fix lists the functions it wraps as targets `(owner, attribute, wrap)`.
`install(targets)` replaces each `owner.attribute` with `wrap(original)`
and keeps the original on the replacement, so a second install changes
nothing, `installed(targets)` can tell, and `uninstall(targets)` puts the
original back. `resolve('module:attribute')` finds a name that a fix puts
back, or points to, where the running TensorFlow keeps it now.
"""

import importlib

_ORIGINAL = '_slim_compat_original'


def resolve(target):
  """The object that `target`, 'package.module:attribute', names.

  The attribute may be a dotted path ('tensorflow.compat.v1:nn.rnn_cell.X'):
  TensorFlow's lazily loaded API modules can give another object than an
  import of the module of the same name does.
  """
  module_name, path = target.split(':')
  value = importlib.import_module(module_name)
  for attribute in path.split('.'):
    value = getattr(value, attribute)
  return value


def _name(owner, attribute):
  return '%s.%s' % (getattr(owner, '__qualname__', owner.__name__), attribute)


def installed(targets):
  """Whether every `owner.attribute` of `targets` is wrapped."""
  return all(hasattr(vars(owner)[attribute], _ORIGINAL)
             for owner, attribute, _ in targets)


def install(targets):
  """Wraps each `owner.attribute` of `targets` that is not wrapped yet.

  Args:
    targets: (owner, attribute, wrap) triples; `owner` is a class or a
      module, `wrap(original)` returns the replacement.

  Returns:
    The functions wrapped now, as 'Owner.name' strings (a module's full
    name for a module); empty when all already were.
  """
  wrapped = []
  for owner, attribute, wrap in targets:
    original = vars(owner)[attribute]
    if hasattr(original, _ORIGINAL):
      continue
    replacement = wrap(original)
    setattr(replacement, _ORIGINAL, original)
    setattr(owner, attribute, replacement)
    wrapped.append(_name(owner, attribute))
  return wrapped


def uninstall(targets):
  """Puts back the original of each `owner.attribute` of `targets`."""
  for owner, attribute, _ in targets:
    original = getattr(vars(owner)[attribute], _ORIGINAL, None)
    if original is not None:
      setattr(owner, attribute, original)
