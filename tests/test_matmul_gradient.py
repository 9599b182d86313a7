"""The MatMul gradient of CPU clones: TensorFlow's values, faster ops."""

import os
import re
import subprocess
import sys
import types

from absl.testing import flagsaver
import numpy as np
import pytest

from deployment import matmul_gradient
from deployment import model_deploy
from nets import lenet
from tf2_compat.slim_compat import slim, tf


def _gradients(shape_a, shape_b, transpose_a, transpose_b, override):
  """Both inputs' gradients of a weighted sum of one MatMul, in float64."""
  rng = np.random.default_rng(7)
  a = tf.constant(rng.standard_normal(shape_a))
  b = tf.constant(rng.standard_normal(shape_b))
  graph = tf.get_default_graph()
  if override:
    with graph.gradient_override_map({'MatMul': matmul_gradient.GRADIENT_NAME}):
      product = tf.matmul(a, b, transpose_a=transpose_a,
                          transpose_b=transpose_b)
  else:
    product = tf.matmul(a, b, transpose_a=transpose_a,
                        transpose_b=transpose_b)
  weights = tf.constant(rng.standard_normal(product.shape.as_list()))
  return tf.gradients(tf.reduce_sum(product * weights), [a, b])


@pytest.mark.parametrize('transpose_a', [False, True])
@pytest.mark.parametrize('transpose_b', [False, True])
@pytest.mark.parametrize('rows,inner,columns', [
    (4, 64, 300),   # a fully connected layer: small batch, large weights
    (300, 64, 4),   # the other way round: large input, small weights
])
def test_both_gradients_equal_tensorflow_s(graph, transpose_a, transpose_b,
                                           rows, inner, columns):
  shape_a = (inner, rows) if transpose_a else (rows, inner)
  shape_b = (columns, inner) if transpose_b else (inner, columns)
  ours = _gradients(shape_a, shape_b, transpose_a, transpose_b, True)
  theirs = _gradients(shape_a, shape_b, transpose_a, transpose_b, False)
  with tf.Session() as session:
    ours, theirs = session.run([ours, theirs])
  for mine, reference, shape in zip(ours, theirs, (shape_a, shape_b)):
    assert mine.shape == shape
    np.testing.assert_allclose(mine, reference, rtol=1e-12, atol=1e-12)


def _matmuls(graph):
  return [op for op in graph.get_operations() if op.type == 'MatMul']


@pytest.mark.parametrize('x_rows', [None, 8])
def test_times_transposed_transposes_the_small_side(graph, x_rows):
  x = tf.placeholder(tf.float32, [x_rows, 1024])
  w = tf.zeros([3136, 1024])
  product = matmul_gradient.times_transposed(x, w)
  assert product.shape.as_list() == [x_rows, 3136]
  assert product.op.type == 'Transpose'
  (matmul,) = _matmuls(graph)
  assert [t.name for t in matmul.inputs] == [w.name, x.name]
  assert matmul.get_attr('transpose_b') and not matmul.get_attr('transpose_a')


def test_times_transposed_keeps_the_plain_product_for_small_weights(graph):
  x = tf.zeros([3136, 8])
  w = tf.zeros([4, 8])
  product = matmul_gradient.times_transposed(x, w)
  assert product.op.type == 'MatMul'
  assert [t.name for t in product.op.inputs] == [x.name, w.name]
  assert product.op.get_attr('transpose_b')
  assert not [op for op in graph.get_operations() if op.type == 'Transpose']


def _lenet_model_fn():
  images = tf.zeros([4, 28, 28, 1])
  labels = tf.one_hot(tf.zeros([4], tf.int32), 10)
  with slim.arg_scope(lenet.lenet_arg_scope()):
    logits, _ = lenet.lenet(images, num_classes=10)
  tf.losses.softmax_cross_entropy(labels, logits)


def _lenet_clones(config):
  return model_deploy.create_clones(config, _lenet_model_fn)


def _fc3_input_gradient(graph):
  fc3 = graph.get_operation_by_name('LeNet/fc3/MatMul')
  (gradient,) = tf.gradients(tf.losses.get_total_loss(), [fc3.inputs[0]])
  return fc3, gradient


def test_cpu_clones_get_the_gradient_with_the_weights_untransposed(graph):
  _lenet_clones(model_deploy.DeploymentConfig(clone_on_cpu=True))
  fc3, gradient = _fc3_input_gradient(graph)
  assert fc3.get_attr('_gradient_op_type') == (
      matmul_gradient.GRADIENT_NAME.encode())
  assert gradient.op.type == 'Transpose'
  weights = fc3.inputs[1]
  transposed_weights = [op.name for op in _matmuls(graph)
                        if op.inputs[1] is weights and
                        op.get_attr('transpose_b')]
  assert not transposed_weights


@pytest.mark.parametrize('place', ['gpu', 'gpu_of_a_cpu_named_job',
                                   'default_gradient'])
def test_gpu_clones_and_default_gradient_keep_tensorflow_s(graph, place):
  if place == 'gpu':
    _lenet_clones(model_deploy.DeploymentConfig())
  elif place == 'gpu_of_a_cpu_named_job':
    _lenet_clones(model_deploy.DeploymentConfig(worker_job_name='cpu_pool',
                                                num_ps_tasks=1))
  else:
    with matmul_gradient.default_gradient():
      _lenet_clones(model_deploy.DeploymentConfig(clone_on_cpu=True))
  fc3, gradient = _fc3_input_gradient(graph)
  with pytest.raises(ValueError, match='_gradient_op_type'):
    fc3.get_attr('_gradient_op_type')
  assert gradient.op.type == 'MatMul'
  assert gradient.op.inputs[1] is fc3.inputs[1]
  assert gradient.op.get_attr('transpose_b')


def _trained_lenet_weights(default_gradient, steps=3):
  """LeNet's fc3 weights and loss after `steps` SGD steps on 2 CPU clones."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(3)
    rng = np.random.default_rng(5)
    images = tf.constant(rng.random((8, 28, 28, 1), np.float32))
    labels = tf.one_hot(tf.constant(rng.integers(0, 10, 8)), 10)
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)

    def model_fn():  # each clone sees the whole batch
      with slim.arg_scope(lenet.lenet_arg_scope()):
        logits, _ = lenet.lenet(images, num_classes=10,
                                dropout_keep_prob=1.0)
      tf.losses.softmax_cross_entropy(labels, logits)

    if default_gradient:
      with matmul_gradient.default_gradient():
        model = model_deploy.deploy(
            config, model_fn,
            optimizer=tf.train.GradientDescentOptimizer(0.001))
    else:
      model = model_deploy.deploy(
          config, model_fn,
          optimizer=tf.train.GradientDescentOptimizer(0.001))
    (weights,) = [v for v in tf.global_variables()
                  if v.op.name == 'LeNet/fc3/weights']
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      losses = [session.run(model.train_op) for _ in range(steps)]
      return losses, session.run(weights)


def test_lenet_trains_to_the_same_weights_with_either_gradient():
  losses, weights = _trained_lenet_weights(default_gradient=False)
  reference_losses, reference_weights = _trained_lenet_weights(
      default_gradient=True)
  np.testing.assert_allclose(losses, reference_losses, rtol=1e-5)
  np.testing.assert_allclose(weights, reference_weights, atol=1e-5)
  assert losses[-1] < losses[0]


def _benchmark():
  benchmarks = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), 'benchmarks')
  if benchmarks not in sys.path:
    sys.path.insert(0, benchmarks)
  import matmul_gradient as benchmark  # pylint: disable=g-import-not-at-top
  return benchmark


def test_benchmark_table_gives_medians_and_their_ratio():
  benchmark = _benchmark()
  tensorflow_s, clones = benchmark.VARIANTS
  lines = benchmark.table({4: {tensorflow_s: [0.046, 0.044, 0.050],
                               clones: [0.004, 0.005, 0.003]}})
  assert lines[2] == ('| 4 | 46.00 | 4.00 | 11.50x | '
                      '46.0 / 4.0; 44.0 / 5.0; 50.0 / 3.0 |')


def test_benchmark_round_means_average_each_rounds_runs():
  benchmark = _benchmark()
  graph = types.SimpleNamespace(step_seconds=[0.01, 0.03, 0.02, 0.04])
  assert benchmark.round_means(graph, 2) == pytest.approx([0.02, 0.03])


def test_benchmark_writes_both_tables(tmp_path, digits_dir):
  benchmark = _benchmark()
  with flagsaver.flagsaver():
    path = benchmark.main(['--batches', '4', '--rounds', '1', '--steps', '2',
                           '--warmup', '1', '--dataset_dir', digits_dir,
                           '--results_dir', str(tmp_path)])
  with open(path) as f:
    text = f.read()
  rows = re.findall(r'^\| 4 \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \|', text,
                    re.MULTILINE)
  assert len(rows) == 2  # the product, then the step
  for tensorflow_ms, clones_ms, ratio in rows:
    assert float(ratio) == pytest.approx(
        float(tensorflow_ms) / float(clones_ms), rel=0.01)  # rounded
  assert '## A LeNet training step' in text


def _deployed_lenet(through):
  """LeNet on a CPU clone, its gradients built by deploy() or by
  create_clones + optimize_clones; the fc3 MatMul op."""
  config = model_deploy.DeploymentConfig(clone_on_cpu=True)
  optimizer = tf.train.GradientDescentOptimizer(0.01)
  if through == 'deploy':
    model_deploy.deploy(config, _lenet_model_fn, optimizer=optimizer)
  else:
    clones = _lenet_clones(config)
    model_deploy.optimize_clones(clones, optimizer)
  return tf.get_default_graph().get_operation_by_name('LeNet/fc3/MatMul')


def test_deploy_without_optimizer_leaves_no_name_either(graph):
  model_deploy.deploy(model_deploy.DeploymentConfig(clone_on_cpu=True),
                      _lenet_model_fn)
  fc3 = graph.get_operation_by_name('LeNet/fc3/MatMul')
  with pytest.raises(ValueError, match='_gradient_op_type'):
    fc3.get_attr('_gradient_op_type')


def test_a_callers_own_matmul_gradient_stays_in_force(graph):
  with graph.gradient_override_map({'MatMul': 'Callers_MatMul_gradient'}):
    _lenet_clones(model_deploy.DeploymentConfig(clone_on_cpu=True))
  fc3 = graph.get_operation_by_name('LeNet/fc3/MatMul')
  assert fc3.get_attr('_gradient_op_type') == b'Callers_MatMul_gradient'


@pytest.mark.parametrize('through', ['deploy', 'optimize_clones'])
def test_the_gradient_s_name_is_gone_once_the_gradients_are_built(
    graph, through):
  fc3 = _deployed_lenet(through)
  with pytest.raises(ValueError, match='_gradient_op_type'):
    fc3.get_attr('_gradient_op_type')
  # The gradient built before is still the fast one: the input's gradient
  # multiplies the weights untransposed.
  weights = fc3.inputs[1]
  uses = [op for op in _matmuls(graph) if weights in list(op.inputs)]
  assert sorted((op.name, op.get_attr('transpose_b')) for op in uses) == [
      ('LeNet/fc3/MatMul', False),
      ('gradients/LeNet/fc3/MatMul_grad/MatMul', True)]
  gradient = graph.get_operation_by_name(
      'gradients/LeNet/fc3/MatMul_grad/MatMul')
  assert gradient.inputs[0] is weights


def test_a_meta_graph_from_deploy_differentiates_in_plain_tensorflow(
    tmp_path):
  meta = str(tmp_path / 'model.meta')
  with tf.Graph().as_default():
    _deployed_lenet('deploy')
    tf.train.export_meta_graph(meta)
  program = (
      'import tensorflow.compat.v1 as tf\n'
      'tf.disable_v2_behavior()\n'
      'tf.train.import_meta_graph(%r)\n'
      'loss = tf.get_collection(tf.GraphKeys.LOSSES)[0]\n'
      'grads = tf.gradients(loss, tf.trainable_variables())\n'
      'print(sum(g is not None for g in grads), len(grads))\n' % meta)
  done = subprocess.run([sys.executable, '-c', program], capture_output=True,
                        text=True, timeout=300,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.split() == ['8', '8']  # LeNet's 4 weights, 4 biases


def _named_lenet(scope):
  """A model_fn: LeNet under `scope`, with its own loss."""
  def model_fn():
    images = tf.zeros([4, 28, 28, 1])
    labels = tf.one_hot(tf.zeros([4], tf.int32), 10)
    with tf.variable_scope(scope), slim.arg_scope(lenet.lenet_arg_scope()):
      logits, _ = lenet.lenet(images, num_classes=10)
    tf.losses.softmax_cross_entropy(labels, logits)
  return model_fn


def test_a_model_optimized_second_keeps_the_gradient_until_then(graph):
  # Two models built before either is optimized, as a GAN's two nets are.
  config = model_deploy.DeploymentConfig(clone_on_cpu=True)
  clones = {scope: model_deploy.create_clones(config, _named_lenet(scope))
            for scope in ('generator', 'discriminator')}
  fc3 = {scope: graph.get_operation_by_name(scope + '/LeNet/fc3/MatMul')
         for scope in clones}
  name = matmul_gradient.GRADIENT_NAME.encode()
  for scope in ('generator', 'discriminator'):
    assert fc3[scope].get_attr('_gradient_op_type') == name
    model_deploy.optimize_clones(
        clones[scope], tf.train.GradientDescentOptimizer(0.1),
        var_list=tf.trainable_variables(scope))
    with pytest.raises(ValueError, match='_gradient_op_type'):
      fc3[scope].get_attr('_gradient_op_type')
    # Each model's input gradient is the fast one: the weights untransposed.
    gradient_ops = [op for op in _matmuls(graph)
                    if op.inputs[0] is fc3[scope].inputs[1]]
    assert [op.get_attr('transpose_b') for op in gradient_ops] == [True]
  named = [op.name for op in graph.get_operations()
           if op.node_def.attr.get('_gradient_op_type')]
  assert named == []
