"""NASNet and PNASNet: drop path and its schedule, the cells, and training
on two CPU clones, plainly and with deploy()'s options.

tests/test_nets.py checks the published networks' variables and counts as
the factory builds them for evaluation, tests/test_min_image_size.py builds
them for training at their smallest sides. The published networks take
minutes to build and train (nasnet_cifar on two clones: 15 minutes on two
busy cores), so small networks of the same code show what the
configurations change and train: a NASNet-A of 3 cells with the CIFAR
configuration on two clones, and a PNASNet-5 of one cell with drop path
under sync batch norm, mixed float16 and gradient accumulation.
"""

import dataclasses

import numpy as np
import pytest

from deployment import model_deploy
from deployment import precision
from deployment import update
from nets import nasnet
from nets import nasnet_cells
from nets import nets_factory
from nets import pnasnet
from tests import adam_update
from tf2_compat.slim_compat import slim, tf
import train_image_classifier

pytestmark = pytest.mark.usefixtures('identity_equality_for_tensors')

SCHEDULE = nasnet_cells.DropPath(final_keep_prob=0.6, total_cells=20,
                                 total_steps=1000)


def _run(fetches, global_step=None, step=0):
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    if global_step is not None:
      global_step.load(step, sess)
    return sess.run(fetches)


# The last of 20 cells (cell_number 19) ends at the final keep probability,
# the tenth (9) at half the drop, the first (0) at a twentieth of it.
@pytest.mark.parametrize('cell_number, step, keep_prob', [
    (19, 0, 1.0), (19, 250, 0.9), (19, 500, 0.8), (19, 1000, 0.6),
    (19, 5000, 0.6),
    (9, 0, 1.0), (9, 500, 0.9), (9, 1000, 0.8),
    (0, 500, 0.99), (0, 1000, 0.98),
])
def test_keep_prob_falls_linearly_with_the_step_more_for_deeper_cells(
    graph, cell_number, step, keep_prob):
  value = _run(SCHEDULE.keep_prob(cell_number, tf.constant(step, tf.int64)))
  assert value == pytest.approx(keep_prob, abs=1e-6)


def test_drop_path_zeroes_whole_examples_and_scales_up_the_others(graph):
  global_step = tf.train.get_or_create_global_step()
  dropped = SCHEDULE.apply(tf.ones([4000, 2, 2, 3]), cell_number=19)
  values = _run(dropped, global_step, step=1000).reshape(4000, -1)
  kept = values[:, 0] > 0
  np.testing.assert_allclose(values[kept], 1 / 0.6, rtol=1e-6)
  assert np.all(values[~kept] == 0)
  # 4000 draws of probability 0.6: a standard deviation of 0.008.
  assert kept.mean() == pytest.approx(0.6, abs=0.035)


def test_drop_path_keeps_the_dtype_of_float16_layers(graph):
  tf.train.get_or_create_global_step()
  assert SCHEDULE.apply(tf.ones([2, 1, 1, 4], tf.float16), 3).dtype == (
      tf.float16)


@pytest.mark.parametrize('final_keep_prob, total_steps, message', [
    (0.0, 1000, r'drop_path_keep_prob must be in \(0, 1\], got 0.0'),
    (1.5, 1000, r'drop_path_keep_prob must be in \(0, 1\], got 1.5'),
    (0.6, 0, 'total_training_steps must be >= 1, got 0'),
])
def test_drop_path_refuses_impossible_values(final_keep_prob, total_steps,
                                             message):
  with pytest.raises(ValueError, match=message):
    nasnet_cells.DropPath(final_keep_prob, 20, total_steps)


def _cell_variables(structure, filters, stride, previous_side=16):
  """Builds one cell on a [2, 8, 8, 24] input whose cell two back is
  [2, previous_side, previous_side, 12]; returns its output and
  {variable: shape}."""
  net = tf.zeros([2, 8, 8, 24])
  previous = tf.zeros([2, previous_side, previous_side, 12])
  with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
    output = nasnet_cells.cell(net, previous, structure, filters, stride,
                               scope='cell')
  return output, {v.op.name: v.shape.as_list()
                  for v in tf.trainable_variables()}


@pytest.mark.parametrize('structure, stride, output_shape', [
    # Hidden states 3 to 6 of the reduction cell; the five combinations of
    # PNASNet-5 (the normal cell: below).
    (nasnet_cells.NASNET_A_REDUCTION, 2, [2, 4, 4, 40]),
    (nasnet_cells.PNASNET_5, 1, [2, 8, 8, 50]),
    (nasnet_cells.PNASNET_5, 2, [2, 4, 4, 50]),
])
def test_a_cell_concatenates_the_hidden_states_it_does_not_leave_out(
    graph, structure, stride, output_shape):
  output, _ = _cell_variables(structure, 10, stride)
  assert output.shape.as_list() == output_shape


def test_normal_cell_has_the_parameters_and_output_of_its_table(graph):
  output, variables = _cell_variables(nasnet_cells.NASNET_A_NORMAL, 10, 1)
  # Hidden states 1 to 6.
  assert output.shape.as_list() == [2, 8, 8, 60]

  def separable(kernel, depth_in, filters):  # Two layers, batch norm each.
    return (kernel * kernel * depth_in + depth_in * filters + 2 * filters +
            kernel * kernel * filters + filters * filters + 2 * filters)

  # Hand count from Figure 4 of Zoph et al.: the cell two back reduced
  # (two 1x1 convolutions of 5 filters on even and odd pixels, batch norm),
  # the 1x1 convolution of the input, separable 5x5 on states 0 and 1,
  # separable 3x3 on states 1, 1 and 0; poolings and identities of 10
  # channels have no parameter.
  expected = (2 * 12 * 5 + 2 * 10 + 24 * 10 + 2 * 10 +
              2 * separable(5, 10, 10) + 3 * separable(3, 10, 10))
  assert sum(np.prod(shape) for shape in variables.values()) == expected
  assert variables['cell/path1_conv/weights'] == [1, 1, 12, 5]
  assert variables['cell/comb_iter_0/left/separable_5x5_2/'
                   'depthwise_weights'] == [5, 5, 10, 1]
  assert not [name for name in variables if 'comb_iter_3' in name]


def test_factorized_reduction_gives_an_odd_filter_to_the_odd_pixels(graph):
  # PNASNet mobile's second stem cell has 54 / 2 = 27 filters.
  _, variables = _cell_variables(nasnet_cells.PNASNET_5, 27, 2)
  assert variables['cell/path1_conv/weights'] == [1, 1, 12, 13]
  assert variables['cell/path2_conv/weights'] == [1, 1, 12, 14]


def test_the_networks_that_drop_paths_say_their_default_schedule():
  steps = {name: getattr(nets_factory.get_network_fn(name, 10),
                         'total_training_steps', None)
           for name in ('nasnet_cifar', 'nasnet_mobile', 'nasnet_large',
                        'pnasnet_mobile', 'pnasnet_large')}
  # The mobile networks trained without drop path.
  assert steps == {'nasnet_cifar': 937500, 'nasnet_mobile': None,
                   'nasnet_large': 250000, 'pnasnet_mobile': None,
                   'pnasnet_large': 250000}


def test_the_auxiliary_head_reads_the_cell_before_the_second_reduction():
  # Reductions before cells 6 and 12 of 18, 4 and 8 of 12, 3 and 6 of 9.
  heads = {name: config.aux_head_index() for name, config in (
      ('nasnet_cifar', nasnet.CIFAR_CONFIG),
      ('nasnet_mobile', nasnet.MOBILE_CONFIG),
      ('nasnet_large', nasnet.LARGE_CONFIG),
      ('pnasnet_mobile', pnasnet.MOBILE_CONFIG),
      ('pnasnet_large', pnasnet.LARGE_CONFIG))}
  assert heads == {'nasnet_cifar': 11, 'nasnet_mobile': 7, 'nasnet_large': 11,
                   'pnasnet_mobile': 5, 'pnasnet_large': 7}


def test_drop_path_creates_a_missing_global_step_in_its_scope(graph):
  # As upstream's: in a graph without one, the networks' variables include
  # the global step of their first operation that drops paths, e.g.
  # cell_0/comb_iter_0/left/global_step for nasnet_cifar.
  with tf.variable_scope('cell_0/comb_iter_0/left'):
    SCHEDULE.apply(tf.ones([2, 1, 1, 4]), cell_number=0)
  assert [v.op.name for v in tf.global_variables()] == [
      'cell_0/comb_iter_0/left/global_step']
  assert tf.train.get_global_step() is tf.global_variables()[0]


def test_drop_path_uses_the_global_step_there_is(graph):
  global_step = tf.train.get_or_create_global_step()
  SCHEDULE.apply(tf.ones([2, 1, 1, 4]), cell_number=3)
  assert tf.global_variables() == [global_step]


# Three cells of 8 filters, with a reduction cell before the second and the
# third: the cells are cell_0, reduction_cell_0, cell_1, reduction_cell_1,
# cell_2 (cell numbers 0 to 4 of 5), the auxiliary head on cell_1.
SMALL_CIFAR = dataclasses.replace(nasnet.CIFAR_CONFIG, num_cells=3,
                                  num_conv_filters=8)
NUM_CLONES = 2


def _small_nasnet(images, is_training, config=SMALL_CIFAR, **kwargs):
  with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
    return nasnet.nasnet(images, config, 10, is_training, **kwargs)


def _deploy(network_fn, image_size, **deploy_options):
  """Builds network_fn on 2 CPU clones, each taking the same 4 images, with
  its losses as the training script adds them (the auxiliary head's at
  0.4), and Adam."""
  tf.set_random_seed(0)
  rng = np.random.RandomState(0)
  images = tf.constant(rng.uniform(-1, 1, [4, image_size, image_size, 3]),
                       tf.float32)
  labels = tf.constant([0, 1, 2, 3])
  dtype = precision.compute_dtype(deploy_options.get('precision', 'float32'))

  def model_fn(images, labels):
    logits, end_points = network_fn(tf.cast(images, dtype))
    train_image_classifier.add_losses(logits, end_points, labels, 10,
                                      label_smoothing=0.0)
    return end_points

  config = model_deploy.DeploymentConfig(
      num_clones=NUM_CLONES, clone_on_cpu=True,
      separate_cpu_devices=deploy_options.get('sync_batch_norm', False))
  model = model_deploy.deploy(config, model_fn, args=[images, labels],
                              optimizer=tf.train.AdamOptimizer(1e-4),
                              **deploy_options)
  return config, model


@pytest.fixture(scope='module')
def small_nasnet_on_two_clones():
  """(graph, model): SMALL_CIFAR in training on 2 clones, drop path over
  100 steps."""
  with tf.Graph().as_default() as graph:
    _, model = _deploy(
        lambda images: _small_nasnet(images, True, total_training_steps=100),
        32)
  return graph, model


@pytest.fixture(scope='module')
def small_nasnet_in_evaluation():
  """(graph, end_points): SMALL_CIFAR in evaluation, with
  skip_reduction_layer_input (as nasnet_large)."""
  with tf.Graph().as_default() as graph:
    _, end_points = _small_nasnet(
        tf.zeros([2, 32, 32, 3]), False,
        dataclasses.replace(SMALL_CIFAR, skip_reduction_layer_input=True))
  return graph, end_points


def _keep_probs(graph, prefix=''):
  return [op for op in graph.get_operations()
          if op.name.startswith(prefix) and
          op.name.endswith('/drop_path/keep_prob')]


def _model_variable_shapes(graph):
  with graph.as_default():
    return {v.op.name: v.shape.as_list() for v in slim.get_model_variables()}


@pytest.mark.slow
def test_nasnet_on_two_clones_takes_adams_steps(small_nasnet_on_two_clones):
  graph, model = small_nasnet_on_two_clones
  with graph.as_default(), tf.Session() as sess:
    variables = tf.trainable_variables()
    first_moments = adam_update.first_moments(variables)
    sess.run(tf.global_variables_initializer())
    before = sess.run(variables)
    # At step 0 every path is kept: the first update is of the whole
    # network. The train op returns the loss before its update.
    losses = [sess.run(model.train_op)]
    after, moments = sess.run([variables, first_moments])
    for _ in range(2):
      losses.append(sess.run(model.train_op))
    assert sess.run(tf.train.get_global_step()) == 3
  assert np.all(np.isfinite(losses))
  # Adam's first update, not a lower loss: whether a few steps lower it
  # depends on the CPU's kernels (see tests/adam_update.py).
  adam_update.check_one_update(
      [v.op.name for v in variables], before, after, moments, 1e-4)


@pytest.mark.slow
def test_both_clones_train_the_auxiliary_head(small_nasnet_on_two_clones):
  graph, model = small_nasnet_on_two_clones
  for clone in model.clones:
    assert clone.outputs['AuxLogits'].shape.as_list() == [4, 10]
  with graph.as_default():
    losses = sorted(loss.op.name for loss in tf.losses.get_losses())
  assert losses == ['clone_%d/%s/value' % (clone, loss)
                    for clone in range(NUM_CLONES)
                    for loss in ('aux_loss', 'softmax_cross_entropy_loss')]
  shapes = _model_variable_shapes(graph)
  # cell_1: 6 x 16 channels at 16x16, pooled 5x5 with stride 3 to 4x4.
  assert shapes['aux_1/aux_logits/proj/weights'] == [1, 1, 96, 128]
  assert shapes['aux_1/aux_logits/Conv/weights'] == [4, 4, 128, 768]
  assert shapes['aux_1/aux_logits/FC/weights'] == [768, 10]
  # Hand count of the head: 1x1 convolution to 128, batch norm, the 4x4
  # convolution to 768, batch norm, fully connected with biases.
  with graph.as_default():
    head = [v for v in tf.trainable_variables()
            if v.op.name.startswith('aux_1/')]
  assert sum(v.shape.num_elements() for v in head) == (
      96 * 128 + 2 * 128 + 4 * 4 * 128 * 768 + 2 * 768 + 768 * 10 + 10)


@pytest.mark.slow
def test_total_training_steps_is_the_length_of_the_networks_schedule(
    small_nasnet_on_two_clones):
  graph, _ = small_nasnet_on_two_clones
  # The last of the 5 cells ends at drop_path_keep_prob, 0.6; the first
  # drops a fifth as much; both clones alike.
  keep_probs = {(scope, clone): graph.get_tensor_by_name(
      'clone_%d/%s/comb_iter_0/left/drop_path/keep_prob:0' % (clone, scope))
                for scope in ('cell_0', 'cell_2')
                for clone in range(NUM_CLONES)}
  expected = {0: (1.0, 1.0), 50: (0.96, 0.8), 100: (0.92, 0.6),
              150: (0.92, 0.6)}
  with graph.as_default(), tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for step, (first, last) in expected.items():
      tf.train.get_global_step().load(step, sess)
      values = sess.run(keep_probs)
      for (scope, _), value in values.items():
        assert value == pytest.approx(
            first if scope == 'cell_0' else last, abs=1e-6), (scope, step)


@pytest.mark.slow
def test_evaluation_builds_no_drop_path_and_no_auxiliary_head(
    small_nasnet_on_two_clones, small_nasnet_in_evaluation):
  trained_graph, _ = small_nasnet_on_two_clones
  graph, end_points = small_nasnet_in_evaluation
  assert 'AuxLogits' not in end_points
  assert not _keep_probs(graph)
  # Training drops the paths of every operation but the identities: 8 in
  # each of the 3 normal cells, 9 in each of the 2 reduction cells.
  assert len(_keep_probs(trained_graph, 'clone_1/')) == 3 * 8 + 2 * 9
  in_training = _model_variable_shapes(trained_graph)
  assert sorted(set(in_training) - set(_model_variable_shapes(graph))) == (
      sorted(name for name in in_training if name.startswith('aux_1/')))


@pytest.mark.slow
def test_skip_reduction_layer_input_says_what_follows_a_reduction_reads(
    small_nasnet_on_two_clones, small_nasnet_in_evaluation):
  # cell_1, after reduction_cell_0, reduces its second input to 16 filters
  # at half the side with two convolutions of 8: from the output of cell_0
  # (6 x 8 channels), or with skip_reduction_layer_input from the stem's
  # (3 x 8).
  without_skip = _model_variable_shapes(small_nasnet_on_two_clones[0])
  with_skip = _model_variable_shapes(small_nasnet_in_evaluation[0])
  assert without_skip['cell_1/path1_conv/weights'] == [1, 1, 48, 8]
  assert with_skip['cell_1/path1_conv/weights'] == [1, 1, 24, 8]


@pytest.mark.parametrize('change', [{'imagenet_stem': False},
                                    {'skip_reduction_layer_input': False}])
def test_pnasnet_refuses_the_configurations_it_was_not_published_with(
    graph, change):
  config = dataclasses.replace(pnasnet.MOBILE_CONFIG, **change)
  with pytest.raises(ValueError, match=(
      'PNASNet is built with the ImageNet stem and '
      'skip_reduction_layer_input, as both published PNASNets; got '
      'imagenet_stem=%s, skip_reduction_layer_input=%s'
      % (config.imagenet_stem, config.skip_reduction_layer_input))):
    pnasnet.pnasnet(tf.zeros([1, 224, 224, 3]), config, 10)
  assert not tf.global_variables()


@pytest.mark.slow
def test_pnasnet_trains_with_sync_batch_norm_float16_and_accumulation():
  # PNASNet-5: the stem and one cell (at stride 2), of 16 filters, with drop
  # path and no auxiliary head. Each option adds to the graph (57,000 ops
  # with 3 cells, against 21,000 without options).
  config = dataclasses.replace(pnasnet.MOBILE_CONFIG, num_cells=1,
                               num_conv_filters=16, drop_path_keep_prob=0.6,
                               use_aux_head=False)

  def network_fn(images):
    with slim.arg_scope(pnasnet.pnasnet_mobile_arg_scope()):
      return pnasnet.pnasnet(images, config, 10, is_training=True)

  with tf.Graph().as_default() as graph:
    deployment, model = _deploy(network_fn, 32, sync_batch_norm=True,
                                precision='mixed_float16',
                                update=update.UpdateOptions(
                                    accumulation_steps=2))
    variables = {v.op.name: v.dtype.base_dtype for v in tf.global_variables()}
    accumulators = [v.op.name for v in tf.local_variables()
                    if v.op.name.endswith('_accumulator')]
    trainable = tf.trainable_variables()
    with tf.Session(config=model_deploy.session_config(deployment)) as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(tf.local_variables_initializer())
      losses = [sess.run(model.train_op) for _ in range(4)]
  assert np.all(np.isfinite(losses))
  assert set(variables[v.op.name] for v in trainable) == {tf.float32}
  assert {'loss_scale/scale', 'loss_scale/finite_steps'} <= set(variables)
  assert len(accumulators) == len(trainable)
  conv = graph.get_operation_by_name('clone_1/cell_0/1x1/Conv2D')
  assert conv.get_attr('T') == tf.float16
  # Each clone all-reduces the moments of each batch norm, and their
  # gradients.
  collectives = {op.name for op in graph.get_operations()
                 if op.type == 'CollectiveReduceV2'}
  batch_norms = [name[:-len('/moving_mean')] for name in variables
                 if name.endswith('/moving_mean')]
  assert {'clone_%d/%s/sync_moments/CollectiveReduceV2' % (clone, name)
          for clone in range(NUM_CLONES) for name in batch_norms} <= collectives
  assert len(collectives) == 2 * NUM_CLONES * len(batch_norms)
