"""Gradient accumulation: k runs of the train op make one update.

For a batch that does not fit the devices, each run of the train op (a
micro-step) adds the clones' summed gradients into accumulators; every
k-th run applies the mean of the k accumulated gradients, so the update
equals one step on the whole batch (batch_size x num_clones x k), then
zeroes the accumulators. The global step counts applied updates.

The apply runs only on the k-th run: the accumulated gradients reach the
optimizer through deployment/apply_when.py's Switch, dead on the other
runs, so the optimizer, the global-step increment and a
SyncReplicasOptimizer's push are skipped there (and built outside any
control-flow context, unlike with tf.cond).

Sparse gradients (tf.IndexedSlices) are scatter-added into a dense
accumulator, exactly: the accumulator has the variable's shape anyway, and
the rows of k micro-batches overlap.

The accumulators and the micro-step counter are local variables, on the
worker's CPU: they are not in checkpoints, so a resumed run starts a new
accumulation from zero (the at most k-1 micro-batches of an interrupted
one are not applied), and with ps tasks nothing crosses the network until
the apply step.
"""

from deployment import apply_when
from tf2_compat.slim_compat import tf


def _local_variable(name, initial_value):
  return tf.Variable(initial_value, name=name, trainable=False,
                     collections=[tf.GraphKeys.LOCAL_VARIABLES])


def _add_into(accumulator, grad):
  if isinstance(grad, tf.IndexedSlices):
    return accumulator.scatter_add(grad)
  return accumulator.assign_add(grad)


def accumulate_then_apply(grads_and_vars, steps, apply_fn):
  """Accumulates the gradients; applies their mean every `steps` runs.

  Call under the device the accumulators should live on.

  Args:
    grads_and_vars: (gradient, variable) pairs of one micro-step.
    steps: micro-steps per update, >= 2.
    apply_fn: fn(mean grads_and_vars) -> the op applying them (e.g.
      optimizer.apply_gradients with the global step); it is built once and
      runs only on the k-th micro-step.

  Returns:
    An op that runs one micro-step (and, every `steps`-th time, the apply).
  """
  with tf.name_scope('accumulation'):
    counter = _local_variable('micro_step', tf.constant(0, tf.int64))
    accumulators = [
        _local_variable(var.op.name.replace('/', '_') + '_accumulator',
                        tf.zeros(var.shape, var.dtype.base_dtype))
        for _, var in grads_and_vars]
    added = [_add_into(acc, grad)
             for acc, (grad, _) in zip(accumulators, grads_and_vars)]
    with tf.control_dependencies(added):
      count = counter.assign_add(1)
    is_apply_step = tf.equal(count % steps, 0, name='is_apply_step')
    with tf.control_dependencies([count]):
      sums = [acc.read_value() for acc in accumulators]
    # The `true` outputs carry values only on the apply step.
    means = [apply_when.when_true(total, is_apply_step) / steps
             for total in sums]
  apply_op = apply_fn([(mean, var) for mean, (_, var)
                       in zip(means, grads_and_vars)])
  with tf.name_scope('accumulation'):
    with tf.control_dependencies([apply_op]):
      zeroed = tf.group(*[acc.assign(tf.zeros_like(acc))
                          for acc in accumulators])
    merged = apply_when.either_way(is_apply_step, zeroed)
  return merged.op
