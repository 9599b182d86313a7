"""Checks of model_deploy's public arguments, with messages naming the fix.

deploy(), create_clones() and optimize_clones() hand `model_fn` and
`optimizer` on to TensorFlow, which fails late and obscurely on the wrong
kind of object: `optimizer='sgd'` raises "'str' object has no attribute
'compute_gradients'", and a tf_keras optimizer complains of a missing
`var_list` as if one more argument would fix it. Keras optimizers cannot
work here at all: they apply gradients through tf.Variables of their own
and have no graph-mode `compute_gradients(loss)`. The public functions call
these checks once, on entry, before anything is added to the graph.

The integer checks are here too, one for each kind of message: a
DeploymentConfig's counts (TypeError for a non-integer) and the update's
(ValueError, as deploy() always raised).
"""

import numbers

import numpy as np

from tf2_compat.slim_compat import tf

# The largest float32: a bound the graph computes in float32 must not pass
# it (1e39 becomes inf there).
FLOAT32_MAX = float(np.finfo(np.float32).max)

# Keras optimizer class name -> the tf.compat.v1.train optimizer doing the
# same update.
_TF1_EQUIVALENTS = {
    'SGD': 'GradientDescentOptimizer(learning_rate) (MomentumOptimizer('
           'learning_rate, momentum) for SGD with momentum)',
    'Adam': 'AdamOptimizer(learning_rate)',
    'RMSprop': 'RMSPropOptimizer(learning_rate)',
    'Adagrad': 'AdagradOptimizer(learning_rate)',
    'Adadelta': 'AdadeltaOptimizer(learning_rate)',
    'Ftrl': 'FtrlOptimizer(learning_rate)',
}

_OPTIMIZER_EXAMPLE = 'tf.compat.v1.train.GradientDescentOptimizer(0.1)'


def described(value):
  """'the str 'sgd'', 'a keras.src.optimizers.sgd.SGD': what was given."""
  kind = type(value)
  if kind in (str, bytes, int, float, bool, list, tuple, dict):
    text = repr(value)
    if len(text) > 60:
      text = text[:57] + '...'
    return 'the %s %s' % (kind.__name__, text)
  if value is None:
    return 'None'
  return 'a %s.%s' % (kind.__module__, kind.__qualname__)


def _is_keras(value):
  """Whether `value`'s class comes from Keras (keras, tf_keras, tf.keras)."""
  for cls in type(value).__mro__:
    root = cls.__module__.split('.')[0]
    if root in ('keras', 'tf_keras') or '.keras.' in cls.__module__ + '.':
      return True
  return False


def check_model_fn(model_fn):
  """Raises TypeError unless model_fn is callable."""
  if not callable(model_fn):
    raise TypeError(
        'model_fn must be callable: a function that builds one clone\'s '
        'model and adds its losses (e.g. with tf.losses.*); got %s'
        % described(model_fn))


def check_optimizer(optimizer, function):
  """Raises TypeError unless `optimizer` can be given to `function`.

  A tf.compat.v1.train.Optimizer (SyncReplicasOptimizer included) passes, as
  does any other object with the two methods model_deploy calls,
  compute_gradients(loss, ...) and apply_gradients(grads_and_vars, ...), the
  duck typing upstream Slim relied on. A Keras optimizer does not, although
  it has methods of those names.
  """
  if isinstance(optimizer, tf.train.Optimizer):
    return
  if _is_keras(optimizer):
    equivalent = _TF1_EQUIVALENTS.get(type(optimizer).__name__)
    raise TypeError(
        'optimizer: Keras optimizers are not supported by %s() (it builds '
        'a graph-mode tf.compat.v1 train op); got %s. Pass %s instead'
        % (function, described(optimizer),
           'its equivalent tf.compat.v1.train.' + equivalent if equivalent
           else 'a tf.compat.v1.train.Optimizer (e.g. %s)'
           % _OPTIMIZER_EXAMPLE))
  if not all(callable(getattr(optimizer, method, None))
             for method in ('compute_gradients', 'apply_gradients')):
    raise TypeError(
        'optimizer must be a tf.compat.v1.train.Optimizer (e.g. %s)%s; got %s'
        % (_OPTIMIZER_EXAMPLE,
           ', or None to build only the losses' if function == 'deploy'
           else '', described(optimizer)))


def is_integer(value):
  """Whether `value` is an integer (a bool is not, although Python agrees)."""
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name, value, minimum):
  """Raises TypeError for a non-integer, ValueError below `minimum`."""
  if not is_integer(value):
    raise TypeError('%s must be an integer, got %r' % (name, value))
  if value < minimum:
    raise ValueError('%s must be >= %d, got %d' % (name, minimum, value))


def check_count(name, value, allow_none=False):
  """Raises ValueError unless `value` is an integer >= 1 (or an allowed
  None)."""
  if value is None and allow_none:
    return
  if not is_integer(value) or value < 1:
    raise ValueError('%s must be an integer >= 1%s, got %r'
                     % (name, ' (or None)' if allow_none else '', value))


def is_real(value):
  """Whether `value` is a real number (a bool is not)."""
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def fits_float32(value):
  """Whether the number `value` is > 0 and finite in float32."""
  return 0 < value <= FLOAT32_MAX


def check_float32_bound(name, value, none_means):
  """Raises TypeError unless `value` is a real number (or None, which
  means `none_means`), ValueError unless fits_float32."""
  if value is None:
    return
  if not is_real(value):
    raise TypeError('%s must be a number (or None: %s), got %s'
                    % (name, none_means, described(value)))
  if not fits_float32(value):
    raise ValueError('%s must be > 0 and at most %.7g, float32\'s largest '
                     '(or None: %s), got %r'
                     % (name, FLOAT32_MAX, none_means, value))
