"""Mixed precision: float32 weights, layers computing in float16 or bfloat16.

  float32          everything in float32 (the default).
  mixed_float16    layers compute in float16; the weights stay float32 (the
                   master copy the optimizer updates) and are cast where a
                   layer reads them; the loss and batch-norm statistics are
                   float32; the loss is scaled dynamically (see LossScale)
                   because float16 gradients underflow.
  mixed_bfloat16   the same in bfloat16, which has float32's exponent
                   range, so no loss scaling.

A network computes in the dtype of its inputs: slim's layers ask for
variables of that dtype. `master_weights_getter` (a variable-scope custom
getter that create_clones installs) answers a request for a low-precision
variable with a float32 variable, cast; so casting the images to
`compute_dtype(precision)` in model_fn is the only change, and no network
is edited. Keras layers (tf_keras) take their dtype from a Keras policy
instead and are not covered.
"""

from deployment import apply_when
from tf2_compat.slim_compat import tf

PRECISIONS = ('float32', 'mixed_float16', 'mixed_bfloat16')
_COMPUTE_DTYPES = {'float32': tf.float32, 'mixed_float16': tf.float16,
                   'mixed_bfloat16': tf.bfloat16}


def check_precision(precision):
  if precision not in PRECISIONS:
    raise ValueError('precision must be one of %s, got %r'
                     % (', '.join(PRECISIONS), precision))


def compute_dtype(precision):
  """The dtype layers compute in: cast model inputs to it."""
  check_precision(precision)
  return _COMPUTE_DTYPES[precision]


def check_loss_scale(precision, loss_scale):
  """Raises ValueError for a loss scale given with a precision without one."""
  if loss_scale is not None and precision != 'mixed_float16':
    raise ValueError('loss_scale is for precision=\'mixed_float16\', got '
                     'precision=%r' % (precision,))


def loss_scale_for(precision, loss_scale=None):
  """The LossScale a step of `precision` uses, or None.

  `loss_scale` if given; else, for mixed_float16, one with LossScale's
  defaults: the precision of the clones decides whether the update scales
  its loss, so the default lives here rather than in the update's options.
  Call under the optimizer's device, where the scale's variables go.
  """
  check_loss_scale(precision, loss_scale)
  if loss_scale is None and precision == 'mixed_float16':
    return LossScale()
  return loss_scale


def master_weights_getter(getter, name, *args, dtype=None, **kwargs):
  """A custom getter: low-precision variables are float32 ones, cast."""
  if dtype is not None and tf.as_dtype(dtype).base_dtype in (tf.float16,
                                                             tf.bfloat16):
    variable = getter(name, *args, dtype=tf.float32, **kwargs)
    return tf.cast(variable, dtype, name=name.rsplit('/', 1)[-1] + '_cast')
  return getter(name, *args, dtype=dtype, **kwargs)


# The graph collection of every LossScale's `finite_steps`, where
# training/hooks.py finds them.
LOSS_SCALE_STREAKS = 'loss_scale_finite_steps'

MINIMUM_SCALE = 1.0

# The run is stopped (training/hooks.py) once this many updates in a row
# were skipped at MINIMUM_SCALE. The halvings before that take
# log2(scale) updates, 15 from the default 2**15; at scale 1 the float16
# gradient overflowed unscaled, and no smaller scale is tried. One such
# batch is a spike a run survives; four in a row, each after the scale
# could do no more, is a run that will skip every update.
SKIPS_AT_MINIMUM_TO_STOP = 4


class LossScale:
  """Dynamic loss scaling: its state and the ops that use it.

  The scale starts at `initial_scale`. A step whose unscaled gradient is
  not finite is skipped (weights and global step unchanged) and halves the
  scale (not below MINIMUM_SCALE); after `growth_steps` finite steps in a
  row the scale doubles. The scale and `finite_steps` are variables, saved
  in checkpoints, so a resumed run keeps its scale and its streak:
  `finite_steps` counts the finite updates in a row, and after updates
  skipped at MINIMUM_SCALE it is minus their number (see
  `skips_at_minimum`), the count that stops a run whose gradient never
  becomes finite.

  Create it under the device where the optimizer's ops run.
  """

  def __init__(self, initial_scale=2.0 ** 15, growth_steps=2000):
    if not initial_scale >= 1:
      raise ValueError('initial loss scale must be >= 1, got %r'
                       % (initial_scale,))
    if growth_steps < 1:
      raise ValueError('growth_steps must be >= 1, got %r' % (growth_steps,))
    self.growth_steps = growth_steps
    with tf.variable_scope('loss_scale'):
      self.scale = tf.get_variable(
          'scale', initializer=float(initial_scale), trainable=False)
      self.finite_steps = tf.get_variable(
          'finite_steps', initializer=tf.constant(0, tf.int64),
          trainable=False)
    tf.add_to_collection(LOSS_SCALE_STREAKS, self.finite_steps)

  def scaled(self, loss):
    return loss * tf.cast(self.scale, loss.dtype)

  def unscaled(self, grads_and_vars):
    inverse = 1.0 / self.scale
    pairs = []
    for grad, var in grads_and_vars:
      if isinstance(grad, tf.IndexedSlices):
        grad = tf.IndexedSlices(grad.values * inverse, grad.indices,
                                grad.dense_shape)
      else:
        grad = grad * inverse
      pairs.append((grad, var))
    return pairs

  def apply_if_finite(self, apply_fn):
    """Wraps apply_fn(grads_and_vars): skips the update when a gradient is
    not finite, then updates the scale. The returned op runs whenever its
    gradients arrive, whether they were applied or skipped."""

    def apply(grads_and_vars):
      with tf.name_scope('loss_scale'):
        finite = tf.reduce_all(
            [tf.reduce_all(tf.math.is_finite(_values(g)))
             for g, _ in grads_and_vars], name='all_finite')
        passed = [(apply_when.when_true(grad, finite), var)
                  for grad, var in grads_and_vars]
      applied_op = apply_fn(passed)
      with tf.name_scope('loss_scale'):
        done = apply_when.either_way(finite, applied_op)
        with tf.control_dependencies([done]):
          return self._update(finite)

    return apply

  def _update(self, finite):
    streak = self.finite_steps
    at_minimum = self.scale <= MINIMUM_SCALE
    count = tf.where(
        finite, tf.maximum(streak, 0) + 1,
        tf.where(at_minimum, tf.minimum(streak, 0) - 1,
                 tf.zeros_like(streak)))
    grow = count >= self.growth_steps
    new_scale = tf.where(
        finite, tf.where(grow, self.scale * 2.0, self.scale),
        tf.maximum(self.scale * 0.5, MINIMUM_SCALE))
    return tf.group(
        self.scale.assign(new_scale),
        self.finite_steps.assign(tf.where(grow, tf.zeros_like(count), count)))


def skips_at_minimum(finite_steps):
  """The updates skipped in a row at MINIMUM_SCALE, from the value of a
  LossScale's `finite_steps`."""
  return max(0, -int(finite_steps))


def _values(grad):
  return grad.values if isinstance(grad, tf.IndexedSlices) else grad

