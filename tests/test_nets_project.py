"""The networks this project writes, run: LeNet, CifarNet, MobileNet v1, v2.

Also checks that the layers written out in nets/slim_nets.py for
num_classes=0 are exactly tf-slim's.
"""

import collections

import numpy as np
import pytest
from tf_slim.ops.arg_scope import arg_scope_func_key

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from nets import nets_factory
from nets import slim_nets

PROJECT_NETWORKS = ('lenet', 'cifarnet', 'mobilenet_v1', 'mobilenet_v2')
BATCH_NORM_NETWORKS = ('mobilenet_v1', 'mobilenet_v2')
# The pooled features, before dropout and the classifier.
POOLED_END_POINT = {'mobilenet_v1': 'AvgPool_1a', 'mobilenet_v2': 'global_pool'}
NUM_CLASSES = 10
WEIGHT_DECAY = 0.01

Network = collections.namedtuple(
    'Network', ['name', 'graph', 'images', 'logits', 'end_points'])


def _channels(name):
  return 1 if name == 'lenet' else 3


def _build(name, is_training, max_image_size=None):
  """Builds `name` through the factory, with dropout keeping half the units.

  The images placeholder has an unknown batch size, and the default image
  size of the network, or `max_image_size` if that is smaller.
  """
  with tf.Graph().as_default() as graph:
    network_fn = nets_factory.get_network_fn(
        name, NUM_CLASSES, weight_decay=WEIGHT_DECAY, is_training=is_training)
    size = min(network_fn.default_image_size,
               max_image_size or network_fn.default_image_size)
    images = tf.placeholder(tf.float32, [None, size, size, _channels(name)])
    logits, end_points = network_fn(images, dropout_keep_prob=0.5)
  return Network(name, graph, images, logits, end_points)


@pytest.fixture(scope='module')
def eval_network(request):
  """Network `request.param` in eval mode at its default image size."""
  return _build(request.param, is_training=False)


@pytest.fixture(scope='module')
def training_network(request):
  """Network `request.param` in training mode; MobileNets on 32x32 images,
  which is enough to see how they behave."""
  return _build(request.param, is_training=True, max_image_size=32)


def _random_images(network, batch_size, seed=0):
  shape = [batch_size] + network.images.shape.as_list()[1:]
  return np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)


def _run_twice(network, fetch, first_images, second_images):
  """Runs `fetch` on two batches in one session (same initial weights)."""
  with network.graph.as_default(), tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    return (sess.run(fetch, {network.images: first_images}),
            sess.run(fetch, {network.images: second_images}))


@pytest.mark.parametrize('eval_network', PROJECT_NETWORKS, indirect=True)
def test_unknown_batch_size_runs_for_two_and_three_images(eval_network):
  two, three = _run_twice(eval_network, eval_network.logits,
                          _random_images(eval_network, 2),
                          _random_images(eval_network, 3))
  assert two.shape == (2, NUM_CLASSES)
  assert three.shape == (3, NUM_CLASSES)


@pytest.mark.parametrize('eval_network', PROJECT_NETWORKS, indirect=True)
def test_eval_mode_gives_the_same_logits_on_every_run(eval_network):
  # The network has dropout keeping half the units, inactive in eval mode.
  images = _random_images(eval_network, 2)
  first, second = _run_twice(eval_network, eval_network.logits, images, images)
  np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize('training_network', PROJECT_NETWORKS, indirect=True)
def test_training_mode_dropout_changes_logits_between_runs(training_network):
  images = _random_images(training_network, 2)
  first, second = _run_twice(training_network, training_network.logits,
                             images, images)
  assert not np.allclose(first, second)


def _pooled_features_of_one_image_in_two_batches(network):
  first = _random_images(network, 1, seed=1)
  in_one_batch = np.concatenate([first, _random_images(network, 3, seed=2)])
  in_another = np.concatenate([first, _random_images(network, 3, seed=3)])
  features = network.end_points[POOLED_END_POINT[network.name]]
  return [batch[0] for batch in
          _run_twice(network, features, in_one_batch, in_another)]


@pytest.mark.parametrize('training_network', BATCH_NORM_NETWORKS,
                         indirect=True)
def test_training_batch_norm_normalizes_with_batch_statistics(
    training_network):
  # An image's features change with the other images of its batch.
  features = _pooled_features_of_one_image_in_two_batches(training_network)
  assert not np.allclose(*features)


@pytest.mark.parametrize('eval_network', BATCH_NORM_NETWORKS, indirect=True)
def test_eval_batch_norm_normalizes_with_moving_statistics(eval_network):
  features = _pooled_features_of_one_image_in_two_batches(eval_network)
  np.testing.assert_allclose(*features, rtol=1e-5, atol=1e-6)


def _update_ops_and_batch_norms(network):
  with network.graph.as_default():
    batch_norms = [v for v in tf.global_variables()
                   if v.op.name.endswith('BatchNorm/moving_mean')]
    return tf.get_collection(tf.GraphKeys.UPDATE_OPS), batch_norms


@pytest.mark.parametrize('training_network', BATCH_NORM_NETWORKS,
                         indirect=True)
def test_training_collects_moving_average_updates(training_network):
  update_ops, batch_norms = _update_ops_and_batch_norms(training_network)
  # One update of the moving mean and one of the moving variance per layer.
  assert batch_norms
  assert len(update_ops) == 2 * len(batch_norms)


@pytest.mark.parametrize('eval_network', BATCH_NORM_NETWORKS, indirect=True)
def test_eval_collects_no_moving_average_updates(eval_network):
  update_ops, batch_norms = _update_ops_and_batch_norms(eval_network)
  assert batch_norms
  assert not update_ops


DECAYED_WEIGHTS = {
    'lenet': 4,  # conv1, conv2, fc3, fc4
    'cifarnet': 2,  # fc3, fc4: neither the convolutions nor the logits
    'mobilenet_v1': 15,  # Conv2d_0, 13 pointwise, logits; no depthwise
    'mobilenet_v2': 36,  # Conv, 16 expand, 17 project, Conv_1, logits
}


@pytest.mark.parametrize('eval_network', PROJECT_NETWORKS, indirect=True)
def test_weight_decay_regularizes_the_published_set_of_weights(eval_network):
  with eval_network.graph.as_default():
    regularization_losses = tf.losses.get_regularization_losses()
  assert len(regularization_losses) == DECAYED_WEIGHTS[eval_network.name]


@pytest.mark.parametrize('name, kwargs, batch_norm_decay, depthwise_decayed', [
    ('mobilenet_v1', {}, 0.9997, False),
    ('mobilenet_v1', {'regularize_depthwise': True}, 0.9997, True),
    ('mobilenet_v2', {}, 0.997, False),
])
def test_mobilenet_arg_scopes_differ_in_batch_norm_and_depthwise_decay(
    name, kwargs, batch_norm_decay, depthwise_decayed):
  scope = nets_factory.arg_scopes_map[name](weight_decay=0.5, **kwargs)
  batch_norm = scope[arg_scope_func_key(slim.batch_norm)]
  conv = scope[arg_scope_func_key(slim.conv2d)]
  depthwise = scope[arg_scope_func_key(slim.separable_conv2d)]
  assert (batch_norm['decay'], batch_norm['epsilon']) == (
      batch_norm_decay, 0.001)
  assert conv['weights_regularizer'] is not None
  assert (depthwise['weights_regularizer'] is not None) == depthwise_decayed
  assert (depthwise['activation_fn'], depthwise['normalizer_fn']) == (
      tf.nn.relu6, slim.batch_norm)


@pytest.mark.parametrize('eval_network', ['mobilenet_v2'], indirect=True)
def test_mobilenet_v2_has_a_shortcut_where_block_shapes_agree(eval_network):
  shortcuts = [op for op in eval_network.graph.get_operations()
               if op.name.startswith('MobilenetV2/expanded_conv')
               and op.name.endswith('/add')]
  # Stride-1 blocks with as many outputs as inputs: 1 (24 channels) +
  # 2 (32) + 3 (64) + 2 (96) + 2 (160).
  assert len(shortcuts) == 10
  # The first block has an expansion factor of 1: no expansion layer.
  with eval_network.graph.as_default():
    names = [v.op.name for v in tf.global_variables()]
  assert 'MobilenetV2/expanded_conv/expand/weights' not in names
  assert 'MobilenetV2/expanded_conv_1/expand/weights' in names


@pytest.mark.parametrize('name', ['alexnet_v2', 'overfeat', 'vgg_a', 'vgg_16',
                                  'vgg_19'])
def test_features_layers_are_tf_slims_layers_without_the_classifier(name):
  network = getattr(slim_nets, name)
  arg_scope = nets_factory.arg_scopes_map[name]()
  size = network.default_image_size

  def variable_shapes(num_classes):
    with tf.Graph().as_default(), slim.arg_scope(arg_scope):
      network(tf.zeros([1, size, size, 3]), num_classes=num_classes)
      return {v.op.name: v.shape.as_list() for v in tf.global_variables()}

  with_classifier = variable_shapes(1000)
  classifier = {name + '/fc8/weights', name + '/fc8/biases'}
  assert classifier <= set(with_classifier)
  assert variable_shapes(0) == {
      variable: shape for variable, shape in with_classifier.items()
      if variable not in classifier}


@pytest.mark.parametrize('name', PROJECT_NETWORKS)
def test_one_deploy_step_on_two_cpu_clones_lowers_the_loss(graph, name):
  tf.set_random_seed(0)
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  network_fn = nets_factory.get_network_fn(name, NUM_CLASSES, is_training=True)
  # A tiny batch, the same at every step; the mobilenets at a small size.
  size = min(network_fn.default_image_size, 32)
  channels = _channels(name)
  rng = np.random.RandomState(0)
  images = tf.constant(rng.uniform(-1, 1, [4, size, size, channels]),
                       tf.float32)
  labels = tf.one_hot([0, 1, 2, 3], NUM_CLASSES)

  def model_fn(images, labels):
    logits, _ = network_fn(images, dropout_keep_prob=1.0)
    tf.losses.softmax_cross_entropy(labels, logits)

  # Adam's steps are small whatever the gradients' scale: at initialization,
  # batch norm over 4 small images gives the MobileNets gradients large
  # enough for a plain gradient-descent step to overshoot.
  model = model_deploy.deploy(config, model_fn, args=[images, labels],
                              optimizer=tf.train.AdamOptimizer(1e-4))
  assert len(model.clones) == 2
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss_before = sess.run(model.total_loss)
    sess.run(model.train_op)
    loss_after = sess.run(model.total_loss)
  assert loss_after < loss_before
