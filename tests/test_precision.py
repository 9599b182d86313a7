"""Mixed precision in deploy(): float32 weights, low-precision layers,
float32 losses, dynamic loss scaling."""

import re

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from tf2_compat.slim_compat import slim, tf
from tests.script_runner import digits_accuracy
from tests.script_runner import run_script
from training import optimizers


def _model_fn(inputs, dtype):
  def model_fn():
    net = slim.conv2d(tf.cast(inputs, dtype), 4, [3, 3], scope='conv')
    logits = slim.fully_connected(slim.flatten(net), 3, activation_fn=None,
                                  scope='logits')
    tf.losses.sparse_softmax_cross_entropy(
        tf.constant([0, 1, 2, 1], tf.int64), tf.cast(logits, tf.float32))
    return net
  return model_fn


@pytest.mark.parametrize('name,dtype', [('mixed_float16', tf.float16),
                                        ('mixed_bfloat16', tf.bfloat16)])
def test_layers_compute_low_weights_and_loss_stay_float32(graph, name, dtype):
  assert precision.compute_dtype(name) == dtype
  inputs = tf.constant(np.random.RandomState(0).rand(4, 5, 5, 2),
                       tf.float32)
  model = model_deploy.deploy(
      model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True),
      _model_fn(inputs, dtype),
      optimizer=tf.train.GradientDescentOptimizer(0.1), precision=name)
  assert model.clones[0].outputs.dtype == dtype
  conv = graph.get_operation_by_name('clone_0/conv/Conv2D')
  assert conv.get_attr('T') == dtype
  assert {v.dtype.base_dtype for v in tf.trainable_variables()} == {
      tf.float32}
  assert sorted(v.op.name for v in tf.trainable_variables()) == [
      'conv/biases', 'conv/weights', 'logits/biases', 'logits/weights']
  assert model.total_loss.dtype == tf.float32
  scales = [v.op.name for v in tf.global_variables()
            if v.op.name.startswith('loss_scale/')]
  if name == 'mixed_float16':
    assert scales == ['loss_scale/scale', 'loss_scale/finite_steps']
  else:
    assert scales == []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    losses = [sess.run(model.train_op) for _ in range(3)]
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def _scaled_training(growth_steps=2000, initial_scale=2.0 ** 15):
  """A float16 model whose input may be fed an infinite value."""
  inputs = tf.placeholder(tf.float32, [4, 5, 5, 2])
  loss_scale = precision.LossScale(initial_scale, growth_steps)
  model = model_deploy.deploy(
      model_deploy.DeploymentConfig(clone_on_cpu=True),
      _model_fn(inputs, tf.float16),
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      precision='mixed_float16',
      update=update.UpdateOptions(loss_scale=loss_scale))
  good = np.random.RandomState(0).rand(4, 5, 5, 2).astype(np.float32)
  bad = good.copy()
  bad[0, 0, 0, 0] = np.inf
  return model, inputs, loss_scale, good, bad


def _weights(sess):
  return sess.run({v.op.name: v for v in tf.trainable_variables()})


def test_an_overflow_skips_the_update_and_halves_the_scale(graph):
  model, inputs, loss_scale, good, bad = _scaled_training()
  global_step = tf.train.get_global_step()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(model.train_op, {inputs: good})
    before = _weights(sess)
    assert sess.run([global_step, loss_scale.scale,
                     loss_scale.finite_steps]) == [1, 2.0 ** 15, 1]
    sess.run(model.train_op, {inputs: bad})
    after = _weights(sess)
    assert sess.run([global_step, loss_scale.scale,
                     loss_scale.finite_steps]) == [1, 2.0 ** 14, 0]
    for name, value in before.items():
      np.testing.assert_array_equal(after[name], value, err_msg=name)
    sess.run(model.train_op, {inputs: good})
    assert sess.run(global_step) == 2
    assert any(np.any(_weights(sess)[n] != after[n]) for n in after)


def test_the_scale_doubles_after_growth_steps_finite_steps(graph):
  model, inputs, loss_scale, good, _ = _scaled_training(
      growth_steps=3, initial_scale=4.0)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    scales = []
    for _ in range(7):
      sess.run(model.train_op, {inputs: good})
      scales.append(sess.run(loss_scale.scale))
  assert scales == [4.0, 4.0, 8.0, 8.0, 8.0, 16.0, 16.0]


def test_the_scale_is_checkpointed_and_summarised(graph, tmp_path):
  model, inputs, loss_scale, good, bad = _scaled_training()
  tags = []
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(model.train_op, {inputs: bad})
    path = tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'))
    summary = tf.Summary.FromString(sess.run(model.summary_op,
                                             {inputs: good}))
    tags = {v.tag: v.simple_value for v in summary.value}
  assert tags['loss_scale'] == 2.0 ** 14
  assert tf.train.load_checkpoint(path).get_tensor('loss_scale/scale') == (
      2.0 ** 14)


def test_the_update_is_unscaled(graph):
  # With the same start, the float16 step moves the float32 weights like
  # the float32 step does (to float16's precision), not 2^15 times more.
  def first_update(name):
    with tf.Graph().as_default():
      tf.set_random_seed(3)
      inputs = tf.constant(np.random.RandomState(0).rand(4, 5, 5, 2),
                           tf.float32)
      model = model_deploy.deploy(
          model_deploy.DeploymentConfig(clone_on_cpu=True),
          _model_fn(inputs, precision.compute_dtype(name)),
          optimizer=tf.train.GradientDescentOptimizer(0.1), precision=name)
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = _weights(sess)
        sess.run(model.train_op)
        after = _weights(sess)
    return {n: after[n] - before[n] for n in before}

  mixed, full = first_update('mixed_float16'), first_update('float32')
  for name in full:
    np.testing.assert_allclose(mixed[name], full[name], rtol=0.05,
                               atol=2e-3, err_msg=name)
  assert np.abs(full['logits/weights']).max() > 1e-3


@pytest.mark.parametrize('kwargs,message', [
    (dict(precision='float64'), "precision must be one of float32, "
     "mixed_float16, mixed_bfloat16, got 'float64'"),
    (dict(loss_scale=precision.LossScale), "loss_scale is for "
     "precision='mixed_float16', got precision='float32'"),
])
def test_bad_precision_options(graph, kwargs, message):
  # A LossScale makes variables: made here, in the test's graph.
  kwargs = {name: value() if value is precision.LossScale else value
            for name, value in kwargs.items()}
  with pytest.raises(ValueError, match=re.escape(message)):
    model_deploy.deploy(model_deploy.DeploymentConfig(clone_on_cpu=True),
                        lambda: tf.losses.add_loss(tf.constant(1.0)),
                        optimizer=tf.train.GradientDescentOptimizer(0.1),
                        **kwargs)


# The schedule of the >= 97% runs: 300 steps of 32 (6.7 epochs) with the
# learning rate decaying to zero over them, evaluated on the moving averages.
# Eleven float32 runs gave 97.78% to 100% (median 98.61%); 200 steps at a
# fixed rate gave 96.67% to 98.89%, too close to the bar.
MOVING_AVERAGE_DECAY = 0.99


@pytest.mark.slow
@pytest.mark.parametrize('name', ['float32', 'mixed_float16',
                                  'mixed_bfloat16'])
def test_digits_lenet_reaches_97_percent(digits_dir, tmp_path, name):
  train_dir = str(tmp_path / name)
  result = run_script(
      'train_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--precision=%s' % name, '--batch_size=32', '--optimizer=adam',
      '--opt_epsilon=1e-4', '--learning_rate=0.005',
      '--learning_rate_decay_type=polynomial', '--num_epochs_per_decay=6.68',
      '--end_learning_rate=1e-5', '--max_number_of_steps=300',
      '--moving_average_decay=%s' % MOVING_AVERAGE_DECAY,
      '--log_every_n_steps=100', '--shuffle_seed=1', '--random_seed=1',
      '--train_dir=%s' % train_dir, timeout=1800)
  assert result.returncode == 0, result.stdout[-3000:]
  assert digits_accuracy(
      digits_dir, train_dir,
      '--moving_average_decay=%s' % MOVING_AVERAGE_DECAY) >= 97.0


@pytest.mark.parametrize('optimizer', sorted(optimizers.OPTIMIZERS))
def test_every_optimizer_takes_mixed_float16(graph, optimizer):
  # The optimizer sees float32 variables and unscaled float32 gradients.
  inputs = tf.constant(np.random.RandomState(0).rand(4, 5, 5, 2), tf.float32)
  model = model_deploy.deploy(
      model_deploy.DeploymentConfig(clone_on_cpu=True),
      _model_fn(inputs, tf.float16),
      optimizer=optimizers.make_optimizer(
          optimizers.OptimizerConfig(name=optimizer), 0.01),
      precision='mixed_float16')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    before = _weights(sess)
    sess.run(model.train_op)
    after = _weights(sess)
    assert sess.run(tf.train.get_global_step()) == 1
  assert all(np.all(np.isfinite(v)) for v in after.values())
  assert any(np.any(after[n] != before[n]) for n in before)


@pytest.mark.slow
def test_benchmark_writes_its_table(tmp_path):
  import importlib  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  benchmarks = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), 'benchmarks')
  sys.path.insert(0, benchmarks)
  try:
    importlib.import_module('precision').main(
        ['--rounds', '1', '--steps', '1', '--results_dir', str(tmp_path)])
  finally:
    sys.path.remove(benchmarks)
  text = (tmp_path / 'precision.md').read_text()
  assert ('\nCommand: `.venv/bin/python benchmarks/precision.py --rounds 1 '
          '--steps 1 --results_dir %s`\n' % tmp_path in text)
  rows = re.findall(r'^\| (\w+) \| [\d.]+ \| \d+ \| ([\d.]+)x \|$', text,
                    re.M)
  assert [r[0] for r in rows] == ['float32', 'mixed_float16',
                                  'mixed_bfloat16']
  assert rows[0][1] == '1.00'
