"""update.train_step: deploy(update=...) reaches it unchanged, and its
stages run in the order its body lists them (read off the built graph)."""

import re

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from tf2_compat.slim_compat import slim, tf

CPU_CLONES = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
# Two all-reduce replicas; their graphs build without the cluster.
REPLICAS = model_deploy.DeploymentConfig(num_replicas=2, replica_id=0)


def _model_fn():
  inputs = tf.constant(np.random.RandomState(0).rand(4, 3), tf.float32)
  labels = tf.constant([[1.0], [0.0], [2.0], [1.0]])
  predictions = slim.fully_connected(inputs, 1, activation_fn=None,
                                     scope='linear')
  tf.losses.mean_squared_error(labels, predictions)


def _deploy(config=CPU_CLONES, **kwargs):
  tf.set_random_seed(1)
  return model_deploy.deploy(config, _model_fn,
                             optimizer=tf.train.GradientDescentOptimizer(0.1),
                             **kwargs)


def _ancestors(op):
  """The ops `op` waits for: through its inputs and control inputs."""
  seen, pending = set(), [op]
  while pending:
    current = pending.pop()
    for parent in [t.op for t in current.inputs] + current.control_inputs:
      if parent not in seen:
        seen.add(parent)
        pending.append(parent)
  return seen


def _ops(graph, op_type):
  return [op for op in graph.get_operations() if op.type == op_type]


def test_update_reaches_the_step_unchanged(monkeypatch):
  options = update.UpdateOptions(accumulation_steps=2,
                                 clip_gradient_norm=1.0)
  given = []
  train_step = update.train_step

  def recording_train_step(config, clones, optimizer, global_step, options,
                           *args, **kwargs):
    given.append(options)
    return train_step(config, clones, optimizer, global_step, options, *args,
                      **kwargs)

  monkeypatch.setattr(update, 'train_step', recording_train_step)
  for kwargs in (dict(update=options), {}):
    with tf.Graph().as_default():
      _deploy(**kwargs)
  assert given[0] is options
  assert given[1] == update.UpdateOptions()


def _train(steps, **kwargs):
  with tf.Graph().as_default():
    model = _deploy(**kwargs)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.local_variables_initializer())
      losses = [sess.run(model.train_op) for _ in range(steps)]
      weights = sess.run(tf.trainable_variables())
  return losses, weights


def test_flat_arguments_warn_and_train_as_update_does():
  with pytest.warns(DeprecationWarning) as warned:
    flat_losses, flat_weights = _train(
        4, accumulation_steps=2, clip_gradient_norm=0.5)
  losses, weights = _train(4, update=update.UpdateOptions(
      accumulation_steps=2, clip_gradient_norm=0.5))
  ours = [w for w in warned if 'deploy(' in str(w.message)]
  assert [w.filename for w in ours] == [__file__]  # The caller's line.
  assert [str(w.message) for w in ours] == [
      'deploy(accumulation_steps=..., clip_gradient_norm=...) is deprecated '
      'and goes in the next release; pass update=deployment.update.'
      'UpdateOptions(accumulation_steps=..., clip_gradient_norm=...) '
      'instead']
  assert flat_losses == losses
  assert losses[0] == losses[1] and losses[1] != losses[2]  # k = 2
  for flat, given in zip(flat_weights, weights):
    np.testing.assert_array_equal(flat, given)


def test_update_and_a_flat_argument_together_are_refused(graph):
  with pytest.raises(ValueError, match=re.escape(
      'deploy() got update=UpdateOptions(accumulation_steps=2, '
      'clip_gradient_norm=None, loss_scale=None, all_reduce_buffer_bytes='
      "4194304, replica_averaging_steps=None, gradient_compression='none') "
      'and also clip_gradient_norm; '
      'give the options once: put clip_gradient_norm in '
      'update=UpdateOptions(...)')):
    _deploy(update=update.UpdateOptions(accumulation_steps=2),
            clip_gradient_norm=1.0)
  assert not tf.global_variables()  # Refused before building anything.


@pytest.mark.parametrize('kwargs,error,message', [
    (dict(update={'accumulation_steps': 2}), TypeError,
     "update must be a deployment.update.UpdateOptions (or None), got "
     "{'accumulation_steps': 2}"),
    (dict(accumulation_step=2), TypeError,
     "deploy() got an unexpected keyword argument 'accumulation_step'"),
    # Options newer than the flat arguments come only in an UpdateOptions.
    (dict(gradient_compression='fp16'), TypeError,
     "deploy() got an unexpected keyword argument 'gradient_compression'"),
    (dict(update=update.UpdateOptions(replica_averaging_steps=2)),
     ValueError, 'replica_averaging_steps=2 needs all-reduce replicas'),
])
def test_bad_update_is_refused_with_its_fix(graph, kwargs, error, message):
  with pytest.raises(error, match=re.escape(message)):
    _deploy(**kwargs)


def test_a_loss_scale_without_mixed_float16_is_refused(graph):
  options = update.UpdateOptions(loss_scale=precision.LossScale())
  with pytest.raises(ValueError, match=re.escape(
      "loss_scale is for precision='mixed_float16', got "
      "precision='float32'")):
    _deploy(update=options)


def test_loss_is_scaled_before_the_clone_sum_and_unscaled_after(graph):
  _deploy(precision='mixed_float16')
  [summed] = [op for op in _ops(graph, 'AddN')
              if op.name == 'linear/weights/sum_grads']
  scale_reads = {op.name for op in _ancestors(summed)
                 if op.type == 'ReadVariableOp'
                 and op.inputs[0].op.name == 'loss_scale/scale'}
  assert scale_reads == {'clone_0/mul/ReadVariableOp',
                         'clone_1/mul/ReadVariableOp'}
  [unscaled] = [op for op in _ops(graph, 'Mul')
                if summed.outputs[0] in list(op.inputs)]
  inverse = unscaled.inputs[1].op  # 1 / scale
  assert (inverse.type, inverse.inputs[1].op.inputs[0].op.name) == (
      'RealDiv', 'loss_scale/scale')


def test_clip_reads_the_all_reduced_gradient(graph):
  _deploy(REPLICAS, update=update.UpdateOptions(clip_gradient_norm=1.0))
  [collective] = _ops(graph, 'CollectiveReduceV2')
  clipped = graph.get_operation_by_name(
      'clip_by_global_norm/clip_by_global_norm/_0')
  assert collective in _ancestors(clipped)
  assert collective.device == '/job:worker/task:0/device:CPU:0'


def test_with_accumulation_the_all_reduce_runs_on_the_apply_step_only(graph):
  _deploy(REPLICAS, update=update.UpdateOptions(accumulation_steps=2))
  [collective] = _ops(graph, 'CollectiveReduceV2')
  switches = {op.name for op in _ancestors(collective)
              if op.type == 'Switch'}
  # The `true` outputs of accumulation's Switch: dead but on the k-th run.
  assert switches == {'accumulation/Switch', 'accumulation/Switch_1'}
  is_apply_step = graph.get_operation_by_name('accumulation/is_apply_step')
  assert is_apply_step in _ancestors(collective)


def test_finite_check_judges_the_all_reduced_gradient(graph):
  _deploy(REPLICAS, precision='mixed_float16')
  [collective] = _ops(graph, 'CollectiveReduceV2')
  [all_finite] = [op for op in graph.get_operations()
                  if op.name.endswith('/all_finite')]
  assert collective in _ancestors(all_finite)
  [applied] = _ops(graph, 'ResourceApplyGradientDescent')[:1]
  assert all_finite in _ancestors(applied)


def test_replica_averaging_follows_the_apply(graph):
  _deploy(REPLICAS, update=update.UpdateOptions(replica_averaging_steps=3))
  averaging = graph.get_operation_by_name('average_replicas')
  ancestors = _ancestors(averaging)
  step_increment = [op for op in ancestors
                    if op.type == 'AssignAddVariableOp'
                    and op.inputs[0].op.name == 'global_step']
  assert step_increment
  assert _ops(graph, 'ResourceApplyGradientDescent')[0] in ancestors
  assert not _ops(graph, 'CollectiveReduceV2')  # No gradient all-reduce.


def test_moving_averages_read_the_updated_weights(graph):
  with tf.device('/cpu:0'):
    step = tf.train.get_or_create_global_step()
  _deploy(variable_averages=tf.train.ExponentialMovingAverage(0.9, step),
          variables_to_average=lambda: tf.trainable_variables())
  averaged = [op.name for op in _ops(graph, 'AssignSubVariableOp')
              if op.name.startswith('ExponentialMovingAverage/')]
  assert averaged == [
      'ExponentialMovingAverage/AssignMovingAvg/AssignSubVariableOp',
      'ExponentialMovingAverage/AssignMovingAvg_1/AssignSubVariableOp']
  applied = _ops(graph, 'ResourceApplyGradientDescent')
  for name in averaged:
    assert set(applied) <= _ancestors(graph.get_operation_by_name(name))
