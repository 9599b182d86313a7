"""exporting/tflite_contents.py, and what each --tflite_quantization puts in
the file: one 3x3 convolution of 4 output channels (36 weights, 4 biases)
on 8x8 one-channel images, converted in this process."""

import numpy as np
import pytest

from exporting import graph as graph_lib
from exporting import tflite
from exporting import tflite_contents
from nets import nets_factory
from tf2_compat.slim_compat import slim, tf

WEIGHTS = 3 * 3 * 1 * 4
CHANNELS = 4


@pytest.fixture(scope='module')
def files(tmp_path_factory):
  """{quantization: Contents of the one-convolution network's file}."""
  folder = tmp_path_factory.mktemp('tflite_contents')
  rng = np.random.RandomState(0)
  images = rng.uniform(-1, 1, [20, 8, 8, 1]).astype(np.float32)
  contents = {}
  with tf.Graph().as_default():
    placeholder = tf.placeholder(tf.float32, [1, 8, 8, 1],
                                 name=graph_lib.INPUT_NAME)
    logits = tf.reduce_mean(slim.conv2d(
        placeholder, CHANNELS, [3, 3], activation_fn=None,
        weights_initializer=tf.random_normal_initializer(seed=1),
        biases_initializer=tf.random_normal_initializer(seed=2),
        scope='Conv'), [1, 2])
    probabilities = tf.nn.softmax(logits)
    graph = graph_lib.InferenceGraph(placeholder, logits, probabilities,
                                     probabilities)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      for quantization in tflite.QUANTIZATIONS:
        path = str(folder / ('%s.tflite' % quantization))
        with open(path, 'wb') as f:
          f.write(tflite.convert(session, graph, quantization, images))
        contents[quantization] = tflite_contents.read(path)
  return contents


def test_float32_file_holds_weights_and_biases_as_float32(files):
  contents = files['none']
  assert contents.constant_bytes['FLOAT32'] == 4 * (WEIGHTS + CHANNELS)
  assert contents.quantization_bytes == 0
  assert contents.per_channel_tensors == 0


@pytest.mark.parametrize('quantization', ['int8', 'int8_per_tensor'])
def test_int8_files_hold_int8_weights_int32_biases_and_no_float(
    files, quantization):
  constants = files[quantization].constant_bytes
  assert 'FLOAT32' not in constants
  assert constants['INT8'] == WEIGHTS
  # The biases, and the two axes of the mean.
  assert constants['INT32'] == 4 * CHANNELS + 4 * 2


def test_int8_has_a_scale_and_zero_point_per_channel_of_weights_and_bias(
    files):
  contents = files['int8']
  assert contents.per_channel_tensors == 2
  assert contents.channel_parameters == 2 * CHANNELS


def test_int8_per_tensor_saves_12_bytes_per_channel_but_one(files):
  per_channel, per_tensor = files['int8'], files['int8_per_tensor']
  assert per_tensor.per_channel_tensors == 0
  # Weights and bias: CHANNELS pairs each become one; a pair is a float32
  # scale and an int64 zero point.
  assert (per_channel.quantization_bytes - per_tensor.quantization_bytes
          == 2 * (CHANNELS - 1) * (4 + 8))


@pytest.mark.parametrize('quantization', tflite.QUANTIZATIONS)
def test_the_parts_add_up_to_the_file(files, quantization):
  contents = files[quantization]
  assert contents.other_bytes > 0
  assert (sum(contents.constant_bytes.values()) + contents.quantization_bytes
          + contents.other_bytes == contents.file_bytes)


def test_mobilenet_v1_025_int8_is_0_3x_float_only_per_tensor(tmp_path):
  """Its 28 layers have 2746 output channels; 3x3 depthwise ones hold 9
  weights a channel, against 24 bytes of per-channel parameters (weights
  and bias). The sizes follow from the structure alone, so untrained
  weights serve."""
  images = np.random.RandomState(0).uniform(
      -1, 1, [10, 32, 32, 1]).astype(np.float32)
  contents = {}
  with tf.Graph().as_default():
    placeholder = tf.placeholder(tf.float32, [1, 32, 32, 1],
                                 name=graph_lib.INPUT_NAME)
    logits, end_points = nets_factory.get_network_fn(
        'mobilenet_v1_025', 10)(placeholder)
    graph = graph_lib.InferenceGraph(placeholder, logits,
                                     end_points['Predictions'],
                                     end_points['Predictions'])
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      for quantization in ('none', 'int8', 'int8_per_tensor'):
        path = str(tmp_path / ('%s.tflite' % quantization))
        with open(path, 'wb') as f:
          f.write(tflite.convert(session, graph, quantization, images))
        contents[quantization] = tflite_contents.read(path)
  float_bytes = contents['none'].file_bytes
  per_channel, per_tensor = contents['int8'], contents['int8_per_tensor']
  assert per_channel.channel_parameters == 2 * 2746
  assert per_channel.quantization_bytes > 0.07 * float_bytes
  assert per_channel.file_bytes > 0.3 * float_bytes
  assert per_tensor.per_channel_tensors == 0
  assert per_tensor.file_bytes <= 0.3 * float_bytes
  assert 'FLOAT32' not in per_tensor.constant_bytes
