"""tf-slim 1.1.0 works on TF 2.21 through tf2_compat.slim_compat."""

import importlib
import subprocess
import sys

import numpy as np
import pytest

from tests.script_runner import REPO
from tests.script_runner import script_env
from tf2_compat import slim_compat
from tf2_compat.slim_compat import slim, tf

EXPECTED_ALIASES = [
    'tensorflow.python.framework.ops.Tensor',
    'tensorflow.python.framework.ops.IndexedSlices',
    'tensorflow.python.ops.array_ops.stack',
    'tensorflow.python.ops.array_ops.unstack',
    'tensorflow.python.ops.control_flow_ops.cond',
    'tensorflow.python.ops.control_flow_ops.case',
    'tensorflow.python.ops.control_flow_ops.Assert',
    'tensorflow.python.ops.control_flow_ops.while_loop',
    'tensorflow.python.ops.variable_scope.variable',
    'tf_keras.legacy_tf_layers',
    'tf_keras.legacy_tf_layers.normalization',
]
LEGACY_LAYERS = ['tf_keras.legacy_tf_layers',
                 'tf_keras.legacy_tf_layers.normalization']
# (module, name, 'module:attribute' of the object on TF 2.21)
ALIASES = slim_compat._ALIASES  # pylint: disable=protected-access


def test_every_alias_was_missing_on_this_tensorflow():
  # On TF 2.21 none of these names exists any more: each alias is needed.
  assert tf.__version__ == '2.21.0'
  assert slim_compat.RESTORED == EXPECTED_ALIASES


def _alias_id(alias):
  module, name, _ = alias
  return '%s.%s' % (module.__name__.rsplit('.', 1)[1], name)


def _installed_objects():
  objects = {'%s.%s' % (module.__name__, name): getattr(module, name)
             for module, name, _ in ALIASES}
  objects.update((name, sys.modules[name]) for name in LEGACY_LAYERS)
  return objects


@pytest.mark.parametrize('alias', ALIASES, ids=_alias_id)
def test_each_alias_is_the_object_that_replaced_it(alias):
  module, name, target = alias
  module_name, attribute = target.split(':')
  assert getattr(module, name) is getattr(
      importlib.import_module(module_name), attribute)


def test_legacy_layers_alias_the_tf_keras_modules_themselves():
  # One module object under both names: the BatchNormalization class
  # unfused slim.batch_norm builds is tf_keras' own.
  for name in LEGACY_LAYERS:
    source = name.replace('tf_keras.', 'tf_keras.src.')
    assert sys.modules[name] is importlib.import_module(source)


def test_installing_again_changes_nothing():
  before = _installed_objects()
  assert sorted(before) == sorted(EXPECTED_ALIASES)
  assert slim_compat.install_aliases() == []
  after = _installed_objects()
  assert all(after[name] is before[name] for name in EXPECTED_ALIASES)


@pytest.mark.parametrize('alias', ALIASES, ids=_alias_id)
def test_a_missing_name_is_restored_alone(monkeypatch, alias):
  module, name, _ = alias
  installed = getattr(module, name)
  monkeypatch.delattr(module, name)
  assert slim_compat.install_aliases() == ['%s.%s' % (module.__name__, name)]
  assert getattr(module, name) is installed


def test_a_name_tensorflow_has_is_left_alone(monkeypatch):
  own_cond = object()
  control_flow_ops = slim_compat.control_flow_ops
  monkeypatch.setattr(control_flow_ops, 'cond', own_cond)
  assert slim_compat.install_aliases() == []
  assert control_flow_ops.cond is own_cond


def test_missing_legacy_layers_are_aliased_package_and_submodule(monkeypatch):
  installed = {name: sys.modules[name] for name in LEGACY_LAYERS}
  for name in LEGACY_LAYERS:
    monkeypatch.delitem(sys.modules, name)
  assert slim_compat.install_aliases() == LEGACY_LAYERS
  assert all(sys.modules[name] is installed[name] for name in LEGACY_LAYERS)


@pytest.mark.parametrize('fused', [True, False])
def test_batch_norm_normalizes_and_updates_moving_statistics(graph, fused):
  rng = np.random.RandomState(0)
  data = (rng.randn(16, 4, 4, 3) * 3.0 + 5.0).astype(np.float32)
  inputs = tf.constant(data)
  outputs = slim.batch_norm(inputs, decay=0.5, is_training=True, fused=fused,
                            epsilon=1e-5, scope='bn')
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
  assert len(update_ops) == 2
  with tf.control_dependencies(update_ops):
    outputs = tf.identity(outputs)
  moving_mean = slim.get_variables_by_name('moving_mean')[0]
  moving_variance = slim.get_variables_by_name('moving_variance')[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    normalized = sess.run(outputs)
    mean, variance = sess.run([moving_mean, moving_variance])
  np.testing.assert_allclose(normalized.mean(axis=(0, 1, 2)), 0.0, atol=1e-4)
  np.testing.assert_allclose(normalized.std(axis=(0, 1, 2)), 1.0, atol=1e-3)
  # One update with decay 0.5 from (0, 1): halfway to the batch statistics.
  batch_mean = data.mean(axis=(0, 1, 2))
  np.testing.assert_allclose(mean, 0.5 * batch_mean, rtol=1e-4)
  # The fused kernel feeds the unbiased (Bessel-corrected) batch variance to
  # the moving average, the unfused layer the biased one.
  n = 16 * 4 * 4
  batch_variance = data.var(axis=(0, 1, 2))
  if fused:
    batch_variance *= n / (n - 1)
  np.testing.assert_allclose(variance, 0.5 + 0.5 * batch_variance, rtol=1e-3)


def test_conv2d_and_fully_connected_take_arg_scope_defaults(graph):
  inputs = tf.ones([1, 3, 3, 2])
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_initializer=tf.constant_initializer(0.5),
                      biases_initializer=tf.constant_initializer(1.0),
                      activation_fn=None):
    conv = slim.conv2d(inputs, 4, [3, 3], padding='VALID', scope='conv')
    logits = slim.fully_connected(slim.flatten(conv), 2, scope='fc')
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    conv_value, logits_value = sess.run([conv, logits])
  # Each conv output: 3*3*2 ones times 0.5, plus bias 1.
  np.testing.assert_allclose(conv_value, np.full([1, 1, 1, 4], 10.0))
  # Each logit: 4 inputs of 10 times 0.5, plus bias 1.
  np.testing.assert_allclose(logits_value, [[21.0, 21.0]])
  names = sorted(v.op.name for v in tf.global_variables())
  assert names == ['conv/biases', 'conv/weights', 'fc/biases', 'fc/weights']


def test_learning_train_runs_steps_and_writes_checkpoint(graph, tmp_path):
  rng = np.random.RandomState(1)
  x = rng.randn(64, 3).astype(np.float32)
  y = x.dot(np.array([[1.0], [-2.0], [0.5]], np.float32))
  predictions = slim.fully_connected(tf.constant(x), 1, activation_fn=None)
  loss = tf.losses.mean_squared_error(tf.constant(y), predictions)
  optimizer = tf.train.GradientDescentOptimizer(0.1)
  train_op = slim.learning.create_train_op(loss, optimizer)
  final_loss = slim.learning.train(
      train_op, str(tmp_path), number_of_steps=20, save_summaries_secs=0,
      save_interval_secs=0, log_every_n_steps=100)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-20')
  initial_loss = float(np.mean(y ** 2))
  assert final_loss < 0.1 * initial_loss


@pytest.mark.parametrize('image_format', ['png', 'jpeg'])
def test_tfexample_decoder_reads_encoded_images(graph, tmp_path,
                                                image_format):
  image = np.zeros([6, 5, 3], np.uint8)
  image[:, :, 0] = 200
  image[2:4, 1:3, 1] = 100
  image[:, :, 2] = np.arange(5, dtype=np.uint8) * 10
  encode = tf.io.encode_png if image_format == 'png' else tf.io.encode_jpeg
  with tf.Session() as sess:
    encoded = sess.run(encode(tf.constant(image)))
  example = tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[encoded])),
      'image/format': tf.train.Feature(
          bytes_list=tf.train.BytesList(value=[image_format.encode()])),
      'image/class/label': tf.train.Feature(
          int64_list=tf.train.Int64List(value=[7])),
  }))
  path = str(tmp_path / 'images.tfrecord')
  with tf.io.TFRecordWriter(path) as writer:
    writer.write(example.SerializeToString())

  keys_to_features = {
      'image/encoded': tf.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.FixedLenFeature((), tf.string, default_value='png'),
      'image/class/label': tf.FixedLenFeature((), tf.int64),
  }
  items_to_handlers = {
      'image': slim.tfexample_decoder.Image(shape=[6, 5, 3]),
      'label': slim.tfexample_decoder.Tensor('image/class/label'),
  }
  decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features,
                                                    items_to_handlers)
  serialized = next(tf.io.tf_record_iterator(path))
  decoded_image, label = decoder.decode(serialized, ['image', 'label'])
  with tf.Session() as sess:
    decoded_image, label, reference = sess.run(
        [decoded_image, label, tf.io.decode_image(encoded)])
  assert label == 7
  # JPEG is lossy: the decoder must agree with TF's own decoding of the
  # bytes; PNG must give back the original pixels.
  np.testing.assert_array_equal(decoded_image, reference)
  if image_format == 'png':
    np.testing.assert_array_equal(decoded_image, image)
  else:
    assert abs(decoded_image[:, :, 0].mean() - 200) < 5


def _equality_enabled():
  # pylint: disable=protected-access
  from tensorflow.python.framework import tensor as tensor_lib
  return tensor_lib.Tensor._USE_EQUALITY


def test_identity_equality_is_scoped_to_graph_building(graph):
  assert _equality_enabled()
  a = tf.constant(1.0)
  b = tf.constant(1.0)
  with slim_compat.identity_equality():
    assert not _equality_enabled()
    # In a graph, comparison was by identity anyway.
    assert a is not b and a != b and a == a  # pylint: disable=comparison-with-itself
    assert len({a, b, a}) == 2
  assert _equality_enabled()


@pytest.mark.usefixtures('graph')
def test_identity_equality_turns_equality_back_on_after_an_error():
  with pytest.raises(KeyError):
    with slim_compat.identity_equality():
      raise KeyError('model_fn failed')
  assert _equality_enabled()


@pytest.mark.usefixtures('graph')
def test_identity_equality_leaves_equality_off_if_it_was_off():
  tf.disable_tensor_equality()
  try:
    with slim_compat.identity_equality():
      assert not _equality_enabled()
    assert not _equality_enabled()
  finally:
    tf.enable_tensor_equality()


def test_identity_equality_leaves_eager_comparison_alone():
  with slim_compat.identity_equality():
    assert _equality_enabled()
    assert bool(tf.reduce_all(tf.constant([1, 2]) == tf.constant([1, 2])))


# What a fresh process has after importing slim, then after the one loss
# of tf-slim that uses scikit-learn is built.
SKLEARN_PROGRAM = '''
import sys
from tf2_compat.slim_compat import slim
learning = slim.losses.metric_learning
print('sklearn imported:', 'sklearn' in sys.modules, learning.HAS_SKLEARN)
print('rand score:', learning.metrics.adjusted_rand_score([0, 0, 1], [1, 1, 0]))
print('sklearn imported:', 'sklearn' in sys.modules)
'''


def test_slim_imports_scikit_learn_only_for_the_loss_that_uses_it():
  result = subprocess.run(
      [sys.executable, '-c', SKLEARN_PROGRAM], cwd=REPO, env=script_env(),
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=120, check=False)
  assert result.returncode == 0, result.stdout
  assert result.stdout.splitlines() == [
      'sklearn imported: False True', 'rand score: 1.0',
      'sklearn imported: True']
