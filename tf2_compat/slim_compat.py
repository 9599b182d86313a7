"""Imports tf-slim 1.1.0 on TensorFlow 2.21.

tf-slim 1.1.0 (the latest release) still reaches into TensorFlow internals
that moved or disappeared between TF 2.13 and TF 2.21. Importing the package
works, but the first call into `slim.batch_norm`, `slim.learning.train`,
`tfexample_decoder` and friends fails with an AttributeError. This module puts
each missing name back, pointing at the object that replaced it, and only
where the name is missing, so it is a no-op on a TensorFlow that still has
them.

Two more mends, each in a module of its own that says what it changes in
the process and has an `uninstall()`:

  - `tf2_compat.slim_loops`: `slim.learning.train` (its Supervisor threads,
    `sync_optimizer`, `graph=`) runs with eager execution left on; no
    `tf.compat.v1.disable_eager_execution()` is needed or done;
  - `tf2_compat.slim_numpy2`: `slim.assign_from_checkpoint` of partitioned
    variables, the one tf-slim call written for NumPy 1.x.

tf-slim's import of scikit-learn, for its one clustering loss, waits for
that loss's first use: 1.3 to 1.9 s of every start on this project's
machines (`tests/test_slim_compat.py`).

It also imports TensorFlow through `tf2_compat.quiet`, which keeps the lines
of TensorFlow, tf-keras and tf-slim that no user can act on (CUDA stub,
deprecations inside the libraries, session chatter) off stderr;
TF_CPP_MIN_LOG_LEVEL=0 shows them again.

Every module of this project imports slim through here:

    from tf2_compat.slim_compat import slim, tf
"""

import contextlib
import importlib
import importlib.util
import sys
import types

from tf2_compat import quiet

# Before any other import of TensorFlow: the lines its C++ code prints while
# it loads can only be filtered then.
quiet.import_tensorflow()
quiet.filter_library_messages()

# pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import ops
from tensorflow.python.framework import tensor as tensor_lib
from tensorflow.python.ops import array_ops
from tensorflow.python.ops import control_flow_ops
from tensorflow.python.ops import variable_scope
from tf2_compat import patching
from tf2_compat import slim_loops
from tf2_compat import slim_numpy2
# pylint: enable=g-import-not-at-top,wrong-import-position

# (module that tf-slim reads the name from, name, "module:attribute" that
# holds the object on TF 2.21).
_ALIASES = (
    (ops, 'Tensor', 'tensorflow.python.framework.tensor:Tensor'),
    (ops, 'IndexedSlices',
     'tensorflow.python.framework.indexed_slices:IndexedSlices'),
    (array_ops, 'stack', 'tensorflow.python.ops.array_ops_stack:stack'),
    (array_ops, 'unstack', 'tensorflow.python.ops.array_ops_stack:unstack'),
    (control_flow_ops, 'cond', 'tensorflow.python.ops.cond:cond'),
    (control_flow_ops, 'case', 'tensorflow.python.ops.control_flow_case:case'),
    (control_flow_ops, 'Assert',
     'tensorflow.python.ops.control_flow_assert:Assert'),
    (control_flow_ops, 'while_loop',
     'tensorflow.python.ops.while_loop:while_loop'),
    (variable_scope, 'variable', 'tensorflow.python.ops.variable_v1:VariableV1'),
)

# TF's legacy `tensorflow/python/layers/normalization.py` lazily imports this
# module, which tf-keras 2.21 only ships under `tf_keras.src`. Unfused
# `slim.batch_norm` goes through it.
_LEGACY_LAYERS = 'tf_keras.legacy_tf_layers'
_LEGACY_LAYERS_SOURCE = 'tf_keras.src.legacy_tf_layers'


def install_aliases():
  """Restores the TF-internal names tf-slim 1.1.0 uses, where missing.

  Returns:
    The list of names restored, as 'module.name' strings (empty when the
    running TensorFlow already had all of them).
  """
  restored = []
  for module, name, target in _ALIASES:
    if not hasattr(module, name):
      setattr(module, name, patching.resolve(target))
      restored.append('%s.%s' % (module.__name__, name))
  if (_LEGACY_LAYERS not in sys.modules
      and importlib.util.find_spec(_LEGACY_LAYERS) is None):
    # The submodule too: imported through the aliased package it would be
    # found, and run a second time under the alias name, with a
    # BatchNormalization class of its own.
    for suffix in ('', '.normalization'):
      sys.modules[_LEGACY_LAYERS + suffix] = importlib.import_module(
          _LEGACY_LAYERS_SOURCE + suffix)
      restored.append(_LEGACY_LAYERS + suffix)
  return restored


@contextlib.contextmanager
def identity_equality():
  """Builds graph code with TF2 tensor equality off; semantics do not change.

  Inside a tf.Graph (outside tf.function) `==` and `hash` of tensors and
  variables already go by identity, but with equality on every
  `hash(variable)` first asks `executing_eagerly_outside_functions()`.
  tf-keras' legacy layers, under every slim layer, hash all global variables
  at each layer call, so building N clones of a large network spends most of
  its time there (8 inception_v3 clones: 36 s with it on, 19 s off). Where
  eager `==` really compares values, this does nothing.
  """
  if tf.executing_eagerly_outside_functions():
    yield
    return
  saved = tensor_lib.Tensor._USE_EQUALITY  # pylint: disable=protected-access
  tf.disable_tensor_equality()
  try:
    yield
  finally:
    if saved:
      tf.enable_tensor_equality()


class _ImportedOnUse(types.ModuleType):
  """A module that is imported when one of its attributes is first read."""

  def __getattr__(self, attribute):
    return getattr(importlib.import_module(self.__name__), attribute)


@contextlib.contextmanager
def _sklearn_on_first_use():
  """tf-slim imports sklearn.metrics with itself, for one loss
  (losses.metric_learning.cluster_loss), when scikit-learn is installed:
  1.3 to 1.9 s of every start here, with nothing of it used by the
  networks or the training loop. Inside this block scikit-learn looks
  absent; the function it yields gives the module it was imported for a
  stand-in that imports sklearn.metrics when that loss first reads it.
  A program that imported scikit-learn already keeps it as it is.
  """
  if 'sklearn' in sys.modules or importlib.util.find_spec('sklearn') is None:
    yield lambda module: None
    return
  sys.modules['sklearn'] = None  # `import sklearn` raises ImportError.
  try:
    yield _metrics_on_first_use
  finally:
    del sys.modules['sklearn']


def _metrics_on_first_use(metric_learning):
  metric_learning.metrics = _ImportedOnUse('sklearn.metrics')
  metric_learning.HAS_SKLEARN = True


# tf-slim is imported first by slim_loops.install().
with _sklearn_on_first_use() as _defer_sklearn:
  RESTORED = install_aliases()
  # slim.learning.train with eager execution left on.
  LOOP_THREADS = slim_loops.install()
  import tf_slim as slim  # pylint: disable=g-import-not-at-top,wrong-import-position
_defer_sklearn(slim.losses.metric_learning)

# assign_from_checkpoint of partitioned variables on NumPy 2.
NUMPY2_FIXES = slim_numpy2.install()

__all__ = ['slim', 'tf', 'RESTORED', 'LOOP_THREADS', 'NUMPY2_FIXES',
           'identity_equality']
