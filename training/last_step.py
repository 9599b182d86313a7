"""Asynchronous workers that stop at --max_number_of_steps, not past it,
and checkpoints named after the step they hold.

Each asynchronous worker applies its update and increments the global step
on the ps tasks, then its StopAtStepHook sees whether the last step is
reached. Two workers that both start their step at the last step but one
both apply: training ends one or two steps past --max_number_of_steps (13
runs of 15 with 2 workers), and the final checkpoint with it.

StopsAtLastStep makes each update claim its step first. The claim is one
atomic increment of the global step on its ps task; its value decides:

  * at most the last step: the update is applied (without incrementing the
    global step again);
  * past it: nothing is applied and the claim is given back (the global
    step decremented), so that the global step ends at the last step.

The increment and the read of its result are two ops, so a claim may read
a value raised by another worker's claim in between: it is then refused
although its own step was free, and the worker tries again at its next
step. A claim is never accepted past the last step.

Only asynchronous ps training with several workers needs this: a single
process stops after the step that reaches the last, and synchronous and
all-reduce workers step together.
"""

from deployment import apply_when
from tf2_compat.slim_compat import tf
from training import hooks


def _arrived(tensor):
  """An identity of `tensor` beside it, for ops to depend on: a control
  edge from the op that makes it would be live on both paths of a Switch
  (when `tensor` is one of its outputs), an edge from its identity is dead
  with it. Beside it: only the edge crosses to the op's device.
  """
  with tf.colocate_with(tensor):
    return tf.identity(tensor)


class StopsAtLastStep:
  """An optimizer whose updates stop at `last_step` among asynchronous
  workers; anything but apply_gradients goes to `optimizer`.

  Args:
    optimizer: a tf.compat.v1.train.Optimizer.
    last_step: the global step training stops at.
  """

  def __init__(self, optimizer, last_step):
    self._optimizer = optimizer
    self._last_step = last_step

  def __getattr__(self, name):
    return getattr(self._optimizer, name)

  def compute_gradients(self, *args, **kwargs):
    return self._optimizer.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    """The update, applied only when it claims a step at most the last."""
    if global_step is None:
      return self._optimizer.apply_gradients(grads_and_vars, name=name)
    grads_and_vars = list(grads_and_vars)
    # After the gradients: on a run whose gradients are dead (accumulation
    # between its updates, a non-finite update skipped; see
    # deployment/apply_when.py) no step is claimed, as TF's own increment
    # is skipped then.
    gradients = [_arrived(g.values if isinstance(g, tf.IndexedSlices)
                          else g)
                 for g, _ in grads_and_vars if g is not None]
    with tf.device(global_step.device), tf.name_scope('claim_step'), \
        tf.control_dependencies(gradients):
      one = tf.constant(1, global_step.dtype.base_dtype)
      claim = tf.raw_ops.AssignAddVariableOp(resource=global_step.handle,
                                             value=one)
      with tf.control_dependencies([claim]):
        claimed = tf.raw_ops.ReadVariableOp(resource=global_step.handle,
                                            dtype=one.dtype)
      free = tf.less_equal(claimed, tf.cast(self._last_step, one.dtype))
      # Each output is live on one path only: refused, or free.
      refused, accepted = tf.raw_ops.Switch(data=free, pred=free)
      refused = _arrived(refused)
      with tf.control_dependencies([refused]):
        given_back = tf.raw_ops.AssignSubVariableOp(
            resource=global_step.handle, value=one)
      with tf.control_dependencies([given_back]):
        refused_done = tf.identity(refused)
    applied = self._optimizer.apply_gradients(
        [(None if g is None else apply_when.when_true(g, free), v)
         for g, v in grads_and_vars], name=name)
    with tf.control_dependencies([applied]):
      accepted_done = tf.identity(accepted)
    return tf.group(tf.raw_ops.Merge(inputs=[refused_done,
                                             accepted_done]).output,
                    name='update_or_give_back')


SNAPSHOT_NAME = 'saved_global_step'


class StepSnapshot:
  """The global step a checkpoint is named after, and the one it holds.

  The checkpoint hook reads the global step for the name, then the Saver
  reads it again as it saves; other asynchronous workers step in between,
  so `model.ckpt-2001` could hold global step 2002. The chief's Saver
  saves this snapshot under the global step's name instead, and the hook
  names the checkpoint after the value it took: one read for both.

  A variable of no collection, on the global step's device: no other
  worker initialises, restores or waits for it.

  Args:
    global_step: the global step variable.
  """

  def __init__(self, global_step):
    with tf.device(global_step.device):
      self.variable = tf.Variable(
          0, dtype=global_step.dtype.base_dtype, trainable=False,
          collections=[], name=SNAPSHOT_NAME, use_resource=True)
      taken = tf.raw_ops.AssignVariableOp(
          resource=self.variable.handle, value=global_step.read_value())
      with tf.control_dependencies([taken]):
        self.take = tf.raw_ops.ReadVariableOp(
            resource=self.variable.handle,
            dtype=global_step.dtype.base_dtype)
    self.name = global_step.op.name

  def saved_names(self):
    """{checkpoint name: variable} to save in place of the global step."""
    return {self.name: self.variable}


class SnapshotCheckpointSaverHook(hooks.CheckpointSaverHook):
  """A checkpoint hook that names each checkpoint after the StepSnapshot
  it takes right before saving.

  Args:
    snapshot: the StepSnapshot the hook's saver saves as the global step.
    *args, **kwargs: those of hooks.CheckpointSaverHook.
  """

  def __init__(self, snapshot, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._snapshot = snapshot

  def _save(self, session, step):
    step = int(session.run(self._snapshot.take))
    self._timer.update_last_triggered_step(step)
    return super()._save(session, step)
