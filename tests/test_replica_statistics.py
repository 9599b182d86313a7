"""Batch norm's moving statistics on all-reduce replicas: each replica sets
them from its own batch; the training script has deploy() average them
over the replicas after every step (train_image_classifier.
replica_statistics), so every replica, and the chief's checkpoint, holds
the moving averages of the replicas' mean batch statistics."""

import functools

import numpy as np
import pytest

from deployment import collectives
from deployment import model_deploy
from deployment import update
from tf2_compat.slim_compat import slim, tf
import train_image_classifier
from training import run_config
from tests import test_sync_batch_norm
from tests.test_all_reduce import Cluster
from tests.test_run_config import NO_ENV
from tests.test_run_config import digits

# Two in-process servers on 127.0.0.1, one thread per replica.
pytestmark = pytest.mark.xdist_group('loopback')

STEPS = 4
BATCH = 4  # per replica
STATISTICS = ('conv/BatchNorm/moving_mean', 'conv/BatchNorm/moving_variance')


def conv_bn_logits(images, labels, **batch_norm_params):
  """A conv layer with batch norm, then logits, on constant `images`, and
  the loss of `labels`."""
  net = slim.conv2d(
      tf.constant(images), 4, [3, 3], normalizer_fn=slim.batch_norm,
      normalizer_params=dict(is_training=True, **batch_norm_params),
      weights_initializer=tf.truncated_normal_initializer(seed=1),
      scope='conv')
  logits = slim.fully_connected(
      slim.flatten(net), 3, activation_fn=None,
      weights_initializer=tf.truncated_normal_initializer(seed=2),
      scope='logits')
  tf.losses.sparse_softmax_cross_entropy(tf.constant(labels), logits)


def _train_replicas(synced):
  """Two replicas of one clone each, on different halves of the batch;
  per replica, the moving statistics after each step and the trained
  weights at the end."""
  cluster = Cluster(2)
  images, labels = test_sync_batch_norm.data(2 * BATCH)

  def replica(index, server):
    rows = slice(index * BATCH, (index + 1) * BATCH)
    config = cluster.deployment(index, num_clones=1)
    with tf.Graph().as_default():
      model = model_deploy.deploy(
          config, functools.partial(conv_bn_logits, images[rows],
                                    labels[rows], decay=0.5),
          optimizer=tf.train.GradientDescentOptimizer(0.1),
          replica_mean_variables=(
              functools.partial(train_image_classifier.replica_statistics,
                                False) if synced else None))
      statistics = {name: tf.global_variables(name)[0] for name in STATISTICS}
      with cluster.started_session(index, server, config) as session:
        history = []
        for _ in range(STEPS):
          session.run(model.train_op)
          history.append(session.run(statistics))
        return history, session.run({v.op.name: v
                                     for v in tf.trainable_variables()})

  return cluster.run(replica)


def test_synced_statistics_are_the_mean_of_what_each_replica_would_hold():
  (chief, chief_weights), (other, other_weights) = _train_replicas(True)
  (alone_0, weights_0), (alone_1, _) = _train_replicas(False)
  for step in range(STEPS):
    for name in STATISTICS:
      np.testing.assert_array_equal(chief[step][name], other[step][name])
      # A moving average is linear in the batch statistics: averaging
      # after every step gives the mean of the replicas' own averages.
      np.testing.assert_allclose(
          chief[step][name], (alone_0[step][name] + alone_1[step][name]) / 2,
          rtol=1e-6, atol=1e-6, err_msg='%d %s' % (step, name))
  # The halves' statistics differ, so without the sync the replicas drift.
  for name in STATISTICS:
    assert np.abs(alone_0[-1][name] - alone_1[-1][name]).max() > 1e-2, name
  # The averaging touches the statistics only: the weights are the same.
  for name, value in chief_weights.items():
    np.testing.assert_array_equal(other_weights[name], value)
    np.testing.assert_allclose(weights_0[name], value, rtol=1e-6, atol=1e-7)


def test_averaged_replicas_send_the_statistics_uncompressed():
  """With periodic averaging and fp16 compression, the trained variables
  travel in 16 bits, the statistics in 32: a moving variance may exceed
  float16's range."""
  images, labels = test_sync_batch_norm.data(BATCH)
  config = model_deploy.DeploymentConfig(num_replicas=2, replica_id=0)
  with tf.Graph().as_default() as graph:
    model_deploy.deploy(
        config, functools.partial(conv_bn_logits, images, labels),
        optimizer=tf.train.GradientDescentOptimizer(0.1),
        replica_mean_variables=functools.partial(
            train_image_classifier.replica_statistics, False),
        update=update.UpdateOptions(replica_averaging_steps=3,
                                    gradient_compression='fp16'))
    branch = graph.get_operation_by_name('average_replicas').get_attr(
        'then_branch').name
    # pylint: disable=protected-access
    ops = graph._get_function(branch).graph.get_operations()
    sent = sorted((op.inputs[0].dtype.name, op.inputs[0].shape.num_elements())
                  for op in ops if op.type == 'CollectiveReduceV2')
  # conv 3x3x2x4 and beta 4, logits 6x6x4x3 and 3 biases; mean, variance.
  assert sent == [('float16', 72 + 4 + 432 + 3), ('float32', 4 + 4)]


def _statistics_collectives(digits_dir, tmp_path, *argv):
  """Sizes of the collectives of the replica-statistics group in the
  training script's graph for worker 1 of 2 all-reduce workers, and the
  number of the model's moving-statistics floats."""
  config = run_config.from_flags(digits(
      digits_dir, '--worker_hosts=127.0.0.1:2222,127.0.0.1:2223',
      '--job_name=worker', '--task=1', '--clone_on_cpu',
      '--model_name=mobilenet_v1_025', '--train_image_size=32',
      '--train_dir=%s' % tmp_path, *argv), NO_ENV)
  assert config.deployment.all_reduce_replicas
  with tf.Graph().as_default() as graph:
    train_image_classifier.build_training_graph(config)
    moving = sum(v.shape.num_elements() for v in tf.model_variables()
                 if v.op.name.endswith(('/moving_mean', '/moving_variance')))
    return [op.inputs[0].shape.num_elements()
            for op in graph.get_operations()
            if op.type == 'CollectiveReduceV2' and tf.get_static_value(
                op.inputs[2]) == collectives.REPLICA_STATISTICS_GROUP_KEY
           ], moving


@pytest.mark.parametrize('argv', [[], ['--moving_average_decay=0.99']])
def test_the_training_script_averages_every_moving_statistic(digits_dir,
                                                             tmp_path, argv):
  # The weights' moving averages (--moving_average_decay) are no model
  # variables: each replica computes the same ones.
  synced, moving = _statistics_collectives(digits_dir, tmp_path, *argv)
  # MobileNet v1 0.25: 27 batch norms, 2 x their channels.
  assert moving == 5472
  assert synced == [moving]


def test_with_sync_batch_norm_the_statistics_are_already_the_same(
    digits_dir, tmp_path):
  synced, _ = _statistics_collectives(digits_dir, tmp_path,
                                      '--sync_batch_norm')
  assert synced == []
