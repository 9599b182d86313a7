"""Ops that run only on the steps where a boolean is True, without tf.cond.

Gradient accumulation applies one run in k, the loss scale skips an update
whose gradients are not finite. Both pass the gradients through the `true`
output of a Switch op, which carries a value only when the predicate is
True: on the other runs it is dead, and every op that depends on it (the
optimizer's update, the global-step increment, a SyncReplicasOptimizer's
push and token wait, the moving averages) is skipped by the executor. A
Merge then joins both paths, so the step completes either way.

Unlike tf.cond, this builds the update outside any control-flow context, so
the optimizer's slot variables and SyncReplicasOptimizer's queues and local
step are created as usual.
"""

from tf2_compat.slim_compat import tf


def when_true(value, pred):
  """`value` (a Tensor or tf.IndexedSlices), live only when `pred` is True."""
  if isinstance(value, tf.IndexedSlices):
    return tf.IndexedSlices(
        tf.raw_ops.Switch(data=value.values, pred=pred)[1],
        tf.raw_ops.Switch(data=value.indices, pred=pred)[1],
        value.dense_shape)
  return tf.raw_ops.Switch(data=value, pred=pred)[1]


def either_way(pred, applied_op):
  """A tensor that arrives when `pred` is False, or True and `applied_op` ran.

  `applied_op` is the op built on `when_true` values: dead when `pred` is
  False. Make what must run every step depend on the result.
  """
  skipped, applied = tf.raw_ops.Switch(data=pred, pred=pred)
  with tf.control_dependencies([applied_op]):
    applied = tf.identity(applied)
  return tf.raw_ops.Merge(inputs=[skipped, applied]).output
