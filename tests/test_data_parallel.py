"""Training with clones: the identities behind synchronous data parallelism."""

import numpy as np
import pytest

from deployment import model_deploy
from deployment.slim_compat import slim, tf

NUM_CLASSES = 5


def _sliced_model_fn(images, labels, num_clones, network):
  """Clone i takes the i-th of num_clones equal slices of the batch."""
  clone_index = []

  def model_fn():
    i = len(clone_index)
    clone_index.append(i)
    size = images.shape[0] // num_clones
    logits = network(images[i * size:(i + 1) * size])
    tf.losses.sparse_softmax_cross_entropy(
        labels[i * size:(i + 1) * size], logits)
    return logits

  return model_fn


def _convnet(images):
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(0.01),
                      weights_initializer=tf.truncated_normal_initializer(
                          stddev=0.1, seed=1)):
    net = slim.conv2d(images, 4, [3, 3], scope='conv1')
    net = slim.max_pool2d(net, [2, 2], scope='pool1')
    net = slim.flatten(net)
    net = slim.fully_connected(net, 16, scope='fc1')
    return slim.fully_connected(net, NUM_CLASSES, activation_fn=None,
                                scope='logits')


def _train_one_step(num_clones, images_value, labels_value):
  with tf.Graph().as_default():
    images = tf.constant(images_value)
    labels = tf.constant(labels_value)
    config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                           clone_on_cpu=True)
    model = model_deploy.deploy(
        config, _sliced_model_fn(images, labels, num_clones, _convnet),
        optimizer=tf.train.GradientDescentOptimizer(0.5))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      loss = sess.run(model.train_op)
      weights = {v.op.name: sess.run(v) for v in tf.trainable_variables()}
  return loss, weights


def test_four_clones_of_batch_b_equal_one_clone_of_batch_4b():
  rng = np.random.RandomState(0)
  batch = 6
  images = rng.rand(4 * batch, 8, 8, 1).astype(np.float32)
  labels = rng.randint(0, NUM_CLASSES, size=4 * batch).astype(np.int64)
  loss_1, weights_1 = _train_one_step(1, images, labels)
  loss_4, weights_4 = _train_one_step(4, images, labels)
  assert abs(loss_1 - loss_4) <= 1e-5
  assert sorted(weights_1) == sorted(weights_4) == [
      'conv1/biases', 'conv1/weights', 'fc1/biases', 'fc1/weights',
      'logits/biases', 'logits/weights']
  for name in weights_1:
    np.testing.assert_allclose(weights_4[name], weights_1[name], atol=1e-5,
                               rtol=0, err_msg=name)
  # The step did change the weights.
  assert np.abs(weights_1['conv1/weights']).max() > 0


def _batch_norm_classifier(images):
  net = slim.batch_norm(images, decay=0.5, center=False, scale=False,
                        is_training=True, scope='input_bn')
  net = slim.fully_connected(net, 32, normalizer_fn=slim.batch_norm,
                             normalizer_params={'is_training': True},
                             scope='hidden')
  return slim.fully_connected(net, NUM_CLASSES, activation_fn=None,
                              scope='logits')


def test_batch_norm_classifier_trains_with_two_clones():
  rng = np.random.RandomState(3)
  centers = rng.randn(NUM_CLASSES, 6) * 3.0
  labels_half = np.arange(32) % NUM_CLASSES
  features_half = centers[labels_half] + rng.randn(32, 6) * 0.3
  features_half = features_half * 2.0 + 10.0
  # The second clone's half is a permutation of the first's, so both clones
  # see the statistics of the whole data.
  permutation = rng.permutation(32)
  features = np.concatenate([features_half, features_half[permutation]])
  labels = np.concatenate([labels_half, labels_half[permutation]])

  with tf.Graph().as_default():
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    model_fn = _sliced_model_fn(tf.constant(features, tf.float32),
                                tf.constant(labels, tf.int64), 2,
                                _batch_norm_classifier)
    model = model_deploy.deploy(config, model_fn,
                                optimizer=tf.train.AdamOptimizer(0.05))
    moving_mean = slim.get_variables_by_name('input_bn/moving_mean')[0]
    moving_variance = slim.get_variables_by_name('input_bn/moving_variance')[0]
    # One set of moving statistics per layer, shared by the clones.
    assert len(slim.get_variables_by_name('moving_mean')) == 2
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      losses = [sess.run(model.train_op) for _ in range(10)]
      mean, variance = sess.run([moving_mean, moving_variance])
  assert losses[-1] * 5 <= losses[0], losses
  np.testing.assert_allclose(mean, features.mean(axis=0), rtol=2e-3)
  # Each clone's batch of 32 feeds its unbiased variance to the average.
  np.testing.assert_allclose(variance, features_half.var(axis=0, ddof=1),
                             rtol=2e-3)
