"""export_inference_graph.py and eval_image_classifier.py --exported_model:
a LeNet trained briefly on digits, exported as a frozen GraphDef, a
SavedModel and TFLite files, each predicting what its checkpoint predicts
on the digits test split. Bad input: tests/test_export_bad_input.py."""

import json
import os
import re
import subprocess
import sys

from ai_edge_litert import interpreter as litert
import numpy as np
import pytest

from exporting import artifacts
from exporting import graph as graph_lib
from exporting import model as model_lib
from exporting import split_images
from exporting import tflite_contents
from nets import nets_factory
from nets import quantize
from tf2_compat.slim_compat import tf
from training import inputs as inputs_lib
from training import lookup
from tests.export_flags import export_flags
from tests.script_runner import REPO
from tests.script_runner import assert_one_usage_error
from tests.script_runner import run_script
from tests.script_runner import script_env

# Run by a fresh Python in eager mode: the classes the SavedModel's two
# signatures give the digits test split (encoded PNGs, preprocessed floats).
_EAGER_SCRIPT = '''
import json, sys
import numpy as np
import tensorflow as tf
assert tf.executing_eagerly()
model = tf.saved_model.load(sys.argv[1])
encoded = [tf.train.Example.FromString(record.numpy()).features
           .feature['image/encoded'].bytes_list.value[0]
           for record in tf.data.TFRecordDataset(sys.argv[2])]
from_bytes = model.signatures['serving_default'](images=tf.constant(encoded))
from_floats = model.signatures['predict_images'](
    images=tf.constant(np.load(sys.argv[3])))
print(json.dumps({
    'signatures': sorted(model.signatures.keys()),
    'bytes_classes': from_bytes['classes'].numpy().tolist(),
    'float_classes': from_floats['classes'].numpy().tolist(),
    'probabilities_shape': from_bytes['probabilities'].shape.as_list()}))
'''


def _export(*args):
  result = run_script('export_inference_graph.py', '--model_name=lenet',
                      '--dataset_name=digits', *args, timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  return result.stdout


@pytest.fixture(scope='module')
def exported(trained_lenet, digits_dir, tmp_path_factory):
  """{artifact: path} of the exports of `trained_lenet`, and 'output': what the
  first export printed."""
  out = str(tmp_path_factory.mktemp('exported'))
  paths = {'frozen': os.path.join(out, 'lenet.pb'),
           'saved_model': os.path.join(out, 'serving'),
           'tflite': os.path.join(out, 'lenet.tflite'),
           'float16': os.path.join(out, 'lenet_float16.tflite'),
           'int8': os.path.join(out, 'lenet_int8.tflite'),
           'int8_per_tensor': os.path.join(out,
                                           'lenet_int8_per_tensor.tflite')}
  paths['output'] = _export(
      '--checkpoint_path=%s' % trained_lenet,
      '--output_file=%s' % paths['frozen'],
      '--saved_model_dir=%s' % paths['saved_model'],
      '--tflite_file=%s' % paths['tflite'])
  for quantization in ('float16', 'int8', 'int8_per_tensor'):
    _export('--checkpoint_path=%s' % trained_lenet,
            '--dataset_dir=%s' % digits_dir,
            '--tflite_file=%s' % paths[quantization],
            '--tflite_quantization=%s' % quantization)
  return paths


def _test_split(digits_dir):
  """(images, labels) of the digits test split, preprocessed for LeNet."""
  f = export_flags(dataset_dir=digits_dir, dataset_split_name='test')
  model = lookup.model_and_data(f, is_training=False)
  inputs = inputs_lib.InputConfig(
      dataset_name='digits', dataset_split_name='test',
      dataset_dir=digits_dir, labels_offset=0, preprocessing_name='lenet',
      batch_size=100, image_size=28, num_readers=1,
      num_preprocessing_threads=1)
  return split_images.read(inputs, model)


def _checkpoint_classes(train_dir, images):
  with tf.Graph().as_default():
    placeholder = tf.placeholder(tf.float32, [None, 28, 28, 1])
    logits, _ = nets_factory.get_network_fn('lenet', 10)(placeholder)
    with tf.Session() as session:
      tf.train.Saver().restore(session, tf.train.latest_checkpoint(train_dir))
      return np.argmax(session.run(logits, {placeholder: images}), 1)


@pytest.mark.parametrize('model_name, use_grayscale, channels', [
    ('lenet', False, 1),
    ('mobilenet_v1_025', False, 3),
    ('mobilenet_v1_025', True, 1),
])
def test_input_channels_are_what_the_preprocessing_makes_of_digits(
    model_name, use_grayscale, channels):
  model = model_lib.export_model(
      export_flags(model_name=model_name, use_grayscale=use_grayscale),
      is_training=False)
  assert model.dataset_channels == 1
  assert model.channels == channels
  assert model.num_classes == 10


def test_a_frozen_export_names_upstreams_input_and_predicts_as_its_checkpoint(
    trained_lenet, test_split, tmp_path):
  """One artifact of the shared LeNet, for the fast tier; the slow tier's
  `exported` writes and checks every kind."""
  path = str(tmp_path / 'lenet.pb')
  output = _export('--checkpoint_path=%s' % trained_lenet,
                   '--output_file=%s' % path)
  assert 'input: input:0 float32 [None, 28, 28, 1]' in output
  images, labels, expected = test_split
  assert _classes(path, images).tolist() == expected.tolist()
  assert np.mean(expected == labels) > 0.8


@pytest.mark.slow
def test_export_prints_upstream_input_and_the_predictions(exported):
  assert 'input: input:0 float32 [None, 28, 28, 1]' in exported['output']
  assert ('output: Predictions/Reshape_1:0 float32 [None, 10]'
          in exported['output'])


@pytest.mark.slow
def test_frozen_graph_has_the_input_placeholder_and_no_variables(exported):
  graph_def = graph_lib.read_graph_def(exported['frozen'])
  nodes = {node.name: node for node in graph_def.node}
  assert nodes['input'].op == 'Placeholder'
  assert [d.size for d in nodes['input'].attr['shape'].shape.dim] == [
      -1, 28, 28, 1]
  assert not [n for n in graph_def.node if 'Variable' in n.op]
  assert nodes['LeNet/conv1/weights'].op == 'Const'
  assert 'Predictions/Reshape_1' in nodes


@pytest.fixture(scope='module')
def test_split(trained_lenet, digits_dir):
  """(images, labels, the checkpoint's classes) of the digits test split."""
  images, labels = _test_split(digits_dir)
  return images, labels, _checkpoint_classes(trained_lenet, images)


def _classes(path, images):
  return np.argmax(artifacts.load(path).predict(images), 1)


@pytest.mark.slow
@pytest.mark.parametrize('artifact', ['frozen', 'saved_model', 'tflite'])
def test_float_artifact_predicts_what_the_checkpoint_predicts(
    exported, test_split, artifact):
  images, labels, expected = test_split
  assert _classes(exported[artifact], images).tolist() == expected.tolist()
  assert np.mean(expected == labels) > 0.8


@pytest.mark.slow
def test_float16_tflite_is_half_the_size_and_agrees(exported, test_split):
  images, _, expected = test_split
  assert np.mean(_classes(exported['float16'], images) == expected) >= 0.997
  ratio = (os.path.getsize(exported['float16'])
           / os.path.getsize(exported['tflite']))
  assert 0.45 < ratio < 0.55


@pytest.mark.slow
def test_int8_tflite_is_a_quarter_the_size_within_a_point(exported,
                                                           test_split):
  images, labels, expected = test_split
  classes = _classes(exported['int8'], images)
  assert abs(np.mean(classes == labels) - np.mean(expected == labels)) <= 0.01
  assert np.mean(classes == expected) >= 0.98
  ratio = (os.path.getsize(exported['int8'])
           / os.path.getsize(exported['tflite']))
  assert 0.2 < ratio < 0.3
  interpreter = litert.Interpreter(model_path=exported['int8'])
  assert interpreter.get_input_details()[0]['dtype'] == np.int8
  assert interpreter.get_output_details()[0]['dtype'] == np.int8


@pytest.mark.slow
def test_int8_per_tensor_drops_the_per_channel_scales_within_a_point(
    exported, test_split):
  images, labels, expected = test_split
  classes = _classes(exported['int8_per_tensor'], images)
  assert abs(np.mean(classes == labels) - np.mean(expected == labels)) <= 0.01
  per_channel = tflite_contents.read(exported['int8'])
  per_tensor = tflite_contents.read(exported['int8_per_tensor'])
  # LeNet's 4 layers: 32 + 64 + 1024 + 10 output channels, a scale and a
  # zero point (12 bytes) each for the weights and for the bias.
  assert per_channel.channel_parameters == 2 * 1130
  assert per_tensor.per_channel_tensors == 0
  assert (per_channel.quantization_bytes - per_tensor.quantization_bytes
          == (2 * 1130 - 8) * 12)
  assert 'FLOAT32' not in per_tensor.constant_bytes


@pytest.mark.slow
def test_eval_prints_the_exported_accuracy_beside_the_checkpoints(
    exported, trained_lenet, digits_dir, test_split):
  _, labels, expected = test_split
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % trained_lenet,
                      '--exported_model=%s' % exported['tflite'],
                      timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  accuracy = '%.2f%%' % (100 * np.mean(expected == labels))
  assert ('digits test: TFLite %s: accuracy %s on 360 examples'
          % (exported['tflite'], accuracy)) in result.stdout
  assert re.search(r'digits test: checkpoint .*model\.ckpt-150: accuracy '
                   r'%s; top-1 agreement 100\.00%%' % re.escape(accuracy),
                   result.stdout)


@pytest.mark.slow
def test_saved_model_in_a_version_folder(exported):
  version = os.path.join(exported['saved_model'], '1')
  assert sorted(os.listdir(exported['saved_model'])) == ['1']
  assert sorted(os.listdir(version)) == ['saved_model.pb', 'variables']


@pytest.mark.slow
def test_saved_model_loads_in_eager_tf2_and_classifies_image_bytes(
    exported, test_split, digits_dir, tmp_path):
  images, _, expected = test_split
  images_file = str(tmp_path / 'images.npy')
  np.save(images_file, images)
  result = subprocess.run(
      [sys.executable, '-c', _EAGER_SCRIPT,
       os.path.join(exported['saved_model'], '1'),
       os.path.join(digits_dir, 'digits_test.tfrecord'), images_file],
      cwd=REPO, env=script_env(), capture_output=True, text=True,
      timeout=300, check=True)
  served = json.loads(result.stdout.strip().splitlines()[-1])
  expected = expected.tolist()
  assert served['signatures'] == ['predict_images', 'serving_default']
  assert served['probabilities_shape'] == [360, 10]
  assert served['bytes_classes'] == expected
  assert served['float_classes'] == expected


@pytest.mark.slow
def test_graph_without_checkpoint_is_text_unfrozen_and_refused_by_eval(
    trained_lenet, digits_dir, tmp_path):
  path = str(tmp_path / 'lenet.pbtxt')
  output = _export('--output_file=%s' % path, '--write_text_graphdef',
                   '--batch_size=1')
  assert 'graph: %s (no weights)' % path in output
  with open(path) as f:
    assert 'name: "input"' in f.read()
  graph_def = graph_lib.read_graph_def(path)
  shape = [node for node in graph_def.node if node.name == 'input'][0]
  assert [d.size for d in shape.attr['shape'].shape.dim] == [1, 28, 28, 1]
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % trained_lenet,
                      '--exported_model=%s' % path)
  assert_one_usage_error(result, r'error: --exported_model=.* is not frozen '
                         r'\(it holds variable LeNet/.*\); export it with '
                         r'--checkpoint_path')


def _untrained_checkpoint(directory, model_name, input_shape,
                          quantized=False):
  """The prefix of `model_name` for digits' 10 classes, saved untrained,
  and a function giving its end points' values {name: array} on inputs
  and their {name: (tensor name, shape)}. `quantized`: the network
  quantization-aware (nets/quantize.py), its ranges set by one batch of
  random inputs, evaluated as --quantize does."""
  prefix = os.path.join(directory, '%s.ckpt' % model_name)

  def network_fn(training_ranges=False):
    network = nets_factory.get_network_fn(model_name, 10, is_training=False)
    if quantized:
      tf.train.get_or_create_global_step()
      network = quantize.quantized_network_fn(network, training_ranges, 0)
    return network

  with tf.Graph().as_default():
    network_fn(training_ranges=True)(tf.random.uniform(
        [4] + input_shape, -1, 1, seed=4))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      session.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
      tf.train.Saver().save(session, prefix)

  def end_points_of(inputs):
    with tf.Graph().as_default():
      placeholder = tf.placeholder(tf.float32, [None] + input_shape)
      _, end_points = network_fn()(placeholder)
      with tf.Session() as session:
        tf.train.Saver().restore(session, prefix)
        return session.run(end_points, {placeholder: inputs}), {
            name: (t.name, t.shape.as_list()) for name, t in
            end_points.items()}

  return prefix, end_points_of


def _input_shape(graph_def):
  [node] = [node for node in graph_def.node
            if node.name == graph_lib.INPUT_NAME]
  return [d.size for d in node.attr['shape'].shape.dim]


def test_a_video_export_takes_clips_and_gives_the_nets_predictions(
    tmp_path):
  prefix, end_points_of = _untrained_checkpoint(str(tmp_path), 'i3d',
                                                [4, 32, 32, 3])
  path = str(tmp_path / 'i3d.pb')
  output = _export('--model_name=i3d', '--is_video_model', '--num_frames=4',
                   '--image_size=32', '--checkpoint_path=%s' % prefix,
                   '--output_file=%s' % path)
  assert 'input: input:0 float32 [None, 4, 32, 32, 3]' in output
  assert ('output: InceptionV1/Logits/Predictions/Reshape_1:0 float32 '
          '[None, 10]') in output
  assert _input_shape(graph_lib.read_graph_def(path)) == [-1, 4, 32, 32, 3]
  clips = np.random.RandomState(0).uniform(
      -1, 1, [3, 4, 32, 32, 3]).astype(np.float32)
  expected, _ = end_points_of(clips)
  np.testing.assert_allclose(artifacts.load(path).predict(clips),
                             expected['Predictions'], rtol=1e-5, atol=1e-6)


def test_a_final_endpoint_export_ends_at_that_end_point(tmp_path):
  prefix, end_points_of = _untrained_checkpoint(str(tmp_path), 'lenet',
                                                [28, 28, 1])
  frozen, tflite = str(tmp_path / 'pool2.pb'), str(tmp_path / 'pool2.tflite')
  unfrozen = str(tmp_path / 'pool2_unfrozen.pb')
  output = _export('--final_endpoint=pool2', '--checkpoint_path=%s' % prefix,
                   '--output_file=%s' % frozen, '--tflite_file=%s' % tflite)
  _export('--final_endpoint=pool2', '--output_file=%s' % unfrozen)
  images = np.random.RandomState(1).uniform(
      -1, 1, [2, 28, 28, 1]).astype(np.float32)
  values, described = end_points_of(images)
  assert described['pool2'] == ('LeNet/pool2/MaxPool:0', [None, 7, 7, 64])
  assert 'output: LeNet/pool2/MaxPool:0 float32 [None, 7, 7, 64]' in output
  for path in (frozen, unfrozen):
    names = {node.name for node in graph_lib.read_graph_def(path).node}
    assert 'LeNet/pool2/MaxPool' in names
    assert not {n for n in names if n.startswith(('LeNet/fc3', 'LeNet/fc4',
                                                  'LeNet/Predictions'))}
  np.testing.assert_allclose(artifacts.load(frozen).predict(images),
                             values['pool2'], rtol=1e-5, atol=1e-6)
  interpreter = litert.Interpreter(model_path=tflite)
  assert list(interpreter.get_output_details()[0]['shape']) == [1, 7, 7, 64]
  np.testing.assert_allclose(artifacts.load(tflite).predict(images),
                             values['pool2'], rtol=1e-4, atol=1e-5)


def test_a_quantized_export_ends_at_its_final_endpoint(tmp_path):
  prefix, end_points_of = _untrained_checkpoint(str(tmp_path), 'lenet',
                                                [28, 28, 1], quantized=True)
  frozen = str(tmp_path / 'pool2.pb')
  output = _export('--final_endpoint=pool2', '--quantize',
                   '--checkpoint_path=%s' % prefix, '--output_file=%s' % frozen)
  assert 'output: LeNet/pool2/MaxPool:0 float32 [None, 7, 7, 64]' in output
  nodes = graph_lib.read_graph_def(frozen).node
  # Both convolutions' weights and activations, and no layer after pool2.
  assert sum(node.op == 'FakeQuantWithMinMaxVars' for node in nodes) == 4
  assert [node.name for node in nodes if node.op == 'MatMul'] == []
  images = np.random.RandomState(2).uniform(
      -1, 1, [2, 28, 28, 1]).astype(np.float32)
  values, _ = end_points_of(images)
  np.testing.assert_allclose(artifacts.load(frozen).predict(images),
                             values['pool2'], rtol=1e-5, atol=1e-6)
  # pool2 takes conv2's fake-quantized activations: at most 256 levels of
  # its range, which the random batch set.
  reader = tf.train.load_checkpoint(prefix)
  high = reader.get_tensor('LeNet/conv2/act_quant/max')
  assert high > 0 and reader.get_tensor('LeNet/conv2/weights_quant/max') > 0
  assert 16 < len(np.unique(values['pool2'])) <= 256
  assert 0 < values['pool2'].max() <= high + 1e-6
  # The quantized layers differ from the float ones.
  with tf.Graph().as_default():
    float_pool2 = nets_factory.get_network_fn('lenet', 10)(
        tf.constant(images))[1]['pool2']
    with tf.Session() as session:
      tf.train.Saver().restore(session, prefix)
      assert np.abs(session.run(float_pool2) - values['pool2']).max() > 1e-4
