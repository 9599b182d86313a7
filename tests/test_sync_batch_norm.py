"""Sync batch norm: N clones of batch b train like one clone of batch N*b."""

import contextlib
import os
import re
import threading
import time

import numpy as np
import pytest

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from tests.script_runner import run_script

PER_CLONE_BATCH = 3
STEPS = 3
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def data(num_examples):
  rng = np.random.RandomState(7)
  # Per-example offsets make the clones' batch statistics differ.
  images = (rng.randn(num_examples, 6, 6, 2) * 2 +
            rng.randn(num_examples, 1, 1, 1) * 3).astype(np.float32)
  labels = rng.randint(0, 3, num_examples).astype(np.int64)
  return images, labels


def model_fn_over_slices(images, labels, num_clones):
  """A model_fn giving clone i the i-th slice of the batch."""
  calls = []

  def model_fn():
    i = len(calls)
    calls.append(i)
    size = len(images) // num_clones
    x = tf.constant(images[i * size:(i + 1) * size])
    y = tf.constant(labels[i * size:(i + 1) * size])
    normalized = slim.conv2d(
        x, 4, [3, 3], activation_fn=None, normalizer_fn=slim.batch_norm,
        normalizer_params={'decay': 0.8, 'scale': True, 'is_training': True},
        weights_initializer=tf.truncated_normal_initializer(seed=1),
        scope='conv')
    net = slim.flatten(tf.nn.relu(normalized))
    logits = slim.fully_connected(
        net, 3, activation_fn=None,
        weights_initializer=tf.truncated_normal_initializer(seed=2),
        scope='logits')
    tf.losses.sparse_softmax_cross_entropy(y, logits)
    return normalized

  return model_fn


def _train(num_clones, sync, num_examples):
  """Builds and runs the deployment; returns everything to compare."""
  images, labels = data(num_examples)
  config = model_deploy.DeploymentConfig(
      num_clones=num_clones, clone_on_cpu=True,
      separate_cpu_devices=num_clones > 1)
  with tf.Graph().as_default():
    tf.train.get_or_create_global_step()
    clones = model_deploy.create_clones(
        config, model_fn_over_slices(images, labels, num_clones),
        sync_batch_norm=sync)
    optimizer = tf.train.MomentumOptimizer(0.1, 0.9)
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, optimizer)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
    with tf.control_dependencies(update_ops):
      train_op = optimizer.apply_gradients(grads_and_vars)
    normalized = tf.concat([c.outputs for c in clones], axis=0)
    grads = {v.op.name: g for g, v in grads_and_vars}
    with tf.Session(config=model_deploy.session_config(config)) as sess:
      sess.run(tf.global_variables_initializer())
      first = sess.run({'normalized': normalized, 'loss': total_loss,
                        'grads': grads})
      for _ in range(STEPS):
        sess.run(train_op)
      first['variables'] = sess.run(
          {v.op.name: v for v in tf.global_variables()
           if 'Momentum' not in v.op.name})
      first['collective_ops'] = sorted(
          {op.device for op in tf.get_default_graph().get_operations()
           if op.type == 'CollectiveReduceV2'})
  return first


def _assert_same(result, reference):
  np.testing.assert_allclose(result['normalized'], reference['normalized'],
                             **TOLERANCE)
  np.testing.assert_allclose(result['loss'], reference['loss'], **TOLERANCE)
  assert sorted(result['grads']) == sorted(reference['grads'])
  for name, grad in reference['grads'].items():
    np.testing.assert_allclose(result['grads'][name], grad, err_msg=name,
                               **TOLERANCE)
  assert sorted(result['variables']) == sorted(reference['variables'])
  for name, value in reference['variables'].items():
    np.testing.assert_allclose(result['variables'][name], value,
                               err_msg=name, **TOLERANCE)


@pytest.mark.parametrize('num_clones', [2, 4])
def test_synced_clones_equal_one_clone_of_the_whole_batch(num_clones):
  num_examples = num_clones * PER_CLONE_BATCH
  reference = _train(1, False, num_examples)
  synced = _train(num_clones, True, num_examples)
  _assert_same(synced, reference)
  # The statistics went through one all-reduce per layer per clone (and
  # one for its gradient), each on its clone's own device.
  assert synced['collective_ops'] == [
      '/device:CPU:%d' % i for i in range(num_clones)]
  assert set(reference['variables']) >= {
      'conv/BatchNorm/beta', 'conv/BatchNorm/gamma',
      'conv/BatchNorm/moving_mean', 'conv/BatchNorm/moving_variance'}


@pytest.mark.parametrize('num_clones', [2, 4])
def test_without_sync_the_clones_differ_from_the_whole_batch(num_clones):
  num_examples = num_clones * PER_CLONE_BATCH
  reference = _train(1, False, num_examples)
  unsynced = _train(num_clones, False, num_examples)
  assert unsynced['collective_ops'] == []
  with pytest.raises(AssertionError):
    _assert_same(unsynced, reference)
  assert np.abs(unsynced['normalized'] - reference['normalized']).max() > 0.1
  moving = 'conv/BatchNorm/moving_variance'
  assert np.abs(unsynced['variables'][moving] -
                reference['variables'][moving]).max() > 1e-3


def test_sync_batch_norm_on_one_shared_device_is_refused(graph):
  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with pytest.raises(ValueError, match=r'sync_batch_norm with 2 clones all '
                     r'on /device:CPU:0: .*separate_cpu_devices=True'):
    model_deploy.deploy(config, model_fn_over_slices(*data(6), 2),
                        optimizer=tf.train.GradientDescentOptimizer(0.1),
                        sync_batch_norm=True)
  assert not [op for op in graph.get_operations()
              if op.type == 'CollectiveReduceV2']


def test_a_missing_clone_fails_after_the_timeout(graph):
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
      collective_timeout_secs=2)
  clones = model_deploy.create_clones(
      config, model_fn_over_slices(*data(6), 2), sync_batch_norm=True)
  with tf.Session(config=model_deploy.session_config(config)) as sess:
    sess.run(tf.global_variables_initializer())
    start = time.time()
    # Only clone 0 runs: its all-reduce waits for clone 1, then gives up.
    with pytest.raises(tf.errors.DeadlineExceededError):
      sess.run(clones[0].outputs)
    assert time.time() - start < 30


def test_inference_is_plain_batch_norm(graph):
  images, labels = data(6)
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True)

  def model_fn():
    return slim.batch_norm(tf.constant(images), is_training=False,
                           scope='bn')

  clones = model_deploy.create_clones(config, model_fn, sync_batch_norm=True)
  del labels
  assert not [op for op in graph.get_operations()
              if op.type == 'CollectiveReduceV2']
  with tf.Session(config=model_deploy.session_config(config)) as sess:
    sess.run(tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(clones[1].outputs),
                               images / np.sqrt(1 + 0.001), rtol=1e-6)


@pytest.mark.slow
def test_benchmark_writes_its_ratio_table(tmp_path):
  import importlib  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  benchmarks = os.path.join(os.path.dirname(os.path.dirname(
      os.path.abspath(__file__))), 'benchmarks')
  sys.path.insert(0, benchmarks)
  try:
    benchmark = importlib.import_module('sync_batch_norm')
    benchmark.main(['--clones', '1,2', '--rounds', '1', '--steps', '1',
                    '--results_dir', str(tmp_path)])
  finally:
    sys.path.remove(benchmarks)
  text = (tmp_path / 'sync_batch_norm.md').read_text()
  assert text.startswith('# Sync batch norm: step time against plain batch '
                         'norm\n')
  assert ('\nCommand: `.venv/bin/python benchmarks/sync_batch_norm.py '
          '--clones 1,2 --rounds 1 --steps 1 --results_dir %s`\n' % tmp_path
          in text)
  assert '## Machine' in text
  rows = [l for l in text.splitlines() if re.match(r'\| \d+ \|', l)]
  assert [r.split('|')[1:3] for r in rows] == [[' 1 ', ' 64 '],
                                               [' 2 ', ' 32 ']]


@pytest.mark.slow
def test_training_script_with_sync_batch_norm(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script(
      'train_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=mobilenet_v1_025',
      '--preprocessing_name=mobilenet_v1', '--train_image_size=32',
      '--sync_batch_norm', '--num_clones=2', '--clone_on_cpu',
      '--batch_size=4', '--optimizer=sgd', '--max_number_of_steps=3',
      '--train_dir=%s' % train_dir)
  assert result.returncode == 0, result.stdout[-3000:]
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert reader.get_tensor('global_step') == 3
  names = set(reader.get_variable_to_shape_map())
  assert 'MobilenetV1/Conv2d_0/BatchNorm/moving_variance' in names
  assert not [n for n in names if n.startswith('clone_')]


def test_drop_in_function_syncs_two_hand_built_members(graph):
  from deployment import collectives  # pylint: disable=g-import-not-at-top
  from deployment import sync_batch_norm  # pylint: disable=g-import-not-at-top
  images, _ = data(6)
  group = collectives.CollectiveGroup(2, timeout_seconds=10)
  outputs = []
  for member in range(2):
    with tf.device('/device:CPU:%d' % member):
      outputs.append(sync_batch_norm.batch_norm(
          tf.constant(images[3 * member:3 * member + 3]), group, member,
          is_training=True, scope='bn', reuse=member > 0))
  with tf.Session(config=tf.ConfigProto(device_count={'CPU': 2})) as sess:
    sess.run(tf.global_variables_initializer())
    synced = np.concatenate(sess.run(outputs))
  mean = images.mean(axis=(0, 1, 2))
  variance = images.var(axis=(0, 1, 2))
  np.testing.assert_allclose(synced, (images - mean) / np.sqrt(
      variance + 0.001), rtol=1e-4, atol=1e-4)


def _batch_norm_ops(build):
  """slim.batch_norm on a 4-D input, built inside `build()` (a context
  manager) in a graph of its own: (the number of fused kernels computing
  their own statistics, [group size of each collective])."""
  with tf.Graph().as_default() as g:
    with build():
      slim.batch_norm(tf.zeros([2, 4, 4, 3]), is_training=True, scope='bn')
    own_statistics = [op for op in g.get_operations()
                      if op.type == 'FusedBatchNormV3'
                      and op.get_attr('is_training')]
    sizes = [int(tf.get_static_value(op.inputs[1])) for op in
             g.get_operations() if op.type == 'CollectiveReduceV2']
  return len(own_statistics), sizes


def test_another_thread_building_meanwhile_gets_its_own_batch_norm():
  from deployment import collectives  # pylint: disable=g-import-not-at-top
  from deployment import sync_batch_norm  # pylint: disable=g-import-not-at-top
  inside, done = threading.Event(), threading.Event()

  def hold_a_synchronized_block():
    with tf.Graph().as_default():
      with sync_batch_norm.synchronized(collectives.CollectiveGroup(3), 0):
        inside.set()
        done.wait(30)

  thread = threading.Thread(target=hold_a_synchronized_block)
  thread.start()
  try:
    assert inside.wait(30)
    # Plain (fused) batch norm here while the other thread syncs...
    plain = _batch_norm_ops(contextlib.nullcontext)
    # ...and this thread's own group when it syncs too.
    synced = _batch_norm_ops(lambda: sync_batch_norm.synchronized(
        collectives.CollectiveGroup(2), 0))
  finally:
    done.set()
    thread.join(30)
  assert plain == (1, [])
  assert synced == (0, [2])
  # Once every block has ended, tf-slim's own module is back.
  assert _batch_norm_ops(contextlib.nullcontext) == (1, [])


def test_tf_slim_is_patched_only_inside_synchronized_blocks():
  from deployment import collectives  # pylint: disable=g-import-not-at-top
  from deployment import sync_batch_norm  # pylint: disable=g-import-not-at-top
  from tf2_compat import patching  # pylint: disable=g-import-not-at-top
  from tf_slim.layers import layers as slim_layers  # pylint: disable=g-import-not-at-top
  originals = (slim_layers.normalization_layers,
               slim_layers._fused_batch_norm)  # pylint: disable=protected-access
  group = collectives.CollectiveGroup(2)
  with tf.Graph().as_default():
    with sync_batch_norm.synchronized(group, 0):
      with sync_batch_norm.synchronized(group, 1):
        assert patching.installed(sync_batch_norm._TARGETS)  # pylint: disable=protected-access
      # The outer block still holds the patch.
      assert patching.installed(sync_batch_norm._TARGETS)  # pylint: disable=protected-access
      assert (slim_layers.normalization_layers.normalization
              is originals[0].normalization)
  assert not patching.installed(sync_batch_norm._TARGETS)  # pylint: disable=protected-access
  assert (slim_layers.normalization_layers,
          slim_layers._fused_batch_norm) == originals  # pylint: disable=protected-access


@pytest.mark.parametrize('shape,dtype,fused,data_format', [
    ((5, 3, 3, 2), np.float32, True, 'NHWC'),
    ((6, 4), np.float32, False, 'NHWC'),
    ((5, 3, 3, 2), np.float64, False, 'NHWC'),
    ((5, 2, 3, 3), np.float32, False, 'NCHW')])
def test_a_group_of_one_equals_plain_batch_norm(shape, dtype, fused,
                                                data_format):
  """Conv inputs take the fused kernel given the all-reduced statistics;
  2-D inputs, channels first (statistics over axes 0, 2 and 3) and dtypes
  the kernel does not take (float64) the layer's unfused path. Both equal
  tf-slim's batch norm:
  outputs, the gradients of the input, beta and gamma, the moving
  averages after one update."""
  from deployment import collectives  # pylint: disable=g-import-not-at-top
  from deployment import sync_batch_norm  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(3)
  values = (rng.randn(*shape) * 3 + 1).astype(dtype)
  weights = rng.randn(*shape).astype(dtype)
  results = {}
  for name, synced in (('plain', False), ('synced', True)):
    with tf.Graph().as_default() as g:
      x = tf.constant(values)
      kwargs = dict(is_training=True, scale=True, decay=0.5, scope='bn',
                    data_format=data_format)
      if synced:
        y = sync_batch_norm.batch_norm(x, collectives.CollectiveGroup(1), 0,
                                       **kwargs)
      else:
        y = slim.batch_norm(x, **kwargs)
      variables = {v.op.name: v for v in tf.global_variables()}
      trainable = [variables['bn/beta'], variables['bn/gamma']]
      # A loss that is not linear in y, so every gradient term matters.
      loss = tf.reduce_sum(tf.square(y) * weights)
      gradients = tf.gradients(loss, [x] + trainable)
      with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        update = tf.no_op()
      with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        results[name] = sess.run([y] + gradients)
        sess.run(update)
        results[name] += sess.run([variables['bn/moving_mean'],
                                   variables['bn/moving_variance']])
      given_statistics = [op for op in g.get_operations()
                          if op.type == 'FusedBatchNormV3'
                          and not op.get_attr('is_training')]
    if synced:
      assert len(given_statistics) == (1 if fused else 0)
  if dtype == np.float64:
    # tf-slim's unfused layer keeps the biased variance; the synced layer
    # takes Bessel's correction as the fused kernel does (decay 0.5 from 1).
    count = np.prod(shape[:-1])
    results['plain'][-1] = 0.5 + (results['plain'][-1] - 0.5) * count / (
        count - 1)
  for plain, synced in zip(results['plain'], results['synced']):
    np.testing.assert_allclose(synced, plain, rtol=1e-5, atol=1e-5)


def _three_layer_model_fn(num_clones):
  """model_fn of three conv + batch-norm layers; clone i gets slice i."""
  images, labels = data(2 * num_clones)
  calls = []

  def model_fn():
    i = len(calls)
    calls.append(i)
    net = tf.constant(images[2 * i:2 * i + 2])
    with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm,
                        normalizer_params={'is_training': True}):
      for layer in range(3):
        net = slim.conv2d(net, 4, [3, 3], scope='conv%d' % layer)
    logits = slim.fully_connected(slim.flatten(net), 3, activation_fn=None,
                                  scope='logits')
    tf.losses.sparse_softmax_cross_entropy(labels[2 * i:2 * i + 2], logits)

  return model_fn


def _collective_timeouts(graph):
  return {op.name: op.get_attr('timeout_seconds')
          for op in graph.get_operations() if op.type == 'CollectiveReduceV2'}


def test_only_each_clones_first_collective_has_the_timeout(graph):
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
      collective_timeout_secs=7)
  model = model_deploy.deploy(
      config, _three_layer_model_fn(2),
      optimizer=tf.train.GradientDescentOptimizer(0.1), sync_batch_norm=True)
  timeouts = _collective_timeouts(graph)
  # 3 layers x (forward + gradient) x 2 clones; the first layer's forward
  # of each clone is timed.
  assert len(timeouts) == 12
  assert {n: t for n, t in timeouts.items() if t} == {
      'clone_0/conv0/BatchNorm/sync_moments/CollectiveReduceV2': 7.0,
      'clone_1/conv0/BatchNorm/sync_moments/CollectiveReduceV2': 7.0}
  # TensorFlow watches each timed collective with a thread that sleeps the
  # whole timeout: 2 timed ops make about 2 x 2 threads a step, where
  # timing all 12 made about 2 x 12 (480 here). Only an upper bound: the
  # threads of earlier tests may end meanwhile.
  with tf.Session(config=model_deploy.session_config(config)) as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(model.train_op)
    before = len(os.listdir('/proc/self/task'))
    for _ in range(20):
      sess.run(model.train_op)
    added = len(os.listdir('/proc/self/task')) - before
  assert added <= 2 * 2 * 20 + 20, added


def test_between_replicas_every_collective_has_the_timeout(graph):
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
      replica_id=0, num_replicas=2, collective_timeout_secs=7)
  model_deploy.deploy(
      config, _three_layer_model_fn(2),
      optimizer=tf.train.GradientDescentOptimizer(0.1), sync_batch_norm=True)
  timeouts = _collective_timeouts(graph)
  # The 12 of sync batch norm and the gradients' all-reduce.
  assert len(timeouts) == 13 and set(timeouts.values()) == {7.0}
