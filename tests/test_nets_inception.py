"""Inception v4 and Inception-ResNet v2 train with deploy() on CPU clones,
and Inception-ResNet v2 fine-tunes from a 1001-class checkpoint.

Their graphs are slow to build (tens of seconds each on this machine, the
gradients as much again), so each network trains in one test, with
deploy()'s float16 and gradient accumulation (and Inception v4 with sync
batch norm), at the smallest side it builds at (107, where the auxiliary
classifier's 5x5 pool still fits), with 2 images per clone, for one
update. Variable names, shapes and counts at the default size are in
tests/test_nets.py. Their arg scopes are tested on single layers.
"""

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from nets import nets_factory
from tests import adam_update
from tests import test_nets
from tf2_compat.slim_compat import slim, tf
from training import fine_tune
from training.errors import UsageError

NETWORKS = ('inception_v4', 'inception_resnet_v2')
SCOPES = {'inception_v4': 'InceptionV4',
          'inception_resnet_v2': 'InceptionResnetV2'}
NUM_CLASSES = 5
IMAGE_SIZE = 107

# Tensor equality off while they build (tests/conftest.py).
pytestmark = pytest.mark.usefixtures('identity_equality_for_tensors')



def _layers_in_arg_scope(arg_scope):
  """A 3x3 convolution 64 -> 64 channels and a fully connected layer to 10
  built in `arg_scope` (training). Returns the variables by name, the
  convolution's output and the regularization losses by the name slim
  gives them ('conv/kernel', 'fc/bias', ...)."""
  with slim.arg_scope(arg_scope):
    conv = slim.conv2d(tf.zeros([2, 8, 8, 64]), 64, [3, 3], scope='conv')
    slim.fully_connected(slim.flatten(conv), 10, activation_fn=None,
                         scope='fc')
  variables = {v.op.name: v for v in tf.global_variables()}
  losses = {loss.op.name.split('/Regularizer/')[0]: loss
            for loss in tf.losses.get_regularization_losses()}
  return variables, conv, losses


# Upstream's defaults: Inception v4 has the variance-scaling (He) initializer
# of the other Inceptions and decays weights only; Inception-ResNet v2 keeps
# conv2d's Glorot uniform one and decays the biases too. Neither has
# batch norm's gamma. Standard deviations of 3x3x64 -> 64 kernels: sqrt(2 /
# fan_in) and sqrt(2 / (fan_in + fan_out)), fan_in = fan_out = 576.
ARG_SCOPES = {
    'inception_v4': (np.sqrt(2 / 576), ['conv/kernel', 'fc/kernel']),
    'inception_resnet_v2': (np.sqrt(2 / 1152), ['conv/kernel', 'fc/bias',
                                                'fc/kernel']),
}


@pytest.mark.parametrize('name', NETWORKS)
def test_arg_scope_has_upstreams_batch_norm_relu_initializer_and_decay(
    graph, name):
  stddev, decayed = ARG_SCOPES[name]
  variables, conv, losses = _layers_in_arg_scope(
      nets_factory.arg_scopes_map[name]())
  assert sorted(variables) == [
      'conv/BatchNorm/beta', 'conv/BatchNorm/moving_mean',
      'conv/BatchNorm/moving_variance', 'conv/weights', 'fc/biases',
      'fc/weights']
  assert conv.op.type == 'Relu'
  batch_norm, = [op for op in graph.get_operations()
                 if op.type.startswith('FusedBatchNorm')]
  assert batch_norm.get_attr('epsilon') == pytest.approx(0.001)
  assert sorted(losses) == decayed
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    weights, loss = sess.run([variables['conv/weights'],
                              losses['conv/kernel']])
  assert np.std(weights) == pytest.approx(stddev, rel=0.05)
  # slim's l2_regularizer: weight_decay * sum(w ** 2) / 2.
  assert loss == pytest.approx(0.00004 * np.sum(weights ** 2) / 2, rel=1e-4)


@pytest.mark.parametrize('name', NETWORKS)
def test_arg_scope_gives_batch_norm_a_gamma_on_request(graph, name):
  variables, _, _ = _layers_in_arg_scope(
      nets_factory.arg_scopes_map[name](batch_norm_scale=True))
  assert variables['conv/BatchNorm/gamma'].shape.as_list() == [64]


def test_inception_v4_arg_scope_without_batch_norm_gives_biases(graph):
  variables, _, _ = _layers_in_arg_scope(
      nets_factory.arg_scopes_map['inception_v4'](use_batch_norm=False))
  assert sorted(variables) == ['conv/biases', 'conv/weights', 'fc/biases',
                               'fc/weights']


def _deploy(name, sync_batch_norm):
  """`name` for NUM_CLASSES classes on 2 CPU clones, 2 images each, with
  the training script's losses (the auxiliary logits' weighted 0.4) and
  Adam; layers in float16 (loss scale 128), gradients accumulated over
  2 micro-steps, batch norm synced over the clones if asked. Returns the
  DeployedModel and the session config of its devices, Grappler's
  rewrites off (adam_update.without_graph_rewrites)."""
  tf.set_random_seed(0)
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True)
  network_fn = nets_factory.get_network_fn(name, NUM_CLASSES,
                                           is_training=True)
  assert network_fn.min_image_size == IMAGE_SIZE
  rng = np.random.RandomState(0)
  images = tf.constant(rng.uniform(-1, 1, [4, IMAGE_SIZE, IMAGE_SIZE, 3]),
                       tf.float32)
  labels = tf.one_hot([0, 1, 2, 3], NUM_CLASSES)

  def model_fn(images, labels):
    logits, end_points = network_fn(tf.cast(images, tf.float16),
                                    dropout_keep_prob=1.0)
    tf.losses.softmax_cross_entropy(
        labels, tf.cast(end_points['AuxLogits'], tf.float32), weights=0.4,
        scope='aux_loss')
    tf.losses.softmax_cross_entropy(labels, tf.cast(logits, tf.float32))
    return end_points

  model = model_deploy.deploy(
      config, model_fn, args=[images, labels],
      optimizer=tf.train.AdamOptimizer(1e-4), precision='mixed_float16',
      sync_batch_norm=sync_batch_norm,
      update=update.UpdateOptions(
          loss_scale=precision.LossScale(initial_scale=128.0),
          accumulation_steps=2))
  return model, adam_update.without_graph_rewrites(
      model_deploy.session_config(config))


def _trainable_at_image_size(name):
  """The count of tests/test_nets.py for NUM_CLASSES classes, with the
  auxiliary 768-channel convolution 1x1 instead of 5x5: it covers the
  grid its pool leaves, 1x1 at this image size."""
  if name == 'inception_v4':
    count = test_nets._inception_v4_params(NUM_CLASSES)
  else:
    count = (test_nets._INCEPTION_RESNET_V2_1001 -
             test_nets._classifier(1536, 1001) -
             test_nets._classifier(768, 1001) +
             test_nets._classifier(1536, NUM_CLASSES) +
             test_nets._classifier(768, NUM_CLASSES))
  return count - (5 * 5 - 1) * 128 * 768


# Sync batch norm adds graph building to every batch norm (its moments
# all-reduced, and their gradients): Inception v4 trains with it, not
# Inception-ResNet v2 and its 200 layers as well.
@pytest.mark.slow
@pytest.mark.parametrize('name, sync_batch_norm', [
    ('inception_v4', True), ('inception_resnet_v2', False)])
def test_two_cpu_clones_train_in_float16_with_accumulation(
    graph, name, sync_batch_norm):
  model, session_config = _deploy(name, sync_batch_norm)
  scope = SCOPES[name]
  # The clones share one set of float32 variables.
  assert {v.dtype.base_dtype for v in tf.global_variables()
          if v.op.name.startswith(scope + '/')} == {tf.float32}
  trainable = {v.op.name: v.shape.as_list() for v in tf.trainable_variables()}
  assert sum(np.prod(shape) for shape in trainable.values()) == (
      _trainable_at_image_size(name))
  assert all(variable.startswith(scope + '/') for variable in trainable)
  aux_conv = 'Conv2d_2a' if name == 'inception_v4' else 'Conv2d_2a_5x5'
  assert trainable['%s/AuxLogits/%s/weights' % (scope, aux_conv)] == [
      1, 1, 128, 768]
  first_conv = graph.get_operation_by_name(
      'clone_0/%s/Conv2d_1a_3x3/Conv2D' % scope)
  assert first_conv.get_attr('T') == tf.float16
  # Each clone has its loss on the logits and on the auxiliary logits.
  assert sorted(loss.op.name for loss in tf.losses.get_losses()) == [
      'clone_0/aux_loss/value', 'clone_0/softmax_cross_entropy_loss/value',
      'clone_1/aux_loss/value', 'clone_1/softmax_cross_entropy_loss/value']
  moving_mean, = [v for v in tf.global_variables()
                  if v.op.name == scope + '/Conv2d_1a_3x3/BatchNorm/'
                  'moving_mean']
  global_step = tf.train.get_global_step()
  variables = tf.trainable_variables()
  with tf.Session(config=session_config) as sess:
    # The gradient accumulators are local variables.
    sess.run([tf.global_variables_initializer(),
              tf.local_variables_initializer()])
    # Only the train op runs the network (it returns the loss, computed
    # before its update): each other fetch of this large graph would
    # prepare it again, tens of seconds. Reading variables is cheap.
    step_before, before = sess.run([global_step, variables])
    # Two micro-steps: one update, of finite gradients at this scale.
    losses = [sess.run(model.train_op) for _ in range(2)]
    step, mean, after, first_moments = sess.run(
        [global_step, moving_mean, variables,
         adam_update.first_moments(variables)])
  assert np.all(np.isfinite(losses))
  assert step_before == 0
  assert step == 1
  assert np.all(np.isfinite(mean)) and np.any(mean != 0)
  # One update, not two: each weight moved by the learning rate at most.
  adam_update.check_one_update([v.op.name for v in variables], before,
                               after, first_moments, 1e-4)


def _published_values(variables, checkpoint):
  """Writes to `checkpoint` the variables of `variables`' network as a
  1001-class checkpoint has them: same names and shapes, but 1001 classes
  in the classifiers (tests/test_nets.py checks those against a 1001-class
  build); random values in [0.5, 1.5], which no initializer gives, the
  moving statistics too. Returns them by name.

  Written by SaveV2 from fed values: a second build of the network, at
  1001 classes, would take as long as the one the test needs."""
  rng = np.random.RandomState(0)
  saved = {}
  for variable in variables:
    shape = variable.shape.as_list()
    if '/Logits/Logits/' in variable.op.name:
      shape[-1] = 1001
    saved[variable.op.name] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
  names = sorted(saved)
  with tf.Graph().as_default():
    values = [tf.placeholder(tf.float32, saved[name].shape) for name in names]
    save = tf.raw_ops.SaveV2(prefix=checkpoint, tensor_names=names,
                             shape_and_slices=[''] * len(names),
                             tensors=values)
    with tf.Session() as sess:
      sess.run(save, dict(zip(values, (saved[name] for name in names))))
  return saved


@pytest.mark.slow
def test_fine_tuning_inception_resnet_v2_restores_all_but_the_classifiers(
    tmp_path):
  # As upstream's finetune_inception_resnet_v2_on_flowers.sh fine-tunes
  # the published checkpoint to the 5 classes of flowers.
  exclude = fine_tune.split_scopes(
      'InceptionResnetV2/Logits,InceptionResnetV2/AuxLogits')
  checkpoint = str(tmp_path / 'model.ckpt')
  with tf.Graph().as_default():
    nets_factory.get_network_fn('inception_resnet_v2', NUM_CLASSES,
                                is_training=True)(
                                    tf.zeros([1, IMAGE_SIZE, IMAGE_SIZE, 3]))
    saved = _published_values(tf.global_variables(), checkpoint)
    with pytest.raises(UsageError, match=(
        r'variable InceptionResnetV2/(Aux)?Logits/Logits/weights has shape '
        r'\[(768|1536), 5\] in the model but \[(768|1536), 1001\] in '
        r'checkpoint')):
      fine_tune.variables_to_restore(checkpoint, [], False)
    init_fn = fine_tune.restoring_init_fn(fine_tune.FineTuneConfig(
        checkpoint_path=checkpoint, checkpoint=checkpoint,
        checkpoint_exclude_scopes=tuple(exclude)))
    variables = tf.global_variables()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      init_fn(None, sess)
      tuned = dict(zip([v.op.name for v in variables], sess.run(variables)))

  excluded = sorted(name for name in tuned
                    if name.startswith(('InceptionResnetV2/Logits/',
                                        'InceptionResnetV2/AuxLogits/')))
  # The auxiliary head's two convolutions (weights and batch norm's beta,
  # moving mean and variance) and both fully connected layers.
  assert len(excluded) == 2 * 4 + 2 * 2
  assert tuned['InceptionResnetV2/Logits/Logits/weights'].shape == (1536, 5)
  assert tuned['InceptionResnetV2/AuxLogits/Logits/biases'].shape == (5,)
  for name in excluded:
    assert not np.array_equal(tuned[name], saved[name]), name
  restored = sorted(set(tuned) - set(excluded))
  assert restored == sorted(set(saved) - set(excluded))
  # Convolutions with batch norm (weights, beta, moving mean and
  # variance): stem 5, Mixed_5b 7, 10 block35 of 6, Mixed_6a 4, 20 block17
  # of 4, Mixed_7a 7, 10 block8 of 4, Conv2d_7b_1x1, 2 in AuxLogits; 40
  # residual projections and 2 fully connected layers (weights, biases).
  assert len(tuned) == 4 * (5 + 7 + 60 + 4 + 80 + 7 + 40 + 1 + 2) + 2 * 42
  assert len(restored) == len(tuned) - len(excluded)
  for name in restored:
    np.testing.assert_array_equal(tuned[name], saved[name], err_msg=name)
