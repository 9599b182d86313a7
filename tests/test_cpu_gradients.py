"""The gradients of CPU clones (MatMul, 16-bit convolutions): TensorFlow's
values, faster ops."""

import contextlib
import os
import re
import subprocess
import sys
import types

from absl.testing import flagsaver
import numpy as np
import pytest

from deployment import cpu_gradients
from deployment import model_deploy
from deployment import precision as precision_lib
from nets import lenet
from tf2_compat.slim_compat import slim, tf


def _gradients(shape_a, shape_b, transpose_a, transpose_b, override):
  """Both inputs' gradients of a weighted sum of one MatMul, in float64."""
  rng = np.random.default_rng(7)
  a = tf.constant(rng.standard_normal(shape_a))
  b = tf.constant(rng.standard_normal(shape_b))
  graph = tf.get_default_graph()
  if override:
    with graph.gradient_override_map({'MatMul': cpu_gradients.MATMUL_GRADIENT}):
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
  product = cpu_gradients.times_transposed(x, w)
  assert product.shape.as_list() == [x_rows, 3136]
  assert product.op.type == 'Transpose'
  (matmul,) = _matmuls(graph)
  assert [t.name for t in matmul.inputs] == [w.name, x.name]
  assert matmul.get_attr('transpose_b') and not matmul.get_attr('transpose_a')


def test_times_transposed_keeps_the_plain_product_for_small_weights(graph):
  x = tf.zeros([3136, 8])
  w = tf.zeros([4, 8])
  product = cpu_gradients.times_transposed(x, w)
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
      cpu_gradients.MATMUL_GRADIENT.encode())
  assert gradient.op.type == 'Transpose'
  weights = fc3.inputs[1]
  transposed_weights = [op.name for op in _matmuls(graph)
                        if op.inputs[1] is weights and
                        op.get_attr('transpose_b')]
  assert not transposed_weights


@pytest.mark.parametrize('place', ['gpu', 'gpu_of_a_cpu_named_job',
                                   'default_gradient'])
def test_gpu_clones_and_default_gradient_keep_tensorflow_s(graph, place,
                                                           monkeypatch):
  monkeypatch.setattr(cpu_gradients, 'local_gpus',
                      lambda: ['PhysicalDevice(/physical_device:GPU:0)'])
  if place == 'gpu':
    _lenet_clones(model_deploy.DeploymentConfig())
  elif place == 'gpu_of_a_cpu_named_job':
    _lenet_clones(model_deploy.DeploymentConfig(worker_job_name='cpu_pool',
                                                num_ps_tasks=1))
  else:
    with cpu_gradients.default_gradient():
      _lenet_clones(model_deploy.DeploymentConfig(clone_on_cpu=True))
  fc3, gradient = _fc3_input_gradient(graph)
  with pytest.raises(ValueError, match='_gradient_op_type'):
    fc3.get_attr('_gradient_op_type')
  assert gradient.op.type == 'MatMul'
  assert gradient.op.inputs[1] is fc3.inputs[1]
  assert gradient.op.get_attr('transpose_b')


def test_gpu_clones_of_a_machine_without_gpus_run_on_its_cpu(graph,
                                                              monkeypatch):
  # Soft placement puts their ops on the CPU, as on this machine.
  monkeypatch.setattr(cpu_gradients, 'local_gpus', lambda: [])
  assert cpu_gradients.runs_on_cpu('/device:GPU:0')
  assert not cpu_gradients.runs_on_cpu('/job:worker/task:0/device:GPU:0')
  clones = _lenet_clones(model_deploy.DeploymentConfig(num_clones=2))
  assert [clone.device for clone in clones] == ['/device:GPU:0',
                                                '/device:GPU:1']
  fc3 = graph.get_operation_by_name('clone_1/LeNet/fc3/MatMul')
  assert fc3.get_attr('_gradient_op_type') == (
      cpu_gradients.MATMUL_GRADIENT.encode())


def _trained_lenet_weights(default_gradient, steps=3, precision='float32'):
  """LeNet's losses and fc3 weights after `steps` SGD steps on 2 CPU
  clones, in `precision`; the types of conv2's gradient kernels, and how
  far the steps moved conv2's weights."""
  graph = tf.Graph()
  with graph.as_default():
    tf.set_random_seed(3)
    rng = np.random.default_rng(5)
    images = tf.constant(rng.random((8, 28, 28, 1), np.float32))
    labels = tf.one_hot(tf.constant(rng.integers(0, 10, 8)), 10)
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    compute_dtype = precision_lib.compute_dtype(precision)

    def model_fn():  # each clone sees the whole batch
      with slim.arg_scope(lenet.lenet_arg_scope()):
        logits, _ = lenet.lenet(tf.cast(images, compute_dtype),
                                num_classes=10, dropout_keep_prob=1.0)
      tf.losses.softmax_cross_entropy(labels, tf.cast(logits, tf.float32))

    with (cpu_gradients.default_gradient() if default_gradient
          else contextlib.nullcontext()):
      model = model_deploy.deploy(
          config, model_fn, optimizer=tf.train.GradientDescentOptimizer(0.001),
          precision=precision)
    (weights,) = [v for v in tf.global_variables()
                  if v.op.name == 'LeNet/fc3/weights']
    (conv2,) = [v for v in tf.global_variables()
                if v.op.name == 'LeNet/conv2/weights']
    kernels = sorted(
        (op.type, op.get_attr('T').name) for op in graph.get_operations()
        if re.match(r'clone_0/gradients/clone_0/LeNet/conv2/Conv2D_grad/'
                    r'Conv2DBackprop', op.name))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      conv2_before = session.run(conv2)
      losses = [session.run(model.train_op) for _ in range(steps)]
      # conv2's update: what its gradients moved it by.
      return (losses, session.run(weights), kernels,
              session.run(conv2) - conv2_before)


def test_lenet_trains_to_the_same_weights_with_either_gradient():
  losses, weights, _, _ = _trained_lenet_weights(default_gradient=False)
  reference_losses, reference_weights, _, _ = _trained_lenet_weights(
      default_gradient=True)
  np.testing.assert_allclose(losses, reference_losses, rtol=1e-5)
  np.testing.assert_allclose(weights, reference_weights, atol=1e-5)
  assert losses[-1] < losses[0]


@pytest.mark.parametrize('precision', ['mixed_float16', 'mixed_bfloat16'])
def test_16_bit_lenet_trains_with_float32_convolution_gradients(precision):
  # float16's first steps overflow and are skipped while the loss scale
  # comes down.
  losses, weights, kernels, update = _trained_lenet_weights(False, 8,
                                                            precision)
  reference_losses, reference_weights, reference_kernels, reference_update = (
      _trained_lenet_weights(True, 8, precision))
  # conv2's own update agrees within a tenth of its largest element.
  assert np.abs(reference_update).max() > 0
  np.testing.assert_allclose(update, reference_update, rtol=0,
                             atol=0.1 * np.abs(reference_update).max())
  dtype = precision_lib.compute_dtype(precision).name
  assert kernels == [('Conv2DBackpropFilter', 'float32'),
                     ('Conv2DBackpropInput', 'float32')]
  assert reference_kernels == [('Conv2DBackpropFilter', dtype),
                               ('Conv2DBackpropInput', dtype)]
  # Not bit for bit: TensorFlow's 16-bit kernels round as they sum.
  np.testing.assert_allclose(losses, reference_losses, rtol=1e-2)
  np.testing.assert_allclose(weights, reference_weights, atol=5e-4)
  assert losses[-1] < losses[0]


def _benchmark():
  benchmarks = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), 'benchmarks')
  if benchmarks not in sys.path:
    sys.path.insert(0, benchmarks)
  import cpu_gradients as benchmark  # pylint: disable=g-import-not-at-top
  return benchmark


def test_benchmark_table_gives_medians_and_their_ratio():
  benchmark = _benchmark()
  tensorflow_s, clones = benchmark.VARIANTS
  lines = benchmark.table({4: {tensorflow_s: [0.046, 0.044, 0.050],
                               clones: [0.004, 0.005, 0.003]}})
  assert lines[2] == ('| 4 | 46.00 | 4.00 | 11.50x | '
                      '46.0 / 4.0; 44.0 / 5.0; 50.0 / 3.0 |')


def test_benchmark_table_rows_can_name_several_columns():
  benchmark = _benchmark()
  tensorflow_s, clones = benchmark.VARIANTS
  lines = benchmark.table(
      {('mixed_bfloat16', 32): {tensorflow_s: [0.5], clones: [0.1]}},
      'precision, batch')
  assert lines[0].startswith('| precision | batch | ')
  assert lines[1] == '|---|---|---:|---:|---:|---|'
  assert lines[2] == ('| mixed_bfloat16 | 32 | 500.00 | 100.00 | 5.00x | '
                      '500.0 / 100.0 |')


def test_benchmark_refuses_an_unknown_precision(capsys):
  with pytest.raises(SystemExit):
    _benchmark().parse_args(['--precisions', 'float32,float64'])
  assert ('--precisions: float64 not one of float32, mixed_float16, '
          'mixed_bfloat16') in capsys.readouterr().err


def test_benchmark_round_means_average_each_rounds_runs():
  benchmark = _benchmark()
  graph = types.SimpleNamespace(step_seconds=[0.01, 0.03, 0.02, 0.04])
  assert benchmark.round_means(graph, 2) == pytest.approx([0.02, 0.03])


def test_benchmark_writes_both_tables(tmp_path, digits_dir):
  benchmark = _benchmark()
  with flagsaver.flagsaver():
    path = benchmark.main(['--batches', '4', '--rounds', '1', '--steps', '2',
                           '--warmup', '1', '--dataset_dir', digits_dir,
                           '--precisions', 'float32,mixed_bfloat16',
                           '--results_dir', str(tmp_path)])
  with open(path) as f:
    text = f.read()
  rows = re.findall(r'^\|(?: (?:float32|mixed_bfloat16) \|)? 4 \| ([\d.]+) '
                    r'\| ([\d.]+) \| ([\d.]+)x \|', text, re.MULTILINE)
  assert len(rows) == 3  # the product, then the step in each precision
  assert '| mixed_bfloat16 | 4 |' in text
  for tensorflow_ms, clones_ms, ratio in rows:
    assert float(ratio) == pytest.approx(
        float(tensorflow_ms) / float(clones_ms), rel=0.01)  # rounded
  assert '## A LeNet training step' in text


def _deployed_lenet(through, var_list=None):
  """LeNet on a CPU clone, its gradients (of the variables `var_list`
  returns, default all) built by deploy() or by create_clones +
  optimize_clones; the fc3 MatMul op."""
  config = model_deploy.DeploymentConfig(clone_on_cpu=True)
  optimizer = tf.train.GradientDescentOptimizer(0.01)
  if through == 'deploy':
    model_deploy.deploy(config, _lenet_model_fn, optimizer=optimizer,
                        var_list=var_list)
  else:
    clones = _lenet_clones(config)
    model_deploy.optimize_clones(clones, optimizer,
                                 var_list=var_list and var_list())
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


@pytest.mark.parametrize('through, var_list', [
    ('deploy', None), ('optimize_clones', None),
    # Fine-tuning the classifier alone: the layers below are never
    # differentiated, and must not keep the names either.
    ('deploy', 'LeNet/fc4'), ('optimize_clones', 'LeNet/fc4')])
def test_a_meta_graph_from_deploy_differentiates_in_plain_tensorflow(
    tmp_path, through, var_list):
  meta = str(tmp_path / 'model.meta')
  with tf.Graph().as_default() as graph:
    _deployed_lenet(through, var_list and (
        lambda: tf.trainable_variables(var_list)))
    named = [op.name for op in graph.get_operations()
             if op.node_def.attr.get('_gradient_op_type')]
    assert named == []
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
  name = cpu_gradients.MATMUL_GRADIENT.encode()
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


def _convolution_gradients(kind, dtype, strides, padding, override=False,
                           compute_dtype=None):
  """The gradients, with respect to 16-bit (or float32) inputs of `dtype`,
  of a weighted sum of one convolution of them computed in
  `compute_dtype` (default: `dtype`); with `override`, by the CPU clones'
  gradient."""
  rng = np.random.default_rng(3)
  channels_out = 1 if kind == 'DepthwiseConv2dNative' else 6
  images, filters, weights = (
      tf.constant(rng.standard_normal(shape), dtype)
      for shape in [(2, 9, 9, 4), (3, 3, 4, channels_out),
                    (2, 9, 9, 6)])
  compute_dtype = compute_dtype or dtype
  convolve = getattr(tf.raw_ops, kind)
  override_map = {kind: cpu_gradients.GRADIENTS[kind]} if override else {}
  with tf.get_default_graph().gradient_override_map(override_map):
    output = convolve(input=tf.cast(images, compute_dtype),
                      filter=tf.cast(filters, compute_dtype),
                      strides=strides, padding=padding)
  rows, columns, depth = output.shape.as_list()[1:]
  weights = tf.cast(weights[:, :rows, :columns, :depth], compute_dtype)
  return tf.gradients(tf.reduce_sum(output * weights), [images, filters])


# Strides and padding. (TensorFlow's CPU kernels of the filter's gradient
# take no dilations; tf.nn.conv2d dilates by space_to_batch on CPUs.)
CONVOLUTIONS = [([1, 1, 1, 1], 'SAME'), ([1, 2, 2, 1], 'VALID'),
                ([1, 2, 2, 1], 'SAME')]
# A 16-bit type's machine epsilon.
EPSILON = {tf.float16: 2.0 ** -10, tf.bfloat16: 2.0 ** -7}


@pytest.mark.parametrize('kind', ['Conv2D', 'DepthwiseConv2dNative'])
@pytest.mark.parametrize('dtype', [tf.float16, tf.bfloat16])
@pytest.mark.parametrize('strides, padding', CONVOLUTIONS)
def test_16_bit_convolutions_get_float32_gradients_rounded_once(
    graph, kind, dtype, strides, padding):
  shape = (strides, padding)
  ours = _convolution_gradients(kind, dtype, *shape, override=True)
  tensorflow_s = _convolution_gradients(kind, dtype, *shape)
  # TensorFlow's gradient of the same values in float32, rounded to 16 bits
  # (by the gradient of the casts to float32).
  rounded_once = _convolution_gradients(kind, dtype, *shape,
                                        compute_dtype=tf.float32)
  kernels = sorted((op.type, op.get_attr('T').name)
                   for op in graph.get_operations()
                   if op.type.startswith(kind + 'Backprop'))
  assert kernels == sorted(
      [(kind + 'BackpropFilter', name) for name in ('float32', 'float32',
                                                    dtype.name)] +
      [(kind + 'BackpropInput', name) for name in ('float32', 'float32',
                                                   dtype.name)])
  with tf.Session() as session:
    ours, tensorflow_s, rounded_once = session.run(
        [ours, tensorflow_s, rounded_once])
  for mine, exact, theirs in zip(ours, rounded_once, tensorflow_s):
    assert mine.dtype == theirs.dtype == exact.dtype
    np.testing.assert_array_equal(mine.astype(np.float32),
                                  exact.astype(np.float32))
    # TensorFlow's 16-bit kernels, which round as they sum, agree within
    # a few roundings of the largest gradient.
    scale = np.abs(exact.astype(np.float32)).max()
    np.testing.assert_allclose(mine.astype(np.float32),
                               theirs.astype(np.float32), rtol=0,
                               atol=8 * EPSILON[dtype] * scale)


@pytest.mark.parametrize('kind', ['Conv2D', 'DepthwiseConv2dNative'])
def test_float32_convolutions_keep_tensorflow_s_gradient(graph, kind):
  shape = CONVOLUTIONS[1]
  ours = _convolution_gradients(kind, tf.float32, *shape, override=True)
  tensorflow_s = _convolution_gradients(kind, tf.float32, *shape)
  assert not [op.name for op in graph.get_operations() if op.type == 'Cast']
  with tf.Session() as session:
    ours, tensorflow_s = session.run([ours, tensorflow_s])
  for mine, theirs in zip(ours, tensorflow_s):
    np.testing.assert_array_equal(mine, theirs)


def test_forget_without_ops_clears_the_whole_graph_as_before(graph):
  # deployment.matmul_gradient.forget(graph) of the previous release.
  _lenet_clones(model_deploy.DeploymentConfig(clone_on_cpu=True))
  named = sorted(op.type for op in graph.get_operations()
                 if op.node_def.attr.get('_gradient_op_type'))
  assert named == ['Conv2D', 'Conv2D', 'MatMul', 'MatMul']
  cpu_gradients.forget(graph)
  assert not [op.name for op in graph.get_operations()
              if op.node_def.attr.get('_gradient_op_type')]
