"""Quantization-aware training (nets/quantize.py): the fake-quantized
layers, batch norm folding, clones, and LeNet trained with
--quantize_delay, evaluated with --quantize and exported to int8 TFLite."""

import os
import re

from ai_edge_litert import interpreter as litert
import numpy as np
import pytest

from deployment import model_deploy
from nets import nets_factory
from nets import quantize
from tf2_compat.slim_compat import slim, tf
from training import fine_tune
from training import run_config
from training.errors import UsageError
from tests.script_runner import assert_one_usage_error
from tests.script_runner import run_script
from tests.test_run_config import NO_ENV
from tests.test_run_config import digits

_LENET_LAYERS = ('conv1', 'conv2', 'fc3', 'fc4')
_RANGES = ('weights_quant/min', 'weights_quant/max', 'act_quant/min',
           'act_quant/max')


def fake_quant(values, low, high, narrow_range=False):
  """FakeQuantWithMinMaxVars with 8 bits, computed in numpy as TensorFlow
  documents it: the range nudged so that 0 is a level, then rounding."""
  quant_min, quant_max = (1 if narrow_range else 0), 255
  scale = (high - low) / (quant_max - quant_min)
  zero_point = np.clip(np.round(quant_min - low / scale), quant_min,
                       quant_max)
  nudged_low = (quant_min - zero_point) * scale
  nudged_high = (quant_max - zero_point) * scale
  clamped = np.clip(values, nudged_low, nudged_high)
  return (np.floor((clamped - nudged_low) / scale + 0.5) * scale
          + nudged_low)


def _lenet(images, is_training_ranges, quant_delay=0):
  """LeNet without dropout (is_training=False), quantization-aware with
  training ranges when asked, else float (quant_delay None)."""
  network_fn = nets_factory.get_network_fn('lenet', 10, is_training=False)
  if quant_delay is not None:
    network_fn = quantize.quantized_network_fn(
        network_fn, is_training_ranges, quant_delay)
  return network_fn(images)[0]


def test_range_variables_are_model_variables_beside_the_float_ones(graph):
  tf.train.get_or_create_global_step()
  _lenet(tf.zeros([2, 28, 28, 1]), True, quant_delay=100)
  model = {v.op.name: v for v in slim.get_model_variables()}
  ranges = ['LeNet/%s/%s' % (layer, name) for layer in _LENET_LAYERS
            for name in _RANGES]
  assert sorted(name for name in model if 'quant' in name) == sorted(ranges)
  trainable = {v.op.name for v in tf.trainable_variables()}
  assert not trainable & set(ranges)
  assert sorted(trainable) == sorted(
      'LeNet/%s/%s' % (layer, name) for layer in _LENET_LAYERS
      for name in ('weights', 'biases'))
  fake_quants = [op for op in graph.get_operations()
                 if op.type == 'FakeQuantWithMinMaxVars']
  assert len(fake_quants) == 8  # Weights and activations of 4 layers.
  assert sum(op.get_attr('narrow_range') for op in fake_quants) == 4
  assert {op.get_attr('num_bits') for op in fake_quants} == {8}


def test_a_separable_convolution_quantizes_both_its_weights(graph):
  tf.train.get_or_create_global_step()
  with quantize.quantization_aware(is_training=True):
    slim.separable_conv2d(tf.zeros([1, 8, 8, 4]), 6, [3, 3], scope='sep')
  assert sorted(v.op.name for v in tf.get_collection(quantize.RANGES)) == [
      'sep/act_quant/max', 'sep/act_quant/min',
      'sep/depthwise_weights_quant/max', 'sep/depthwise_weights_quant/min',
      'sep/pointwise_weights_quant/max', 'sep/pointwise_weights_quant/min']
  assert len([op for op in graph.get_operations()
              if op.type == 'FakeQuantWithMinMaxVars']) == 3


@pytest.mark.parametrize('model_name, size, channels', [
    ('lenet', 28, 1), ('mobilenet_v1_025', 32, 3)])
def test_float_variables_keep_their_names_and_shapes(model_name, size,
                                                     channels):
  shapes = []
  for quantized in (False, True):
    with tf.Graph().as_default():
      network_fn = nets_factory.get_network_fn(model_name, 10,
                                               is_training=True)
      if quantized:
        network_fn = quantize.quantized_network_fn(network_fn, True)
      network_fn(tf.zeros([1, size, size, channels]))
      shapes.append({v.op.name: v.shape.as_list()
                     for v in tf.global_variables()
                     if '_quant/' not in v.op.name
                     and v.op.name != 'global_step'})
  assert shapes[0] == shapes[1]


def _copy_weights(session, values):
  for variable in tf.global_variables():
    if variable.op.name in values:
      variable.load(values[variable.op.name], session)


def test_before_the_delay_lenet_computes_the_float_lenet_exactly():
  images = np.random.RandomState(0).uniform(-1, 1, [4, 28, 28, 1])
  with tf.Graph().as_default():
    logits = _lenet(tf.constant(images, tf.float32), False, None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      weights = {v.op.name: session.run(v) for v in tf.global_variables()}
      expected = session.run(logits)
  with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    logits = _lenet(tf.constant(images, tf.float32), True, quant_delay=10)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      _copy_weights(session, weights)
      step.load(9, session)
      before = session.run(logits)
      step.load(10, session)
      after = session.run(logits)
  np.testing.assert_array_equal(before, expected)
  assert np.abs(after - expected).max() > 1e-4


def test_after_the_delay_a_layer_is_fake_quantized_as_computed_by_hand(
    graph):
  rng = np.random.RandomState(1)
  inputs = rng.uniform(-1, 1, [5, 7]).astype(np.float32)
  step = tf.train.get_or_create_global_step()
  with quantize.quantization_aware(is_training=True, quant_delay=10):
    outputs = slim.fully_connected(tf.constant(inputs), 3, scope='fc')
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    step.load(10, session)
    weights, biases, got = session.run(
        [slim.get_unique_variable('fc/weights'),
         slim.get_unique_variable('fc/biases'), outputs])
  largest = np.abs(weights).max()
  quantized_weights = fake_quant(weights, -largest, largest,
                                 narrow_range=True)
  activations = np.maximum(inputs @ quantized_weights + biases, 0)
  # The range moves 1/(step + 1) of the way from [-6, 6] at step 10.
  low = -6 + (min(activations.min(), 0) + 6) / 11
  high = 6 + (max(activations.max(), 0) - 6) / 11
  np.testing.assert_allclose(got, fake_quant(activations, low, high),
                             atol=1e-6)
  assert not np.allclose(got, np.maximum(inputs @ weights + biases, 0),
                         atol=1e-3)


_BATCH_NORM = {'is_training': False, 'epsilon': 0.001, 'scale': True}


def _conv_with_batch_norm(kind, images):
  """A slim layer (conv2d, or separable_conv2d depthwise only) followed by
  slim.batch_norm in inference mode, then ReLU."""
  layer = {'conv2d': lambda x: slim.conv2d(
      x, 6, [3, 3], normalizer_fn=slim.batch_norm,
      normalizer_params=_BATCH_NORM, scope='layer'),
           'depthwise': lambda x: slim.separable_conv2d(
               x, None, [3, 3], depth_multiplier=2,
               normalizer_fn=slim.batch_norm,
               normalizer_params=_BATCH_NORM, scope='layer')}[kind]
  return layer(images)


def _random_layer_values(session, rng):
  values = {}
  for variable in tf.global_variables():
    shape = variable.shape.as_list()
    name = variable.op.name
    if name.endswith('moving_variance'):
      values[name] = rng.uniform(0.2, 2.0, shape)
    elif name.endswith(('gamma', 'moving_mean', 'beta', 'weights')):
      values[name] = rng.uniform(-1, 1, shape)
  _copy_weights(session, values)
  return values


@pytest.mark.parametrize('kind', ['conv2d', 'depthwise'])
def test_folded_batch_norm_in_eval_is_the_float_layer_up_to_quantization(
    kind):
  rng = np.random.RandomState(2)
  images = rng.uniform(-1, 1, [2, 8, 8, 4]).astype(np.float32)
  with tf.Graph().as_default():
    outputs = _conv_with_batch_norm(kind, tf.constant(images))
    with tf.Session() as session:
      values = _random_layer_values(session, rng)
      expected = session.run(outputs)
  with tf.Graph().as_default() as graph:
    with quantize.quantization_aware(is_training=False):
      outputs = _conv_with_batch_norm(kind, tf.constant(images))
    weights_name = ('layer/weights' if kind == 'conv2d'
                    else 'layer/depthwise_weights')
    scale = values['layer/BatchNorm/gamma'] / np.sqrt(
        values['layer/BatchNorm/moving_variance'] + _BATCH_NORM['epsilon'])
    folded = values[weights_name] * scale.reshape(
        values[weights_name].shape[2:] if kind == 'depthwise' else [-1])
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      _copy_weights(session, values)
      largest = np.abs(folded).max()
      ranges = {'weights_quant/min': -largest, 'weights_quant/max': largest,
                'act_quant/min': 0.0, 'act_quant/max': expected.max()}
      _copy_weights(session, {
          'layer/' + name.replace('weights', weights_name.split('/')[1]): value
          for name, value in ranges.items()})
      quantized = session.run(outputs)
      fake_quants = [op for op in graph.get_operations()
                     if op.type == 'FakeQuantWithMinMaxVars']
      weight_quant, = [op for op in fake_quants
                       if op.get_attr('narrow_range')]
      activation_quant, = [op for op in fake_quants
                           if not op.get_attr('narrow_range')]
      # Quantization off: each FakeQuant passes its input through.
      unquantized = session.run(
          activation_quant.inputs[0],
          {weight_quant.outputs[0]: session.run(weight_quant.inputs[0])})
  np.testing.assert_allclose(unquantized, expected, atol=1e-5)
  # Each weight is off by at most half its step, so an output by half the
  # step times the inputs' absolute sum over the kernel (at most 3x3x4 =
  # 36 values of magnitude <= 1, 9 for the depthwise); the activation adds
  # a rounding of half its step and the nudging of its range, another half.
  weight_step = (ranges['weights_quant/max']
                 - ranges['weights_quant/min']) / 254
  activation_step = ranges['act_quant/max'] / 255
  inputs_sum = 36 if kind == 'conv2d' else 9
  bound = weight_step / 2 * inputs_sum + activation_step
  error = np.abs(quantized - expected).max()
  assert 0 < error <= bound
  assert np.abs(quantized - expected).mean() < bound / 4


@pytest.mark.parametrize('replicas', [
    dict(),
    dict(num_replicas=2, replica_id=1, num_ps_tasks=2),
])
def test_two_clones_share_one_set_of_ranges_on_the_variables_device(
    graph, replicas):
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True,
                                         **replicas)
  with tf.device(config.variables_device()):
    tf.train.get_or_create_global_step()

  def clone_fn():
    return _lenet(tf.zeros([2, 28, 28, 1]), True, quant_delay=5)

  clones = model_deploy.create_clones(config, clone_fn)
  ranges = [v for v in tf.global_variables() if '_quant/' in v.op.name]
  assert len(ranges) == 16
  weights = [v for v in tf.global_variables() if v.op.name.endswith(
      ('weights', 'biases'))]
  if replicas:  # Spread over the ps tasks as the weights are.
    assert {v.device for v in ranges} == {v.device for v in weights} == {
        '/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0'}
  else:
    assert {v.device for v in ranges} == {config.variables_device()}
  assert set(ranges) <= set(slim.get_model_variables())
  fake_quants = [op for op in graph.get_operations()
                 if op.type == 'FakeQuantWithMinMaxVars']
  for clone in clones:
    assert len([op for op in fake_quants
                if op.name.startswith(clone.scope)]) == 8
  updated = {op.inputs[0].op.name for op in tf.get_collection(
      tf.GraphKeys.UPDATE_OPS, clones[0].scope)}
  assert updated == {v.op.name for v in ranges}


@pytest.mark.parametrize('model_name', ['i3d', 's3dg'])
def test_a_network_without_a_2d_layer_is_refused_not_left_float(model_name):
  with tf.Graph().as_default():
    network_fn = quantize.quantized_network_fn(
        nets_factory.get_network_fn(model_name, 10), False)
    with pytest.raises(ValueError, match=r'^%s has no layer to fake-quantize: '
                       r'quantization-aware networks quantize slim.conv2d, '
                       r'slim.separable_conv2d and slim.fully_connected '
                       r'layers \(3-D convolutions, as in the video '
                       r'networks, are not\), so it would stay float$'
                       % model_name):
      network_fn(tf.zeros([1, 4, 32, 32, 3]))


def test_a_float_checkpoint_fine_tunes_quantization_aware(tmp_path):
  prefix = str(tmp_path / 'float.ckpt')
  with tf.Graph().as_default():
    _lenet(tf.zeros([1, 28, 28, 1]), False, None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, prefix)
  with tf.Graph().as_default():
    _lenet(tf.zeros([1, 28, 28, 1]), True, quant_delay=100)
    restore = fine_tune.variables_to_restore(prefix, [], False)
  assert sorted(restore) == sorted(
      'LeNet/%s/%s' % (layer, name) for layer in _LENET_LAYERS
      for name in ('weights', 'biases'))


def test_quantize_delay_builds_the_quantization_aware_network(digits_dir):
  config = run_config.from_flags(digits(digits_dir, '--quantize_delay=100'),
                                 NO_ENV)
  with tf.Graph().as_default() as graph:
    tf.train.get_or_create_global_step()
    config.model.network_fn(tf.zeros([1, 28, 28, 1]))
    assert 'FakeQuantWithMinMaxVars' in {op.type
                                         for op in graph.get_operations()}


@pytest.mark.parametrize('argv, line', [
    (['--precision=mixed_float16'], '--quantize_delay=0 with '
     '--precision=mixed_float16: quantization-aware training computes in '
     'float32; drop --precision'),
    (['--sync_batch_norm', '--num_clones=2', '--clone_on_cpu'],
     '--quantize_delay=0 with --sync_batch_norm: the folded batch norm '
     'takes each clone\'s own statistics; drop --sync_batch_norm'),
])
def test_quantize_delay_refuses_what_it_cannot_fold(digits_dir, argv, line):
  with pytest.raises(UsageError) as error:
    run_config.from_flags(digits(digits_dir, '--quantize_delay=0', *argv),
                          NO_ENV)
  assert error.value.lines == (line,)


def test_export_quantize_refuses_a_float_checkpoint(tmp_path):
  prefix = str(tmp_path / 'model.ckpt-0')
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    _lenet(tf.zeros([1, 28, 28, 1]), False, None)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, prefix)
  result = run_script('export_inference_graph.py', '--model_name=lenet',
                      '--dataset_name=digits', '--checkpoint_path=%s' % prefix,
                      '--quantize', '--output_file=%s' % (tmp_path / 'q.pb'))
  assert_one_usage_error(
      result, r'error: --checkpoint_path=.*: checkpoint .* does not fit the '
      r'model built from these flags: variable '
      r'LeNet/conv1/weights_quant/min is not in it .*')
  assert not os.path.exists(tmp_path / 'q.pb')


def _accuracy(output, pattern):
  return float(re.search(pattern, output).group(1))


@pytest.fixture(scope='module')
def qat_lenet(digits_dir, tmp_path_factory):
  """LeNet trained 200 steps on 2 clones, quantized from step 100: 97.78%
  quantized on the digits test split in a run of these flags, above the
  tests' 95% (300 steps from 150 cost half as much again)."""
  train_dir = str(tmp_path_factory.mktemp('qat_lenet'))
  result = run_script(
      'train_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--num_clones=2', '--clone_on_cpu', '--optimizer=adam',
      '--opt_epsilon=1e-8', '--learning_rate=0.001',
      '--learning_rate_decay_type=fixed', '--max_number_of_steps=200',
      '--quantize_delay=100', '--save_interval_secs=0',
      '--train_dir=%s' % train_dir, timeout=900)
  assert result.returncode == 0, result.stdout[-3000:]
  return train_dir


def _eval(digits_dir, train_dir, *args):
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % os.path.join(train_dir, 'eval'),
                      *args, timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  return result.stdout


@pytest.mark.slow
def test_qat_lenet_trains_evaluates_and_exports_to_int8_within_half_a_point(
    qat_lenet, digits_dir, tmp_path):
  quantized = _accuracy(_eval(digits_dir, qat_lenet, '--quantize'),
                        r'digits test: accuracy ([\d.]+)% on 360 examples')
  assert quantized >= 95.0
  tflite_file = str(tmp_path / 'lenet_qat_int8.tflite')
  result = run_script(
      'export_inference_graph.py', '--model_name=lenet',
      '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
      '--checkpoint_path=%s' % qat_lenet, '--quantize',
      '--tflite_file=%s' % tflite_file, '--tflite_quantization=int8',
      timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  interpreter = litert.Interpreter(model_path=tflite_file)
  assert interpreter.get_input_details()[0]['dtype'] == np.int8
  assert interpreter.get_output_details()[0]['dtype'] == np.int8
  # Full integer: no float tensor (int32: the biases and the shapes).
  assert {d['dtype'] for d in interpreter.get_tensor_details()} == {
      np.int8, np.int32}
  output = _eval(digits_dir, qat_lenet, '--quantize',
                 '--exported_model=%s' % tflite_file)
  int8 = _accuracy(output, r'TFLite .*: accuracy ([\d.]+)% on 360')
  checkpoint = _accuracy(output, r'checkpoint .*: accuracy ([\d.]+)%;')
  assert checkpoint == quantized
  assert abs(int8 - checkpoint) <= 0.5
  assert _accuracy(output, r'top-1 agreement ([\d.]+)%') >= 99.0


@pytest.mark.slow
def test_qat_float_tflite_gives_the_quantized_checkpoints_classes(
    qat_lenet, digits_dir, tmp_path):
  tflite_file = str(tmp_path / 'lenet_qat.tflite')
  result = run_script(
      'export_inference_graph.py', '--model_name=lenet',
      '--dataset_name=digits', '--checkpoint_path=%s' % qat_lenet,
      '--quantize', '--tflite_file=%s' % tflite_file, timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  output = _eval(digits_dir, qat_lenet, '--quantize',
                 '--exported_model=%s' % tflite_file)
  assert _accuracy(output, r'top-1 agreement ([\d.]+)%') == 100.0


@pytest.mark.slow
def test_qat_checkpoint_evaluates_as_a_float_network_too(qat_lenet,
                                                         digits_dir):
  assert _accuracy(_eval(digits_dir, qat_lenet),
                   r'digits test: accuracy ([\d.]+)% on 360 examples') >= 95.0
