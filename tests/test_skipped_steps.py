"""A gradient that is never finite stops the run with one error line
instead of skipping or corrupting updates for ever: under the dynamic loss
scale of mixed_float16 (every update skipped), and through the float16
all-reduce of --gradient_compression=fp16 (an overflow, not the learning
rate)."""

import os

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from tests.script_runner import file_digests
from tests.test_all_reduce import Cluster
from tf2_compat.slim_compat import tf
from training import cli
from training import hooks
from training.errors import NonFiniteGradients

# More runs than any test needs: only stops a hang.
MAX_RUNS = 100
# Fed as the input, these make the gradient c * x (loss = c * x * w):
# finite at every scale up to 2**15 for GOOD, beyond float16's 65504 even
# unscaled for BAD.
GOOD, BAD = 0.5, 6e4
C = 2.0


def _model_fn(inputs, dtype):
  """loss = C * x * w + w^2 (the square makes an infinite w a NaN loss);
  `w` starts at 1e-3, so the loss of BAD is finite."""
  def model_fn():
    weight = tf.get_variable('w', [], dtype,
                             initializer=tf.constant_initializer(1e-3))
    product = tf.cast(inputs * (weight * tf.cast(C, dtype)), tf.float32)
    tf.losses.add_loss(tf.reduce_sum(product)
                       + tf.square(tf.cast(weight, tf.float32)))
    return product
  return model_fn


def _train(train_dir, model, inputs, feeds, is_chief=True, master='',
           session_config=None):
  """Runs model.train_op with hooks.session_hooks, as the script orders
  them, feeding `feeds` in turn, GOOD ones first.

  Returns:
    (runs made, the error that stopped them or None, train_dir's digests
    after the GOOD runs).
  """
  saver = tf.train.Saver(save_relative_paths=True)
  chief = [hooks.CheckpointSaverHook(
      train_dir, save_steps=1000, saver=saver,
      listeners=[hooks.FiniteWeightsGuard(tf.global_variables())])]
  runs, digests = 0, None
  try:
    with tf.train.MonitoredTrainingSession(
        master=master, is_chief=True,
        checkpoint_dir=train_dir if is_chief else None,
        scaffold=tf.train.Scaffold(saver=saver),
        save_checkpoint_secs=None, save_checkpoint_steps=None,
        save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None, config=session_config,
        hooks=hooks.session_hooks(model.total_loss, is_chief, chief,
                                  [])) as session:
      for value in feeds:
        if digests is None and value != feeds[0]:
          digests = file_digests(train_dir)
        runs += 1
        session.run(model.train_op, {inputs: [value]})
  except (NonFiniteGradients, hooks.NanLossError,
          hooks.NonFiniteWeightsError) as e:
    return runs, e, digests
  return runs, None, digests


def _mixed_float16_model():
  inputs = tf.placeholder(tf.float16, [1])
  return model_deploy.deploy(
      model_deploy.DeploymentConfig(clone_on_cpu=True),
      _model_fn(inputs, tf.float16),
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      precision='mixed_float16'), inputs


FLOAT16_LINE = (
    'training stopped at step 2: every update was skipped, the weights are '
    'those of the last finite one and no checkpoint is written at the '
    'stop; the gradient was not finite even at loss scale 1 (halved to its '
    'minimum, then 4 updates in a row skipped there too): float16 '
    'overflows whatever the scale. Train with --precision=mixed_bfloat16 '
    "(float32's range) or --precision=float32, or look for inf or NaN in "
    'the input data, and run again: it resumes from the latest checkpoint.')


def test_a_gradient_never_finite_stops_once_the_scale_can_do_no_more(
    graph, tmp_path):
  del graph
  train_dir = str(tmp_path)
  model, inputs = _mixed_float16_model()
  runs, error, saved = _train(train_dir, model, inputs,
                              [GOOD] * 2 + [BAD] * MAX_RUNS)
  # 2 updates, then 15 halvings from 2**15 reach 1, then 4 skips there.
  assert runs == 2 + 15 + precision.SKIPS_AT_MINIMUM_TO_STOP
  assert isinstance(error, NonFiniteGradients), error
  assert error.lines == (FLOAT16_LINE,)
  # Nothing written at the stop (a normal end saves step 2, its scale 1).
  assert sorted(name for name in saved if name.startswith('model.')) == [
      'model.ckpt-0.data-00000-of-00001', 'model.ckpt-0.index',
      'model.ckpt-0.meta']
  assert file_digests(train_dir) == saved


def test_the_stop_is_one_error_line_and_exit_status_2(graph, tmp_path,
                                                      capsys):
  del graph
  model, inputs = _mixed_float16_model()

  def body():
    raise _train(str(tmp_path), model, inputs, [GOOD] * 2 + [BAD] * 50)[1]

  with pytest.raises(SystemExit) as exited:
    cli.run_main(body)
  assert exited.value.code == 2
  assert capsys.readouterr().err.splitlines() == ['error: ' + FLOAT16_LINE]


def test_a_finite_update_at_scale_1_restarts_the_count(graph, tmp_path):
  del graph
  model, inputs = _mixed_float16_model()
  bound = precision.SKIPS_AT_MINIMUM_TO_STOP
  feeds = [GOOD] + [BAD] * (15 + bound - 1) + [GOOD] + [BAD] * (bound - 1)
  runs, error, _ = _train(str(tmp_path), model, inputs, feeds)
  assert (runs, error) == (len(feeds), None)


def _compressed_replicas(tmp_path, precision_name, num_clones, feeds):
  """Two all-reduce replicas with fp16 compression, each fed `feeds`; their
  (runs, error) and the chief's train_dir: its digests after the GOOD
  runs, and its path."""
  cluster = Cluster(2, num_clones=num_clones)

  def replica(index, server):
    config = cluster.deployment(index)
    with tf.Graph().as_default():
      dtype = precision.compute_dtype(precision_name)
      inputs = tf.placeholder(dtype, [1])
      model = model_deploy.deploy(
          config, _model_fn(inputs, dtype),
          optimizer=tf.train.GradientDescentOptimizer(0.1),
          precision=precision_name,
          update=update.UpdateOptions(gradient_compression='fp16'))
      return _train(str(tmp_path / str(index)), model, inputs, feeds,
                    index == 0, server.target, model_deploy.session_config(
                        config, device_filters=['/job:worker/task:%d' % index]))

  results = cluster.run(replica)
  return [result[:2] for result in results], results[0][2], str(
      tmp_path / '0')


COMPRESSION = (
    'the all-reduce of the gradients, compressed to float16 by '
    '--gradient_compression=fp16, overflowed (a gradient averaged over the '
    "workers was beyond float16's largest value, 65504)")
COMPRESSION_FIX = (
    "Use --gradient_compression=bf16 (float32's range in 16 bits) or "
    '--gradient_compression=none and run again: it resumes from the latest '
    'checkpoint.')


def test_an_overflowing_compressed_all_reduce_is_named_not_the_learning_rate(
    tmp_path):
  # Each replica's gradient C * BAD = 1.2e5 is finite in float32; the
  # halves, 6e4, fit float16 too, but their sum does not.
  results, saved, train_dir = _compressed_replicas(
      tmp_path, 'float32', 1, [GOOD] * 2 + [BAD] * MAX_RUNS)
  for runs, error in results:
    # The overflow's update (step 3) made w infinite, the next run's loss
    # NaN: the NaN-loss hook used to blame the learning rate there.
    assert runs == 4
    assert isinstance(error, NonFiniteGradients), error
    assert error.lines == (
        'training stopped at step 4: %s, and its update made the weights NaN '
        'or infinite; no checkpoint holds them. The learning rate is not the '
        'cause. %s' % (COMPRESSION, COMPRESSION_FIX),)
  assert file_digests(train_dir) == saved


def test_mixed_float16_skipping_every_compressed_update_blames_the_all_reduce(
    tmp_path):
  # Each of 2 clones has half the loss: at scale 1 its float16 gradient
  # C * 4e4 / 2 = 4e4 is finite; summed over the clones and halved for
  # the 2 replicas, 4e4 is sent, and the sum, 8e4, overflows. (Above scale
  # 1 the clones' own float16 gradients overflow.)
  results, saved, train_dir = _compressed_replicas(
      tmp_path, 'mixed_float16', 2, [GOOD] * 2 + [4e4] * MAX_RUNS)
  for runs, error in results:
    assert runs == 2 + 15 + precision.SKIPS_AT_MINIMUM_TO_STOP
    assert isinstance(error, NonFiniteGradients), error
    assert error.lines == (
        'training stopped at step 2: every update was skipped, the weights '
        'are those of the last finite one and no checkpoint is written at '
        'the stop; %s, and the loss scale cannot help: the gradients are '
        'unscaled before the all-reduce. %s' % (COMPRESSION, COMPRESSION_FIX),)
  assert file_digests(train_dir) == saved
