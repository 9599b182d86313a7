"""--batch_norm_decay: the decay of the batch norm moving averages, from the
flag to the update ops of the network train_image_classifier.py builds."""

from absl.testing import flagsaver
import numpy as np
import pytest

from tf2_compat.slim_compat import slim, tf
from training import run_config
from training.errors import UsageError
from training.flags import FLAGS


def _config(digits_dir, tmp_path, *argv):
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % digits_dir,
           '--train_dir=%s' % (tmp_path / 'train')] + list(argv))
    return run_config.from_flags(run_config.FlagSnapshot.of(FLAGS), {})


def _first_update(network_fn):
  """(batch mean of Conv2d_0's convolution, its moving mean after one
  update from zero)."""
  with tf.Graph().as_default() as graph:
    images = tf.constant(np.random.RandomState(0).uniform(
        -1, 1, [4, 32, 32, 1]).astype(np.float32))
    network_fn(images)
    convolution = graph.get_tensor_by_name('MobilenetV1/Conv2d_0/Conv2D:0')
    moving_mean, = [v for v in slim.get_model_variables()
                    if v.op.name == 'MobilenetV1/Conv2d_0/BatchNorm/'
                    'moving_mean']
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      values, _ = session.run([convolution,
                               tf.get_collection(tf.GraphKeys.UPDATE_OPS)])
      return values.mean(axis=(0, 1, 2)), session.run(moving_mean)


@pytest.mark.parametrize('argv, decay', [
    ([], 0.9997),  # mobilenet_v1_arg_scope's own
    (['--batch_norm_decay=0.99'], 0.99),
    (['--batch_norm_decay=0.9'], 0.9),
])
def test_the_flag_sets_the_moving_average_decay_of_the_training_network(
    digits_dir, tmp_path, argv, decay):
  config = _config(digits_dir, tmp_path, '--model_name=mobilenet_v1_025',
                   *argv)
  batch_mean, moving_mean = _first_update(config.model.network_fn)
  # From zero, one update leaves (1 - decay) x the batch's mean.
  np.testing.assert_allclose(moving_mean, (1 - decay) * batch_mean,
                             rtol=1e-4, atol=1e-8)
  assert np.abs(batch_mean).max() > 1e-3


def test_a_network_whose_arg_scope_takes_no_decay_is_refused(digits_dir,
                                                             tmp_path):
  with pytest.raises(UsageError) as raised:
    _config(digits_dir, tmp_path, '--model_name=lenet',
            '--batch_norm_decay=0.99')
  assert ("--model_name=lenet --batch_norm_decay=0.99: lenet's arg scope "
          "takes no batch_norm_decay; leave it unset for lenet"
          in str(raised.value))


@pytest.mark.parametrize('value', ['0', '1', '1.5', '-0.1'])
def test_a_decay_outside_0_1_is_refused(digits_dir, tmp_path, value):
  with pytest.raises(UsageError) as raised:
    _config(digits_dir, tmp_path, '--model_name=mobilenet_v1_025',
            '--batch_norm_decay=%s' % value)
  assert ('--batch_norm_decay must be in (0, 1) (unset: the network\'s own),'
          ' got %s' % float(value)) in str(raised.value)

