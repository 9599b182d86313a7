"""I3D and S3D-G (nets/i3d.py, nets/s3dg.py): the clip shapes of upstream's
end points, S3D-G's separable and gated layers and where they start,
refused arguments, training on two CPU clones, and the training script's
refusal (it feeds images).

Names, shapes and parameter counts at upstream's 64-frame 224x224 clips
are checked against the inflated Inception v1 count in tests/test_nets.py.
"""

import collections

import numpy as np
import pytest

from deployment import model_deploy
from nets import i3d
from nets import nets_factory
from nets import s3dg
from nets import video_common
from tests import adam_update
from tests import test_min_image_size
from tf2_compat.slim_compat import slim, tf

pytestmark = pytest.mark.usefixtures('identity_equality_for_tensors')

NUM_CLASSES = 10

# [frames, height, width, channels] of upstream's tests' end points for a
# 64-frame 224x224 clip: the first convolution and the 3x3x3 max pool
# halve time, the last 2x2x2 max pool halves it again.
END_POINT_SHAPES = {
    'Conv2d_1a_7x7': [32, 112, 112, 64],
    'MaxPool_2a_3x3': [32, 56, 56, 64],
    'Conv2d_2b_1x1': [32, 56, 56, 64],
    'Conv2d_2c_3x3': [32, 56, 56, 192],
    'MaxPool_3a_3x3': [32, 28, 28, 192],
    'Mixed_3b': [32, 28, 28, 256],
    'Mixed_3c': [32, 28, 28, 480],
    'MaxPool_4a_3x3': [16, 14, 14, 480],
    'Mixed_4b': [16, 14, 14, 512],
    'Mixed_4c': [16, 14, 14, 512],
    'Mixed_4d': [16, 14, 14, 512],
    'Mixed_4e': [16, 14, 14, 528],
    'Mixed_4f': [16, 14, 14, 832],
    'MaxPool_5a_2x2': [8, 7, 7, 832],
    'Mixed_5b': [8, 7, 7, 832],
    'Mixed_5c': [8, 7, 7, 1024],
}

# Global variables of the model: each convolution's weights and batch
# norm's beta and moving statistics (4), the classifier's weights and biases;
# S3D-G's temporal convolutions add weights and biases, its gates weights.
# I3D: 3 convolutions + 6 per module, 9 modules. S3D-G: Conv2d_2c_3x3 and 2
# branches per module separable, 1 + 4 per module gated.
MODEL_VARIABLES = {
    'i3d': 4 * (3 + 6 * 9) + 2,
    's3dg': 4 * (3 + 6 * 9) + 2 * (1 + 2 * 9) + (1 + 4 * 9) + 2,
}


def _variable_shapes():
  return {v.op.name: v.shape.as_list() for v in tf.global_variables()}


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_end_points_have_upstreams_shapes_for_64_frames_of_224(graph, name):
  network_fn = nets_factory.get_network_fn(name, NUM_CLASSES)
  frames = network_fn.default_num_frames
  size = network_fn.default_image_size
  logits, end_points = network_fn(
      tf.placeholder(tf.float32, [3, frames, size, size, 3]))
  for end_point, shape in END_POINT_SHAPES.items():
    assert end_points[end_point].shape.as_list() == [3] + shape, end_point
  assert logits.shape.as_list() == [3, NUM_CLASSES]
  assert len(tf.global_variables()) == MODEL_VARIABLES[name]


def test_spatial_squeeze_false_keeps_the_1x1_logits(graph):
  with slim.arg_scope(i3d.i3d_arg_scope()):
    logits, _ = i3d.i3d(tf.zeros([2, 4, 32, 32, 3]), NUM_CLASSES,
                        spatial_squeeze=False)
  assert logits.shape.as_list() == [2, 1, 1, NUM_CLASSES]


def test_i3d_base_stops_at_its_final_endpoint(graph):
  with slim.arg_scope(i3d.i3d_arg_scope()):
    net, end_points = i3d.i3d_base(tf.zeros([1, 4, 32, 32, 3]),
                                   final_endpoint='Mixed_3b')
  assert list(end_points) == list(video_common.END_POINTS[:6])
  assert net is end_points['Mixed_3b']
  assert not [v for v in tf.global_variables() if 'Mixed_3c' in v.op.name]


def test_s3dg_separable_layers_start_as_their_spatial_convolution(graph):
  with slim.arg_scope(s3dg.s3dg_arg_scope()):
    s3dg.s3dg_base(tf.zeros([1, 4, 32, 32, 3]), final_endpoint='Mixed_3b')
  kernel = tf.global_variables(
      'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/temporal/weights')[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    value = sess.run(kernel)
  expected = np.zeros([3, 1, 1, 128, 128], np.float32)
  expected[1, 0, 0] = np.eye(128)
  np.testing.assert_array_equal(value, expected)


def test_s3dg_temporal_convolutions_and_gating_start_where_asked(graph):
  # A "bottom-heavy" S3D: 2-D below Mixed_4b, gated from Mixed_5b on.
  with slim.arg_scope(s3dg.s3dg_arg_scope()):
    s3dg.s3dg(tf.zeros([1, 8, 32, 32, 3]), NUM_CLASSES,
              temporal_conv_startat='Mixed_4b', gating_startat='Mixed_5b')
  shapes = _variable_shapes()
  prefix = 'InceptionV1/%s/Branch_1/Conv2d_0b_3x3/'
  assert shapes[prefix % 'Mixed_3c' + 'weights'] == [1, 3, 3, 128, 192]
  assert prefix % 'Mixed_3c' + 'temporal/weights' not in shapes
  assert shapes[prefix % 'Mixed_4b' + 'temporal/weights'] == [
      3, 1, 1, 208, 208]
  gates = sorted({name.split('/')[1] for name in shapes
                  if 'self_gating' in name})
  assert gates == ['Mixed_5b', 'Mixed_5c']


@pytest.mark.parametrize('kwargs, message', [
    ({'first_temporal_kernel_size': 4},
     'first_temporal_kernel_size must be 1, 3, 5 or 7, got 4'),
    ({'gating_startat': 'Conv2d_2b_1x1'},
     "gating_startat must be None or one of Conv2d_2c_3x3, Mixed_3b, .*, "
     "got 'Conv2d_2b_1x1'"),
    ({'final_endpoint': 'Mixed_6a'},
     "final_endpoint must be one of Conv2d_1a_7x7, .*, got 'Mixed_6a'"),
    ({'depth_multiplier': 0}, 'depth_multiplier must be > 0, got 0'),
])
def test_bad_arguments_are_refused_naming_the_value(graph, kwargs, message):
  with pytest.raises(ValueError, match=message):
    s3dg.s3dg(tf.zeros([1, 4, 32, 32, 3]), NUM_CLASSES, **kwargs)


Trained = collections.namedtuple(
    'Trained', ['graph', 'losses', 'steps', 'first_update'])

LEARNING_RATE = 1e-3


def _train(name, runs):
  """Deploys `name` on two CPU clones; every clone sees the same 4 clips of
  4 frames of 16x16 (the 3-D convolutions, forward and back, take most of
  the time on CPU, in proportion to the voxels). Returns the loss each run
  computes (the train op's, before its update: no other fetch runs the
  network, which each new fetch would prepare again), the global step
  after each, and the trainable variables' names, values before and after
  the first run and Adam's first moments after it."""
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.Graph().as_default() as graph:
    tf.set_random_seed(0)
    network_fn = nets_factory.get_network_fn(name, NUM_CLASSES,
                                             is_training=True)
    rng = np.random.RandomState(0)
    clips = tf.constant(rng.uniform(-1, 1, [4, 4, 16, 16, 3]), tf.float32)
    labels = tf.one_hot([0, 1, 2, 3], NUM_CLASSES)

    def model_fn(clips, labels):
      logits, _ = network_fn(clips, dropout_keep_prob=1.0)
      tf.losses.softmax_cross_entropy(labels, logits)
      return logits

    model = model_deploy.deploy(config, model_fn, args=[clips, labels],
                                optimizer=tf.train.AdamOptimizer(
                                    LEARNING_RATE))
    global_step = tf.train.get_global_step()
    variables = tf.trainable_variables()
    first_moments = adam_update.first_moments(variables)
    with tf.Session(config=model_deploy.session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      before = sess.run(variables)
      losses, steps = [], []
      for run in range(runs):
        losses.append(sess.run(model.train_op))
        steps.append(int(sess.run(global_step)))
        if run == 0:
          first_update = ([v.op.name for v in variables], before,
                          *sess.run([variables, first_moments]))
  return Trained(graph, losses, steps, first_update)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_training_on_two_clones_takes_adams_steps(name):
  trained = _train(name, 3)
  assert all(np.isfinite(trained.losses))
  # Adam's first update, not a lower loss: whether a few steps lower it
  # depends on the CPU's kernels (see tests/adam_update.py).
  adam_update.check_one_update(*trained.first_update, LEARNING_RATE)
  assert trained.steps == [1, 2, 3]
  with trained.graph.as_default():
    assert len(slim.get_model_variables()) == MODEL_VARIABLES[name]


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_the_training_script_refuses_a_video_network_in_one_line(
    digits_dir, tmp_path, name):
  assert test_min_image_size.training_refusal(
      digits_dir, tmp_path, '--model_name=%s' % name) == (
      '--model_name=%s is a video network: it takes clips [batch, frames, '
      'height, width, 3], and the scripts feed images; build it with '
      'nets.nets_factory.get_network_fn in your own input pipeline, or '
      'choose an image network' % name,)
