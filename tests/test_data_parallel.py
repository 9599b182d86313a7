"""Training with clones: the identities behind synchronous data parallelism."""

import numpy as np
import pytest

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf

NUM_CLASSES = 5
LEARNING_RATE = 0.5
L2_SCALE = 0.01


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
                      weights_regularizer=slim.l2_regularizer(L2_SCALE),
                      weights_initializer=tf.truncated_normal_initializer(
                          stddev=0.1, seed=1)):
    net = slim.conv2d(images, 4, [3, 3], scope='conv1')
    net = slim.max_pool2d(net, [2, 2], scope='pool1')
    net = slim.flatten(net)
    net = slim.fully_connected(net, 16, scope='fc1')
    return slim.fully_connected(net, NUM_CLASSES, activation_fn=None,
                                scope='logits')


def _linear_classifier(images):
  with slim.arg_scope([slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(L2_SCALE),
                      weights_initializer=tf.truncated_normal_initializer(
                          stddev=0.1, seed=2)):
    return slim.fully_connected(slim.flatten(images), NUM_CLASSES,
                                activation_fn=None, scope='logits')


def _trainable_values(sess):
  return {v.op.name: sess.run(v) for v in tf.trainable_variables()}


def _train_one_step(num_clones, images_value, labels_value, network):
  """(loss, weights before, weights after) of one step of plain SGD."""
  with tf.Graph().as_default():
    images = tf.constant(images_value)
    labels = tf.constant(labels_value)
    config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                           clone_on_cpu=True)
    model = model_deploy.deploy(
        config, _sliced_model_fn(images, labels, num_clones, network),
        optimizer=tf.train.GradientDescentOptimizer(LEARNING_RATE))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      before = _trainable_values(sess)
      loss = sess.run(model.train_op)
      after = _trainable_values(sess)
  return loss, before, after


def _random_batch(size, seed=0):
  rng = np.random.RandomState(seed)
  images = rng.rand(size, 8, 8, 1).astype(np.float32)
  labels = rng.randint(0, NUM_CLASSES, size=size).astype(np.int64)
  return images, labels


def test_four_clones_of_batch_b_equal_one_clone_of_batch_4b():
  images, labels = _random_batch(4 * 6)
  loss_1, before_1, after_1 = _train_one_step(1, images, labels, _convnet)
  loss_4, before_4, after_4 = _train_one_step(4, images, labels, _convnet)
  assert sorted(after_1) == sorted(after_4) == [
      'conv1/biases', 'conv1/weights', 'fc1/biases', 'fc1/weights',
      'logits/biases', 'logits/weights']
  assert abs(loss_1 - loss_4) <= 1e-5
  for name in after_1:
    # Both runs start from the same seeded weights...
    np.testing.assert_array_equal(before_4[name], before_1[name],
                                  err_msg=name)
    # ...take a step that moves every variable...
    assert np.abs(after_1[name] - before_1[name]).max() > 1e-4, name
    # ...and end at the same weights.
    np.testing.assert_allclose(after_4[name], after_1[name], atol=1e-5,
                               rtol=0, err_msg=name)


def _expected_sgd_step(images, labels, weights, biases):
  """NumPy: loss and weights after one SGD step on mean cross-entropy + L2.

  slim.l2_regularizer(scale) adds scale * sum(w**2) / 2 to the loss.
  """
  inputs = images.reshape(len(images), -1).astype(np.float64)
  logits = inputs @ weights + biases
  logits -= logits.max(axis=1, keepdims=True)
  probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
  batch = np.arange(len(labels))
  cross_entropy = -np.log(probabilities[batch, labels]).mean()
  loss = cross_entropy + L2_SCALE * np.sum(weights ** 2) / 2
  d_logits = probabilities.copy()
  d_logits[batch, labels] -= 1.0
  d_logits /= len(labels)
  d_weights = inputs.T @ d_logits + L2_SCALE * weights
  d_biases = d_logits.sum(axis=0)
  return (loss, weights - LEARNING_RATE * d_weights,
          biases - LEARNING_RATE * d_biases)


@pytest.mark.parametrize('num_clones', [1, 2, 4])
def test_step_descends_the_mean_loss_plus_l2_counted_once(num_clones):
  images, labels = _random_batch(4 * 6, seed=1)
  loss, before, after = _train_one_step(num_clones, images, labels,
                                        _linear_classifier)
  expected_loss, expected_weights, expected_biases = _expected_sgd_step(
      images, labels, before['logits/weights'], before['logits/biases'])
  np.testing.assert_allclose(loss, expected_loss, rtol=1e-5)
  np.testing.assert_allclose(after['logits/weights'], expected_weights,
                             rtol=0, atol=1e-6)
  np.testing.assert_allclose(after['logits/biases'], expected_biases,
                             rtol=0, atol=1e-6)


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
