"""Quantization-aware training on all-reduce replicas: each replica sets
the ranges from its own batch, then deploy(replica_mean_variables=...)
averages them over the replicas, so that every replica keeps the same
ranges: the moving average of the replicas' mean batch min and max."""

import threading

import numpy as np
import pytest

from deployment import collectives
from deployment import model_deploy
from deployment import update
from nets import quantize
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import run_config
from tests import test_sync_batch_norm
from tests.test_all_reduce import Cluster
from tests.test_replica_statistics import conv_bn_logits
from tests.test_run_config import NO_ENV
from tests.test_run_config import digits

# Two in-process servers on 127.0.0.1, one thread per replica.
pytestmark = pytest.mark.xdist_group('loopback')

LAYERS = ('conv', 'logits')  # conv's batch norm is folded.
STEPS = 4
BATCH = 4  # per replica
# quantization_aware() patches slim for the whole process: the replicas'
# threads build their graphs one at a time.
_BUILDING = threading.Lock()


def _model_fn(images, labels):
  def model_fn():
    with _BUILDING, quantize.quantization_aware(is_training=True):
      conv_bn_logits(images, labels, scale=True)
  return model_fn


def _quantized_inputs(graph):
  """{layer: (its fake-quantized weights, its activations)}: what the
  weight and the activation FakeQuant ops read, in the order LAYERS were
  built (weights narrow_range, activations not)."""
  fake_quants = [op for op in graph.get_operations()
                 if op.type == 'FakeQuantWithMinMaxVars']
  weights = [op.inputs[0] for op in fake_quants if op.get_attr('narrow_range')]
  activations = [op.inputs[0] for op in fake_quants
                 if not op.get_attr('narrow_range')]
  return dict(zip(LAYERS, zip(weights, activations)))


def _train_replicas(synced, steps=STEPS):
  """Two replicas of one clone each, on different halves of the batch;
  per replica (per step: the range values after it and the FakeQuant
  inputs of its forward pass, the trained weights at the end)."""
  cluster = Cluster(2)
  images, labels = test_sync_batch_norm.data(2 * BATCH)

  def replica(index, server):
    rows = slice(index * BATCH, (index + 1) * BATCH)
    config = cluster.deployment(index, num_clones=1)
    with tf.Graph().as_default() as graph:
      model = model_deploy.deploy(
          config, _model_fn(images[rows], labels[rows]),
          optimizer=tf.train.GradientDescentOptimizer(0.1),
          replica_mean_variables=(
              (lambda: tf.get_collection(quantize.RANGES)) if synced
              else None))
      ranges = {v.op.name: v for v in tf.get_collection(quantize.RANGES)}
      inputs = _quantized_inputs(graph)
      with cluster.started_session(index, server, config) as session:
        history = []
        for _ in range(steps):
          _, seen = session.run([model.train_op, inputs])
          history.append((session.run(ranges), seen))
        return history, session.run({v.op.name: v
                                     for v in tf.trainable_variables()})

  return cluster.run(replica)


def _expected_ranges(replicas, steps=STEPS):
  """The ranges after each step from the replicas' pooled statistics: a
  weight range is the replicas' mean largest magnitude of the weights they
  quantized (folded with their own batch's variance); an activation range
  moves 1/(step + 1) of the way (0.01 from step 99), from [-6, 6], to the
  replicas' mean batch min and max (each including 0)."""
  expected = []
  low, high = {}, {}
  for step in range(steps):
    seen = [history[step][1] for history, _ in replicas]
    weight = max(1 - quantize.ACTIVATION_DECAY, 1.0 / (step + 1))
    values = {}
    for layer in LAYERS:
      largest = np.mean([np.abs(s[layer][0]).max() for s in seen])
      values[layer + '/weights_quant/min'] = -largest
      values[layer + '/weights_quant/max'] = largest
      batch_low = np.mean([min(s[layer][1].min(), 0.0) for s in seen])
      batch_high = np.mean([max(s[layer][1].max(), 0.0) for s in seen])
      low[layer] = low.get(layer, -6.0)
      high[layer] = high.get(layer, 6.0)
      low[layer] += weight * (batch_low - low[layer])
      high[layer] += weight * (batch_high - high[layer])
      values[layer + '/act_quant/min'] = low[layer]
      values[layer + '/act_quant/max'] = high[layer]
    expected.append(values)
  return expected


def test_synced_ranges_are_identical_and_follow_the_pooled_statistics():
  replicas = _train_replicas(synced=True)
  (chief, chief_weights), (other, other_weights) = replicas
  assert sorted(chief[0][0]) == sorted(
      '%s/%s' % (layer, name) for layer in LAYERS
      for name in ('weights_quant/min', 'weights_quant/max',
                   'act_quant/min', 'act_quant/max'))
  for step, expected in enumerate(_expected_ranges(replicas)):
    for name, value in expected.items():
      assert chief[step][0][name] == other[step][0][name], (step, name)
      np.testing.assert_allclose(chief[step][0][name], value, atol=1e-6,
                                 err_msg='%d %s' % (step, name))
  # The halves differ: the folded conv's weights, scaled by each batch's
  # own variance, and the activations had other ranges on each replica.
  first = [history[0][1] for history, _ in replicas]
  for layer, kind in (('conv', 0), ('conv', 1), ('logits', 1)):
    assert abs(np.abs(first[0][layer][kind]).max()
               - np.abs(first[1][layer][kind]).max()) > 1e-3, layer
  # Folding still trains the same weights on both replicas.
  for name, value in chief_weights.items():
    np.testing.assert_array_equal(other_weights[name], value)
  assert 'conv/BatchNorm/gamma' in chief_weights


def test_without_the_sync_each_replica_keeps_its_own_ranges():
  replicas = _train_replicas(synced=False)
  for index, (history, _) in enumerate(replicas):
    alone = _expected_ranges([replicas[index]])
    for step, expected in enumerate(alone):
      for name, value in expected.items():
        np.testing.assert_allclose(history[step][0][name], value, atol=1e-6,
                                   err_msg='%d %s' % (step, name))
  chief, other = replicas[0][0][-1][0], replicas[1][0][-1][0]
  assert max(abs(chief[name] - other[name]) for name in chief) > 1e-2


def _collectives(replica_averaging_steps=None):
  """(group key, size) of each CollectiveReduceV2 that replica 0 of the
  model runs, with synced ranges; those of replica averaging sit in the
  branch of its cond, a function of the graph."""
  images, labels = test_sync_batch_norm.data(BATCH)
  config = model_deploy.DeploymentConfig(num_replicas=2, replica_id=0)
  with tf.Graph().as_default() as graph:
    model_deploy.deploy(
        config, _model_fn(images, labels),
        optimizer=tf.train.GradientDescentOptimizer(0.1),
        replica_mean_variables=lambda: tf.get_collection(quantize.RANGES),
        update=update.UpdateOptions(
            replica_averaging_steps=replica_averaging_steps))
    ops = graph.get_operations()
    if replica_averaging_steps:
      branch = graph.get_operation_by_name('average_replicas').get_attr(
          'then_branch').name
      # pylint: disable=protected-access
      ops = graph._get_function(branch).graph.get_operations()
    return sorted((int(tf.get_static_value(op.inputs[2])),
                   op.inputs[0].shape.num_elements())
                  for op in ops if op.type == 'CollectiveReduceV2')


def test_the_ranges_travel_in_one_small_collective_of_their_own():
  gradients = 3 * 3 * 2 * 4 + 4 + 4 + 6 * 6 * 4 * 3 + 3  # beta, gamma
  assert _collectives() == [
      (collectives.REPLICA_GRADIENTS_GROUP_KEY, gradients),
      (collectives.REPLICA_STATISTICS_GROUP_KEY, 8)]  # 2 layers x 4
  # With replica averaging, with the weights every k-th step instead.
  assert _collectives(replica_averaging_steps=3) == [
          (collectives.REPLICA_AVERAGING_GROUP_KEY, gradients + 8)]


def test_the_training_script_syncs_the_ranges_of_its_all_reduce_workers(
    digits_dir, tmp_path):
  config = run_config.from_flags(digits(
      digits_dir, '--worker_hosts=127.0.0.1:2222,127.0.0.1:2223',
      '--job_name=worker', '--task=1', '--clone_on_cpu',
      '--quantize_delay=0', '--train_dir=%s' % tmp_path), NO_ENV)
  assert config.deployment.all_reduce_replicas
  with tf.Graph().as_default() as graph:
    train_image_classifier.build_training_graph(config)
    synced = [op.inputs[0].shape.num_elements()
              for op in graph.get_operations()
              if op.type == 'CollectiveReduceV2' and tf.get_static_value(
                  op.inputs[2]) == collectives.REPLICA_STATISTICS_GROUP_KEY]
  assert synced == [4 * 4]  # LeNet's 4 layers x 4 ranges
