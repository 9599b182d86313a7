"""MobileNet v3 and EdgeTPU trained on two CPU clones: v3 small plainly,
v3 small minimalistic with sync batch norm in mixed float16, EdgeTPU 0.75
with gradient accumulation. Each training graph also shows the layers of
upstream's definition: squeeze-and-excite, hard-swish, `Conv_2`, fused
blocks, shortcuts.

Names, shapes and parameter counts of every variant at 224x224 are checked
against independent figures in tests/test_nets.py; here they are pinned
and held to the figures published with the checkpoints.
"""

import collections
import re

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from nets import mobilenet_v3
from nets import nets_factory
from tests import adam_update
from tests import test_nets
from tf2_compat.slim_compat import slim, tf

NUM_CLASSES = 10
IMAGE_SIZE = 32

# Trainable parameters at 1001 classes, as built: tests/test_nets.py
# checks the built graphs against its derived figures, which these pin.
TRAINABLE_PARAMS = {
    'mobilenet_v3_small': 2543881,
    'mobilenet_v3_large': 5484313,
    'mobilenet_v3_small_minimalistic': 2045761,
    'mobilenet_v3_large_minimalistic': 3925569,
    'mobilenet_edgetpu': 4092713,
    'mobilenet_edgetpu_075': 2989441,
}

# "Params (M)" of Slim's MobileNet README, which truncates to one decimal
# (4.09 M is listed as 4.0). For v3 small the README says 2.9; its paper
# (Howard et al. 2019, Table 3) says 2.5, which the layers give.
PUBLISHED_MILLIONS = {
    'mobilenet_v3_small': 2.5,
    'mobilenet_v3_large': 5.4,
    'mobilenet_v3_small_minimalistic': 2.0,
    'mobilenet_v3_large_minimalistic': 3.9,
    'mobilenet_edgetpu': 4.0,
    'mobilenet_edgetpu_075': 2.9,
}

# Global variables that upstream's definition (research/slim/nets/mobilenet/
# mobilenet_v3.py, built through its nets_factory) creates: weights,
# biases, batch norm's beta, gamma and moving statistics.
UPSTREAM_VARIABLES = {
    'mobilenet_v3_small': 210,
    'mobilenet_v3_small_minimalistic': 174,
    'mobilenet_edgetpu_075': 292,
}

Trained = collections.namedtuple(
    'Trained', ['name', 'graph', 'losses', 'global_steps', 'logits',
                'first_update'])

# The trainable variables' names, values before the first update, after
# it, and Adam's first moments after it.
FirstUpdate = collections.namedtuple(
    'FirstUpdate', ['names', 'before', 'after', 'first_moments'])

LEARNING_RATE = 1e-3


def _train(name, runs, initial_loss_scale=None, **options):
  """Deploys `name` on two CPU clones and runs its train op `runs` times.

  Every clone sees the same 4 images of 32x32. The loss of each run is the
  one the train op returns, of the weights before its update: no other
  fetch runs the network (each new one would prepare the graph again).

  Args:
    name: a network of nets_factory.
    runs: how many times to run the train op.
    initial_loss_scale: with precision='mixed_float16', where the dynamic
      loss scale starts.
    **options: deploy()'s options (sync_batch_norm, precision, ...).

  Returns:
    A Trained tuple; `logits` is the first clone's output, `first_update`
    the FirstUpdate of the run that took the global step to 1.
  """
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True,
      separate_cpu_devices=options.get('sync_batch_norm', False))
  dtype = precision.compute_dtype(options.get('precision', 'float32'))
  with tf.Graph().as_default() as graph:
    tf.set_random_seed(0)
    network_fn = nets_factory.get_network_fn(name, NUM_CLASSES,
                                             is_training=True)
    rng = np.random.RandomState(0)
    images = tf.constant(rng.uniform(-1, 1, [4, IMAGE_SIZE, IMAGE_SIZE, 3]),
                         tf.float32)
    labels = tf.one_hot([0, 1, 2, 3], NUM_CLASSES)
    if initial_loss_scale:
      options['update'] = update.UpdateOptions(
          loss_scale=precision.LossScale(initial_loss_scale))

    def model_fn(images, labels):
      logits, _ = network_fn(tf.cast(images, dtype), dropout_keep_prob=1.0)
      tf.losses.softmax_cross_entropy(labels, tf.cast(logits, tf.float32))
      return logits

    # Adam: at initialization, batch norm over 4 small images gives
    # gradients large enough for plain gradient descent to overshoot.
    model = model_deploy.deploy(config, model_fn, args=[images, labels],
                                optimizer=tf.train.AdamOptimizer(
                                    LEARNING_RATE),
                                **options)
    global_step = tf.train.get_global_step()
    variables = tf.trainable_variables()
    first_moments = adam_update.first_moments(variables)
    with tf.Session(config=model_deploy.session_config(config)) as sess:
      sess.run([tf.global_variables_initializer(),
                tf.local_variables_initializer()])
      before = sess.run(variables)
      losses, global_steps, first_update = [], [], None
      for _ in range(runs):
        losses.append(sess.run(model.train_op))
        global_steps.append(int(sess.run(global_step)))
        if first_update is None and global_steps[-1] == 1:
          first_update = FirstUpdate([v.op.name for v in variables], before,
                                     *sess.run([variables, first_moments]))
  return Trained(name, graph, losses, global_steps, model.clones[0].outputs,
                 first_update)


@pytest.fixture(scope='module')
def small():
  return _train('mobilenet_v3_small', 3)


@pytest.fixture(scope='module')
def minimalistic_synced_in_float16():
  # Batch norm over 4 images of 1x1 features in the last layers gives the
  # freshly initialised network gradients that overflow float16 at the
  # default loss scale, 2^15, and at every halving down to 2^7 (seen
  # while writing this test): the first nine steps would be skipped.
  return _train('mobilenet_v3_small_minimalistic', 3,
                initial_loss_scale=2.0 ** 5, precision='mixed_float16',
                sync_batch_norm=True)


@pytest.fixture(scope='module')
def edgetpu_accumulating():
  return _train('mobilenet_edgetpu_075', 4,
                update=update.UpdateOptions(accumulation_steps=2))


def _model_variables(trained):
  with trained.graph.as_default():
    return {v.op.name: v for v in slim.get_model_variables()}


def _forward_ops(trained):
  """The ops of the first clone's network (its gradients left out)."""
  scope, = {name.split('/')[0] for name in _model_variables(trained)}
  return [op for op in trained.graph.get_operations()
          if op.name.startswith('clone_0/%s/' % scope)]


def _blocks_with(trained, pattern):
  """The numbers of the blocks (expanded_conv_N, the first 0) with a
  variable or an op of the first clone whose name ends in `pattern`."""
  names = list(_model_variables(trained)) + [
      op.name for op in _forward_ops(trained)]
  found = set()
  for name in names:
    match = re.search(r'/expanded_conv(_\d+)?/%s$' % pattern, name)
    if match:
      found.add(int(match.group(1)[1:]) if match.group(1) else 0)
  return sorted(found)


def _layer_scopes_with_hard_swish(trained):
  return sorted({op.name.split('/')[2] for op in _forward_ops(trained)
                 if '/hard_swish/' in op.name})


@pytest.mark.parametrize('name', sorted(TRAINABLE_PARAMS))
def test_trainable_parameters_are_pinned(name):
  assert test_nets.SPECS[name].trainable_params == TRAINABLE_PARAMS[name]


@pytest.mark.parametrize('name', sorted(TRAINABLE_PARAMS))
def test_trainable_parameters_match_the_published_millions(name):
  assert TRAINABLE_PARAMS[name] // 100000 / 10 == PUBLISHED_MILLIONS[name]


def test_hard_swish_is_x_times_relu6_of_x_plus_3_over_6(graph):
  x = tf.constant([-5.0, -3.0, -1.5, 0.0, 1.5, 3.0, 5.0])
  with tf.Session() as sess:
    values = sess.run(mobilenet_v3.hard_swish(x))
  np.testing.assert_allclose(
      values, [0.0, 0.0, -0.375, 0.0, 1.125, 3.0, 5.0], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('fixture', [
    'small', 'minimalistic_synced_in_float16', 'edgetpu_accumulating'])
def test_training_takes_adams_steps_and_creates_upstreams_variables(
    request, fixture):
  trained = request.getfixturevalue(fixture)
  assert all(np.isfinite(trained.losses))
  # Adam's first update, not a lower loss: whether a few steps lower it
  # depends on the CPU's kernels (see tests/adam_update.py).
  assert trained.first_update, trained.global_steps
  adam_update.check_one_update(*trained.first_update, LEARNING_RATE)
  assert len(_model_variables(trained)) == UPSTREAM_VARIABLES[trained.name]


@pytest.mark.slow
def test_small_squeezes_and_excites_in_the_blocks_of_the_paper(small):
  # Table 2 of the paper: SE in the first block and from the fourth on.
  expected = [0, 3, 4, 5, 6, 7, 8, 9, 10]
  assert _blocks_with(small, 'squeeze_excite/Conv/biases') == expected
  assert _blocks_with(small, 'squeeze_excite/Conv_1/biases') == expected


@pytest.mark.slow
def test_small_uses_hard_swish_from_the_40_channel_blocks_on(small):
  blocks = ['expanded_conv_%d' % i for i in range(3, 11)]
  assert _layer_scopes_with_hard_swish(small) == sorted(
      ['Conv', 'Conv_1', 'Conv_2'] + blocks)


@pytest.mark.slow
def test_small_conv_2_has_biases_and_no_batch_norm(small):
  conv_2 = sorted(name for name in _model_variables(small)
                  if name.startswith('MobilenetV3/Conv_2/'))
  assert conv_2 == ['MobilenetV3/Conv_2/biases', 'MobilenetV3/Conv_2/weights']


@pytest.mark.slow
def test_float16_layers_on_float32_weights(minimalistic_synced_in_float16):
  trained = minimalistic_synced_in_float16
  assert trained.logits.dtype == tf.float16
  assert {v.dtype.base_dtype
          for v in _model_variables(trained).values()} == {tf.float32}


@pytest.mark.slow
def test_sync_batch_norm_all_reduces_in_every_batch_norm(
    minimalistic_synced_in_float16):
  trained = minimalistic_synced_in_float16
  batch_norms = [name for name in _model_variables(trained)
                 if name.endswith('BatchNorm/moving_mean')]
  all_reduces = [op for op in _forward_ops(trained)
                 if op.type == 'CollectiveReduceV2']
  assert len(all_reduces) == len(batch_norms) == 34


@pytest.mark.slow
def test_minimalistic_has_no_squeeze_excite_hard_swish_or_5x5(
    minimalistic_synced_in_float16):
  variables = _model_variables(minimalistic_synced_in_float16)
  assert not [name for name in variables if 'squeeze_excite' in name]
  assert _layer_scopes_with_hard_swish(minimalistic_synced_in_float16) == []
  assert {tuple(v.shape.as_list()[:2]) for name, v in variables.items()
          if name.endswith('depthwise_weights')} == {(3, 3)}


@pytest.mark.slow
def test_accumulation_updates_every_second_run(edgetpu_accumulating):
  assert edgetpu_accumulating.global_steps == [0, 1, 1, 2]
  # The first run only accumulates: the weights, and so the loss the second
  # run computes before its update, are unchanged.
  assert edgetpu_accumulating.losses[1] == edgetpu_accumulating.losses[0]


@pytest.mark.slow
def test_edgetpu_fuses_the_first_blocks_into_3x3_expansions(
    edgetpu_accumulating):
  trained = edgetpu_accumulating
  variables = _model_variables(trained)
  assert _blocks_with(trained, 'depthwise/depthwise_weights') == list(
      range(9, 22))
  # The first block, 1x, has no expansion at all.
  assert _blocks_with(trained, 'expand/weights') == list(range(1, 22))
  for block in range(1, 9):
    weights = variables['MobilenetEdgeTPU/expanded_conv_%d/expand/weights'
                        % block]
    assert weights.shape.as_list()[:2] == [3, 3]


@pytest.mark.slow
def test_edgetpu_shortcuts_skip_the_block_upstream_marks(
    edgetpu_accumulating):
  # Stride-1 blocks with as many outputs as inputs, but for
  # expanded_conv_13, which upstream builds with residual=False.
  assert _blocks_with(edgetpu_accumulating, 'add') == [
      2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15, 16, 18, 19, 20]


@pytest.mark.slow
def test_edgetpu_075_keeps_1280_channels_in_conv_1(
    edgetpu_accumulating):
  variables = _model_variables(edgetpu_accumulating)
  assert variables['MobilenetEdgeTPU/Conv_1/weights'].shape.as_list() == [
      1, 1, 144, 1280]
