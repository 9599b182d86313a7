"""Clones on devices of their own, clones spanning devices, and names that
do not depend on the number of clones."""

import os

import numpy as np
import pytest
import tf_keras

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from nets import nets_factory

DeploymentConfig = model_deploy.DeploymentConfig


@pytest.mark.parametrize('kwargs,devices', [
    (dict(num_clones=2, clone_on_cpu=True, separate_cpu_devices=True),
     [['/device:CPU:0'], ['/device:CPU:1']]),
    (dict(num_clones=2, devices_per_clone=2),
     [['/device:GPU:0', '/device:GPU:1'], ['/device:GPU:2', '/device:GPU:3']]),
    (dict(num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
          devices_per_clone=2),
     [['/device:CPU:0', '/device:CPU:1'], ['/device:CPU:2', '/device:CPU:3']]),
    (dict(num_clones=2, clone_on_cpu=True, devices_per_clone=2),
     [['/device:CPU:0'] * 2] * 2),
    (dict(num_clones=2, num_ps_tasks=1, devices_per_clone=2),
     [['/job:worker/device:GPU:0', '/job:worker/device:GPU:1'],
      ['/job:worker/device:GPU:2', '/job:worker/device:GPU:3']]),
])
def test_clone_devices(kwargs, devices):
  config = DeploymentConfig(**kwargs)
  assert [config.clone_devices(i) for i in range(2)] == devices
  assert [config.clone_device(i) for i in range(2)] == [d[0] for d in devices]


def test_upstream_clone_device_is_unchanged():
  config = DeploymentConfig(num_clones=3, clone_on_cpu=True)
  assert [config.clone_device(i) for i in range(3)] == ['/device:CPU:0'] * 3
  assert config.clones_share_a_device


def test_separate_cpu_devices_need_clone_on_cpu():
  with pytest.raises(ValueError, match='separate_cpu_devices=True places '
                     'clones on logical CPU devices: set clone_on_cpu=True'):
    DeploymentConfig(num_clones=2, separate_cpu_devices=True)


def test_session_config_creates_one_cpu_device_per_clone_device(graph):
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True,
                            separate_cpu_devices=True, devices_per_clone=2)
  proto = model_deploy.session_config(config, allow_soft_placement=True)
  assert proto.device_count['CPU'] == 4 and proto.allow_soft_placement
  with tf.Session(config=proto) as sess:
    names = [d.name for d in sess.list_devices()]
  assert ['/job:localhost/replica:0/task:0/device:CPU:%d' % i
          for i in range(4)] == [n for n in names if 'CPU' in n]


def _two_part_model_fn(config, images, labels, num_clones):
  """First half on the clone's first device, second half on its second."""
  calls = []

  def model_fn():
    i = len(calls)
    calls.append(i)
    size = len(images) // num_clones
    first, second = config.clone_devices(i)
    with tf.device(first):
      net = slim.fully_connected(
          tf.constant(images[i * size:(i + 1) * size]), 8,
          weights_initializer=tf.truncated_normal_initializer(seed=3),
          scope='first_half')
    with tf.device(second):
      logits = slim.fully_connected(
          net, 3, activation_fn=None,
          weights_initializer=tf.truncated_normal_initializer(seed=4),
          scope='second_half')
    tf.losses.sparse_softmax_cross_entropy(
        tf.constant(labels[i * size:(i + 1) * size]), logits)
    return net, logits

  return model_fn


def _train_two_part_model(num_clones, devices_per_clone, steps=3):
  rng = np.random.RandomState(0)
  images = rng.randn(8, 5).astype(np.float32)
  labels = rng.randint(0, 3, 8).astype(np.int64)
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True,
                            separate_cpu_devices=True,
                            devices_per_clone=devices_per_clone)
  with tf.Graph().as_default():
    if devices_per_clone == 1:
      model_fn = _single_device_model_fn(images, labels)
    else:
      model_fn = _two_part_model_fn(config, images, labels, num_clones)
    model = model_deploy.deploy(
        config, model_fn, optimizer=tf.train.GradientDescentOptimizer(0.5))
    placed = [(c.outputs[0].op.device, c.outputs[1].op.device)
              for c in model.clones]
    with tf.Session(config=model_deploy.session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      losses = [sess.run(model.train_op) for _ in range(steps)]
      weights = sess.run({v.op.name: v for v in tf.trainable_variables()})
  return placed, losses, weights


def _single_device_model_fn(images, labels):
  def model_fn():
    net = slim.fully_connected(
        tf.constant(images), 8,
        weights_initializer=tf.truncated_normal_initializer(seed=3),
        scope='first_half')
    logits = slim.fully_connected(
        net, 3, activation_fn=None,
        weights_initializer=tf.truncated_normal_initializer(seed=4),
        scope='second_half')
    tf.losses.sparse_softmax_cross_entropy(tf.constant(labels), logits)
    return net, logits
  return model_fn


def test_clone_spanning_two_devices_trains_like_one_device():
  placed, losses, weights = _train_two_part_model(2, 2)
  assert placed == [('/device:CPU:0', '/device:CPU:1'),
                    ('/device:CPU:2', '/device:CPU:3')]
  _, reference_losses, reference_weights = _train_two_part_model(1, 1)
  np.testing.assert_allclose(losses, reference_losses, rtol=1e-5)
  assert losses[-1] < losses[0]
  for name, value in reference_weights.items():
    np.testing.assert_allclose(weights[name], value, rtol=1e-5, atol=1e-6,
                               err_msg=name)


def _keras_and_slim_model_fn():
  keras_model = tf_keras.Sequential([
      tf_keras.layers.Dense(4, activation='relu'),
      tf_keras.layers.Dense(2)])

  def model_fn(images, labels):
    features = slim.fully_connected(images, 6, scope='slim_fc')
    logits = keras_model(features)
    tf.losses.sparse_softmax_cross_entropy(labels, logits)

  return model_fn, keras_model


def _build_and_train(num_clones, train_dir, restore_from=None):
  rng = np.random.RandomState(1)
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  with tf.Graph().as_default():
    images = tf.constant(rng.randn(4, 3).astype(np.float32))
    labels = tf.constant(rng.randint(0, 2, 4).astype(np.int64))
    model_fn, keras_model = _keras_and_slim_model_fn()
    model = model_deploy.deploy(config, model_fn, [images, labels],
                                optimizer=tf.train.GradientDescentOptimizer(
                                    0.1))
    names = sorted(v.op.name for v in tf.trainable_variables())
    assert len(keras_model.weights) == 4  # Shared by every clone.
    saver = tf.train.Saver()
    with tf.Session() as sess:
      if restore_from:
        saver.restore(sess, restore_from)
      else:
        sess.run(tf.global_variables_initializer())
        sess.run(model.train_op)
      values = sess.run({v.op.name: v for v in tf.trainable_variables()})
      path = saver.save(sess, os.path.join(train_dir, 'model.ckpt'))
  return names, values, path


def test_variable_names_do_not_depend_on_the_number_of_clones(tmp_path):
  names, values, path = _build_and_train(2, str(tmp_path / 'two'))
  assert names == [
      'sequential/dense/bias', 'sequential/dense/kernel',
      'sequential/dense_1/bias', 'sequential/dense_1/kernel',
      'slim_fc/biases', 'slim_fc/weights']
  for num_clones in (1, 4):
    restored_names, restored, _ = _build_and_train(
        num_clones, str(tmp_path / str(num_clones)), restore_from=path)
    assert restored_names == names
    for name in names:
      np.testing.assert_array_equal(restored[name], values[name])


@pytest.mark.slow
def test_nets_factory_network_trains_synced_and_restores_plain(tmp_path):
  # MobileNet v1 rather than v2: the same kinds of layer (convolutions,
  # depthwise ones, batch norm with gamma), in half the batch norms, whose
  # synced moments and their gradients take most of the building.
  network_fn = nets_factory.get_network_fn('mobilenet_v1_025', num_classes=5,
                                           is_training=True)
  rng = np.random.RandomState(2)
  images = rng.rand(4, 32, 32, 3).astype(np.float32)
  labels = rng.randint(0, 5, 4).astype(np.int64)
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True,
                            separate_cpu_devices=True)
  calls = []

  def model_fn():
    i = len(calls)
    calls.append(i)
    logits, _ = network_fn(tf.constant(images[2 * i:2 * i + 2]))
    tf.losses.sparse_softmax_cross_entropy(
        tf.constant(labels[2 * i:2 * i + 2]), logits)

  with tf.Graph().as_default():
    model = model_deploy.deploy(
        config, model_fn, optimizer=tf.train.GradientDescentOptimizer(0.01),
        sync_batch_norm=True)
    synced = [op for op in tf.get_default_graph().get_operations()
              if op.type == 'CollectiveReduceV2']
    # One all-reduce per batch-norm layer per clone, plus their gradients.
    batch_norms = {v.op.name.rsplit('/', 1)[0] for v in tf.global_variables()
                   if v.op.name.endswith('/moving_mean')}
    assert len(synced) == 2 * 2 * len(batch_norms)
    with tf.Session(config=model_deploy.session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      losses = [sess.run(model.train_op) for _ in range(2)]
      saved = sess.run({v.op.name: v for v in tf.global_variables()})
      path = tf.train.Saver().save(sess, str(tmp_path / 'model.ckpt'))
  assert all(np.isfinite(losses))

  plain_fn = nets_factory.get_network_fn('mobilenet_v1_025', num_classes=5,
                                         is_training=False)
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    plain_fn(tf.constant(images))
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, path)
      restored = sess.run({v.op.name: v for v in tf.global_variables()})
  assert sorted(restored) == sorted(saved)
  for name in ('MobilenetV1/Conv2d_0/BatchNorm/moving_mean',
               'MobilenetV1/Conv2d_0/BatchNorm/gamma',
               'MobilenetV1/Conv2d_0/weights'):
    np.testing.assert_array_equal(restored[name], saved[name])
