"""`import tensorflow.contrib...` for Slim programs written for TF 1.x.

TensorFlow 2.0 removed `tensorflow.contrib`; Slim programs still import it,
often only for a branch they never take (upstream's
train_image_classifier.py imports `tensorflow.contrib.quantize` for
`--quantize_delay`, off by default). `install()` makes every
`tensorflow.contrib` import work again, as follows:

  - what tf-slim took over from contrib is tf-slim's own object:
    `tensorflow.contrib.slim` (and `.slim.nets`, `.slim.python.slim.*`) is
    `tf_slim`; `framework` has tf-slim's arg scopes and variable helpers;
    `training` tf-slim's train/evaluate loops and checkpoint iterators;
    `layers`, `metrics` and `losses` tf-slim's layers, streaming metrics
    and losses; a few `framework` names that moved into core TF are the
    core objects (`nest`, `sort`, `load_variable`, ...); contrib's
    package-internal paths that programs import (`framework.python.ops`
    for `add_arg_scope`, `layers.python.layers.initializers`, `.utils`,
    `training.python.training.*`, ...) give the same tf-slim modules and
    names;
  - `keras` is tf-keras;
  - `data`, `lookup` and `rnn` are core TF's `tf.compat.v1.data` (and its
    `experimental`), lookup tables (`HashTable`,
    `index_table_from_tensor`, ...) and RNN cells and wrappers
    (`DropoutWrapper`, ...), which TF 1.x's contrib re-exported;
  - a name reached through a module below its family
    (`layers.summaries.summarize_tensor`, `rnn.python.ops.rnn_cell.LSTMCell`)
    is what the family's name is, by every rule here: TF 1.x's families
    re-exported their modules' names;
  - a name that TensorFlow's own upgrade tables (`tf_upgrade_v2`) rename,
    where the rename is all the tool changes in a call and the new name
    exists on this TensorFlow, is the renamed object
    (`data.parallel_interleave`, `framework.nest`, `rnn.BasicLSTMCell`,
    `cluster_resolver.*`, ...). Names whose arguments the tool rewrites
    (`summary.scalar`, ...) are not: called as TF 1.x called them, they
    would misbehave;
  - the contrib pieces TF 2.x has no home for that TF 1.x programs use
    most (HOMELESS: `training.HParams`, `opt.MovingAverageOptimizer`,
    `data.batch_and_drop_remainder`, `tfprof.model_analyzer`'s
    `print_model_analysis`, ...) are written again with their TF
    1.x behaviour (`contrib_hparams`, `contrib_opt`, `contrib_data`,
    `contrib_tfprof`);
  - any other name of any contrib module imports as a placeholder that
    raises `RemovedInTF2Error` when called (or subclassed), naming the call
    and what replaces it on TF 2.x, e.g.
        tensorflow.contrib.quantize.create_training_graph() was removed in
        TF 2.x; build the network quantization-aware instead: (...)
    and `RemovedNameUsedError` when used as a value (compared, given to
    isinstance, converted to a number or a tensor, ...). A feature test
    (`if tf.contrib.X:`, `is None`, `callable`, `__name__`) answers as
    TF 1.x's class or function did, so the program takes TF 1.x's branch
    and stops at the first real use there, not silently down another.
    The replacement named comes from NAME_ADVICE, else from TensorFlow's
    own upgrade tables (`tf_upgrade_v2`) when the name they give still
    exists, else from the module's entry in MODULE_ADVICE.

It changes nothing for code that does not import `tensorflow.contrib`:
the import finder answers only for names under `tensorflow.contrib`, and
only on a TensorFlow without one. It does change one behaviour: `try:
import tensorflow.contrib ... except ImportError:` no longer takes the
except branch. So `tf2_compat.slim_compat` does not install it; programs
get it from `python -m tf2_compat.run_slim` or by importing this module
(which installs it), and `uninstall()` takes it away.
"""

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import types

from tf2_compat import patching
from tf2_compat import slim_compat  # pylint: disable=unused-import

PACKAGE = 'tensorflow.contrib'

# Contrib modules (the part after 'tensorflow.contrib.') that are tf-slim
# modules: tf-slim was cut out of contrib with this layout. A name under a
# key maps to the same name under the value ('slim.nets.vgg' ->
# 'tf_slim.nets.vgg', 'layers.python.layers.utils' -> 'tf_slim.layers.utils')
# where that module exists; None is an empty package on the way to one.
ALIASES = {
    'slim': 'tf_slim',
    'slim.python': None,
    'slim.python.slim': 'tf_slim',
    'framework.python.ops.arg_scope': 'tf_slim.ops.arg_scope',
    'framework.python.ops.variables': 'tf_slim.ops.variables',
    'framework.python.framework.checkpoint_utils':
        'tensorflow.python.training.checkpoint_utils',
    'layers.python.layers': 'tf_slim.layers',
    'losses.metric_learning': 'tf_slim.losses.metric_learning',
    'losses.python.losses.loss_ops': 'tf_slim.losses.loss_ops',
    'metrics.python.ops.metric_ops': 'tf_slim.metrics.metric_ops',
    'training.python.training': 'tf_slim.training',
    # TF 1.x's contrib.keras was Keras, as tf-keras is.
    'keras': 'tf_keras',
    'keras.api': None,
    'keras.api.keras': 'tf_keras',
}

# The modules whose public names a contrib module takes over (any other
# name is Removed, or a submodule ALIASES has). Contrib's package-internal
# paths re-exported their modules' names as the public ones did: programs
# import `add_arg_scope` from `framework.python.ops`.
_ARG_SCOPE_AND_VARIABLES = ('tf_slim.ops.arg_scope', 'tf_slim.ops.variables')
_TRAIN_AND_EVALUATE = ('tf_slim.training.training',
                       'tf_slim.training.evaluation')
SOURCES = {
    'framework': _ARG_SCOPE_AND_VARIABLES,
    'framework.python.ops': _ARG_SCOPE_AND_VARIABLES,
    'framework.python.framework': (
        'tensorflow.python.training.checkpoint_utils',),
    'layers': ('tf_slim.layers', 'tf_slim.layers.utils'),
    'layers.python.layers': ('tf_slim.layers', 'tf_slim.layers.utils'),
    'losses': ('tf_slim.losses',),
    'metrics': ('tf_slim.metrics',),
    'training': _TRAIN_AND_EVALUATE,
    'training.python.training': _TRAIN_AND_EVALUATE,
    # TF 1.x's contrib.data and contrib.lookup re-exported core TF's
    # datasets and lookup tables (the TF 1 classes, such as HashTable).
    'data': ('tensorflow.compat.v1.data',
             'tensorflow.compat.v1.data.experimental'),
    'lookup': ('tensorflow.compat.v1.lookup',
               'tensorflow.python.ops.lookup_ops'),
    # TF 1.x's contrib.rnn re-exported core's cells and wrappers: as
    # programs see them (tf-keras's legacy cells; an import of the module
    # tensorflow.compat.v1.nn.rnn_cell gives TensorFlow's own copy). With
    # Keras 3 there are none, and they are Removed.
    'rnn': ('tensorflow.compat.v1:nn.rnn_cell',),
}

# Contrib names that are the very same object in TF 2.21
# ("module:attribute", see patching.resolve), where neither SOURCES nor
# TensorFlow's upgrade tables (see _renamed) lead to it.
REPLACEMENTS = {
    'framework.deprecated': 'tensorflow.python.util.deprecation:deprecated',
    'framework.deprecated_arg_values':
        'tensorflow.python.util.deprecation:deprecated_arg_values',
    'framework.deprecated_args':
        'tensorflow.python.util.deprecation:deprecated_args',
    'framework.init_from_checkpoint':
        'tensorflow.compat.v1.train:init_from_checkpoint',
    'framework.list_variables': 'tensorflow.train:list_variables',
    'framework.load_checkpoint': 'tensorflow.train:load_checkpoint',
    'framework.load_variable': 'tensorflow.train:load_variable',
    'framework.nest': 'tensorflow.python.util:nest',
    'framework.prepend_name_scope':
        'tensorflow.python.framework.ops:prepend_name_scope',
    'framework.py_func': 'tensorflow.compat.v1:py_func',
    'framework.smart_cond': 'tensorflow.python.framework.smart_cond:smart_cond',
    'framework.strip_name_scope':
        'tensorflow.python.framework.ops:strip_name_scope',
}

# Contrib names TF 2.x has no home for that TF 1.x programs use most (see
# docs/migration.md's survey), written again with their TF 1.x behaviour.
HOMELESS = {
    'training.HParams': 'tf2_compat.contrib_hparams:HParams',
    'opt.MovingAverageOptimizer':
        'tf2_compat.contrib_opt:MovingAverageOptimizer',
    'data.batch_and_drop_remainder':
        'tf2_compat.contrib_data:batch_and_drop_remainder',
    'data.padded_batch_and_drop_remainder':
        'tf2_compat.contrib_data:padded_batch_and_drop_remainder',
}
HOMELESS.update(
    ('tfprof.model_analyzer.%s' % name, 'tf2_compat.contrib_tfprof:%s' % name)
    for name in ('print_model_analysis', 'TRAINABLE_VARS_PARAMS_STAT_OPTIONS',
                 'FLOAT_OPS_OPTIONS'))

_QUANTIZATION = (
    'build the network quantization-aware instead: '
    'nets.quantize.quantization_aware() around it '
    '(train_image_classifier.py --quantize_delay does so), or the TF Model '
    'Optimization Toolkit for Keras models')
_ESTIMATOR = ('TF 2.21 has no tf.estimator either; use tf_keras or a '
              'tf.compat.v1 session loop')

# What replaces one contrib name, where TensorFlow's tables name nothing.
NAME_ADVICE = {
    'training.GreedyLoadBalancingStrategy':
        "use DeploymentConfig(ps_strategy='by_size') of this project's "
        'deployment.model_deploy',
    'training.byte_size_load_fn':
        "use DeploymentConfig(ps_strategy='by_size') of this project's "
        'deployment.model_deploy',
    'training.bucket_by_sequence_length':
        'use tf.data.Dataset.bucket_by_sequence_length',
}

# What replaces each contrib module, for its other names.
MODULE_ADVICE = {
    'quantize': _QUANTIZATION,
    'framework': 'use tf_slim for arg scopes and variable helpers, core TF '
                 'for the rest (tf.nest, tf.sort, tf.train.*)',
    'training': "use tf_slim.training for the train/evaluate loops, tf.data "
                'for sampling and bucketing',
    'layers': 'use the layers of tf_slim, or tf.keras.layers',
    'metrics': 'use tf_slim.metrics or tf.compat.v1.metrics',
    'losses': 'use tf_slim.losses or tf.compat.v1.losses',
    'rnn': 'use tf.compat.v1.nn.rnn_cell, or tf.keras.layers (LSTM, GRU, '
           'RNN)',
    'data': 'use tf.data.experimental or the tf.data.Dataset methods',
    'distribute': 'use tf.distribute',
    'tpu': 'use tf.compat.v1.tpu or tf.distribute.TPUStrategy',
    'lookup': 'use tf.lookup',
    'summary': 'use tf.summary or tf.compat.v1.summary',
    'tfprof': 'use tf.compat.v1.profiler',
    'cluster_resolver': 'use tf.distribute.cluster_resolver',
    'learn': _ESTIMATOR,
    'estimator': _ESTIMATOR,
}
DEFAULT_ADVICE = ('tensorflow.contrib was removed in TF 2.0: look in core TF '
                  '(tf.*, tf.compat.v1.*), tf_slim or a package of its own')


class RemovedInTF2Error(NotImplementedError):
  """A call of a tensorflow.contrib function or class TF 2.x does not have."""


class RemovedNameUsedError(RemovedInTF2Error):
  """A tensorflow.contrib name TF 2.x does not have, used as a value."""


def _relative(name):
  """'tensorflow.contrib.a.b' -> 'a.b' ('' for the package itself)."""
  return name[len(PACKAGE) + 1:]


def _alias_of(relative):
  """The tf-slim (or core TF) module a contrib module is, or None.

  None for a module of SOURCES (made of names), and for a module under an
  aliased package that tf-slim does not have
  ('layers.python.layers.feature_column'): it is made of Removed names, so
  that importing it works and only a call fails.
  """
  if relative in SOURCES:
    return None
  for key in sorted(ALIASES, key=len, reverse=True):
    if relative == key or relative.startswith(key + '.'):
      target = ALIASES[key]
      if target is None:
        return None
      target += relative[len(key):]
      try:
        return target if importlib.util.find_spec(target) else None
      except ImportError:
        return None
  return None


def source_module(source):
  """The module a SOURCES entry names: 'package.module', or
  'module:attribute' for one TensorFlow loads lazily (see patching.resolve);
  None where this TensorFlow lacks it."""
  try:
    if ':' in source:
      return patching.resolve(source)
    return importlib.import_module(source)
  except (AttributeError, ImportError):  # Keras 3 has no rnn cells.
    return None


def _leads_to_a_module(relative):
  """Whether tf.contrib.<relative> is a module of these stubs."""
  return bool(_alias_of(relative)) or any(
      key == relative or key.startswith(relative + '.')
      for key in list(ALIASES) + list(SOURCES)) or any(
          key.startswith(relative + '.') for key in HOMELESS)


def _tensorflow_attribute(dotted):
  """What 'tf.a.b' names in the running TensorFlow, or None."""
  value = importlib.import_module('tensorflow')
  for attribute in dotted.split('.')[1:]:
    try:
      value = getattr(value, attribute)
    except Exception:  # pylint: disable=broad-except
      return None  # Lazy loaders raise what they like (Keras 3: no cells).
  return value


def _in_tensorflow(dotted):
  """Whether 'tf.a.b' names something in the running TensorFlow."""
  return _tensorflow_attribute(dotted) is not None


def _upgrade_tool_replacement(relative):
  """What TensorFlow's tf_upgrade_v2 turns tf.contrib.<relative> into."""
  try:
    # pylint: disable=g-import-not-at-top
    from tensorflow.tools.compatibility import all_renames_v2
  except ImportError:
    return None
  name = 'tf.contrib.' + relative
  renamed = all_renames_v2.symbol_renames.get(name)
  if renamed and _in_tensorflow(renamed):  # Some targets went since.
    return 'use %s' % renamed
  ported = all_renames_v2.addons_symbol_mappings.get(name)
  if ported:
    return ('TensorFlow Addons had it as %s (Addons is no longer '
            'maintained)' % ported)
  return None


@functools.lru_cache(maxsize=None)
def _argument_changes():
  """The names whose calls tf_upgrade_v2 rewrites beyond the name: their
  arguments are renamed, reordered or transformed, or it warns of another
  meaning."""
  # pylint: disable=g-import-not-at-top
  from tensorflow.tools.compatibility import tf_upgrade_v2
  spec = tf_upgrade_v2.TFAPIChangeSpec()
  return frozenset().union(
      spec.function_keyword_renames, spec.function_reorders,
      spec.function_transformers, spec.function_warnings,
      spec.function_arg_warnings)


def _renamed(relative):
  """The object TensorFlow's upgrade tables rename tf.contrib.<relative>
  to, where the rename is all the tool does to a call and the target exists
  on this TensorFlow; else None."""
  try:
    # pylint: disable=g-import-not-at-top
    from tensorflow.tools.compatibility import all_renames_v2
  except ImportError:
    return None
  name = 'tf.contrib.' + relative
  target = all_renames_v2.symbol_renames.get(name)
  if target is None or name in _argument_changes():
    return None
  return _tensorflow_attribute(target)


def advice(relative):
  """What to use instead of tf.contrib.<relative> on TF 2.x."""
  module = relative.split('.')[0]
  return (NAME_ADVICE.get(relative)
          or _upgrade_tool_replacement(relative)
          or MODULE_ADVICE.get(module, DEFAULT_ADVICE))


def _as_its_family_has_it(relative):
  """A name of a module below a contrib family, as the family has it; else
  Removed.

  TF 1.x's families re-exported the names of their modules, so programs
  reach one name by several paths: `layers.summaries.summarize_tensor`,
  `layers.python.layers.summaries.summarize_tensor` and
  `layers.summarize_tensor` are one function, `rnn.python.ops.rnn_cell.
  LSTMCell` is `rnn.LSTMCell`. What the family gives for the name (tf-slim's,
  core TF's, TensorFlow's rename, the rewritten one) is what every path
  gives; a Removed keeps the path the program wrote, for its message.
  """
  family, _, path = relative.partition('.')
  if '.' in path:
    value = getattr(importlib.import_module('%s.%s' % (PACKAGE, family)),
                    relative.rsplit('.', 1)[1])
    if not isinstance(value, (Removed, types.ModuleType)):
      return value
  return Removed(relative)


class Removed:
  """A contrib name TF 2.x does not have.

  Importing it works, so that a program runs as long as it does not use
  it. Calling it raises RemovedInTF2Error. Any use as a value (compared,
  given to isinstance, converted to a number, an array or a tensor,
  iterated, or an attribute of a class or constant read) raises
  RemovedNameUsedError at once, where TF 2.x would otherwise fail later,
  far from the name, or not at all. What a program tests a name with
  before it uses it answers as TF 1.x's class or function did: true in a
  truth test, not None, callable, `__name__` its last part. `if
  tf.contrib.X:` takes TF 1.x's branch, and the use of X in it stops the
  program with RemovedInTF2Error, rather than a silent other branch.
  An attribute of a lowercase name is another Removed: it may be a module
  (`tf.contrib.tfprof.model_analyzer.print_model_analysis`).
  """

  def __init__(self, relative):
    self._relative = relative

  @property
  def message(self):
    return '%s.%s() was removed in TF 2.x; %s' % (
        PACKAGE, self._relative, advice(self._relative))

  def used_as_a_value(self, how):
    """The RemovedNameUsedError of this name used `how` ('compared')."""
    return RemovedNameUsedError('%s.%s was removed in TF 2.x, so it cannot '
                                'be %s; %s' % (PACKAGE, self._relative, how,
                                               advice(self._relative)))

  def __call__(self, *args, **kwargs):
    raise RemovedInTF2Error(self.message)

  def __mro_entries__(self, bases):
    raise RemovedInTF2Error(self.message)

  def __bool__(self):
    return True  # Not __len__'s refusal: a class or function is true.

  @property
  def __name__(self):
    return self._relative.split('.')[-1]

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)  # Python's and libraries' protocol probes.
    if name.startswith('_') or not self._relative.split('.')[-1].islower():
      raise self.used_as_a_value('read (.%s)' % name)
    return _as_its_family_has_it('%s.%s' % (self._relative, name))

  def __repr__(self):
    return '<removed in TF 2.x: %s.%s>' % (PACKAGE, self._relative)


def _refusal(how):
  """A special method of Removed that raises RemovedNameUsedError."""
  def refuse(removed, *args, **kwargs):
    del args, kwargs  # Unused.
    raise removed.used_as_a_value(how)
  return refuse


# The special methods Python, NumPy and TensorFlow call on a value, and how
# the error says the value was used. Hashing stays: a Removed may be a key.
VALUE_USES = {
    '__instancecheck__': 'given to isinstance()',
    '__subclasscheck__': 'given to issubclass()',
    '__iter__': 'iterated',
    '__len__': 'given to len()',
    '__getitem__': 'indexed',
    '__contains__': 'searched with `in`',
    '__enter__': 'used in a with statement',
    '__array__': 'converted to a NumPy array',
    '__tf_tensor__': 'converted to a tensor',
}
_ARITHMETIC = ('add', 'sub', 'mul', 'matmul', 'truediv', 'floordiv', 'mod',
               'divmod', 'pow', 'lshift', 'rshift', 'and', 'xor', 'or')
VALUE_USES.update(('__%s__' % op, 'compared')
                  for op in ('eq', 'ne', 'lt', 'le', 'gt', 'ge'))
VALUE_USES.update(('__%s__' % op, 'used as a number')
                  for op in ('index', 'int', 'float', 'complex', 'round'))
VALUE_USES.update(('__%s__' % op, 'used in arithmetic')
                  for op in _ARITHMETIC + ('neg', 'pos', 'abs', 'invert'))
VALUE_USES.update(('__r%s__' % op, 'used in arithmetic') for op in _ARITHMETIC)
for _name, _how in VALUE_USES.items():
  setattr(Removed, _name, _refusal(_how))


class ContribModule(types.ModuleType):
  """A tensorflow.contrib module, made of tf-slim, core TF and Removed."""

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError('module %r has no attribute %r'
                           % (self.__name__, name))
    relative = '%s.%s' % (_relative(self.__name__), name)
    value = self._find(name, relative.lstrip('.'))
    setattr(self, name, value)
    return value

  def _find(self, name, relative):
    # Names before submodules: contrib's packages re-exported their
    # modules' names ('framework.python.ops.arg_scope' is the function).
    for source in SOURCES.get(_relative(self.__name__), ()):
      value = getattr(source_module(source), name, None)
      if value is not None and not isinstance(value, types.ModuleType):
        return value
    if self.__name__ == PACKAGE or _leads_to_a_module(relative):
      return importlib.import_module('%s.%s' % (self.__name__, name))
    if relative in REPLACEMENTS:
      try:
        return patching.resolve(REPLACEMENTS[relative])
      except AttributeError:  # Keras 3 has no rnn cells.
        pass
    renamed = _renamed(relative)
    if renamed is not None:
      return renamed
    if relative in HOMELESS:
      return patching.resolve(HOMELESS[relative])
    return _as_its_family_has_it(relative)


class _Loader(importlib.abc.Loader):

  def create_module(self, spec):
    if _alias_of(_relative(spec.name)):
      return None  # exec_module puts the tf-slim module in its place.
    return ContribModule(spec.name)

  def exec_module(self, module):
    target = _alias_of(_relative(module.__name__))
    if target:
      sys.modules[module.__name__] = importlib.import_module(target)


class _Finder(importlib.abc.MetaPathFinder):

  def find_spec(self, fullname, path=None, target=None):
    del path, target  # Unused.
    if fullname != PACKAGE and not fullname.startswith(PACKAGE + '.'):
      return None
    return importlib.util.spec_from_loader(fullname, _LOADER, is_package=True)


_LOADER = _Loader()
_FINDER = _Finder()


def installed():
  """Whether `import tensorflow.contrib` goes to these stubs."""
  return _FINDER in sys.meta_path


def install():
  """Makes `tensorflow.contrib` importable where TensorFlow has none.

  Does nothing the second time, nor on a TensorFlow with a contrib package.

  Returns:
    The `tensorflow.contrib` module.
  """
  if not installed() and importlib.util.find_spec(PACKAGE) is None:
    sys.meta_path.insert(0, _FINDER)
  return importlib.import_module(PACKAGE)


def uninstall():
  """Removes the finder and every imported tensorflow.contrib module."""
  if installed():
    sys.meta_path.remove(_FINDER)
  for name in [name for name in sys.modules
               if name == PACKAGE or name.startswith(PACKAGE + '.')]:
    del sys.modules[name]
  tensorflow = sys.modules.get('tensorflow')
  if isinstance(getattr(tensorflow, 'contrib', None), ContribModule):
    del tensorflow.contrib


install()
