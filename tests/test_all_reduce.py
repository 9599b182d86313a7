"""All-reduce replicas: several workers, no ps, the same update everywhere.

Each replica is a task of an in-process cluster on 127.0.0.1 with its own
graph and session, run in a thread of its own, as between-graph replicas
are. (tests/test_cluster_e2e.py runs them as real processes through the
training script.)
"""

import collections
import contextlib
import threading

import numpy as np
import pytest

from deployment import collectives
from clusters import machine
from deployment import model_deploy
from deployment import update
from tf2_compat.slim_compat import slim
from tf2_compat.slim_compat import tf
from tests import test_sync_batch_norm

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


FEATURES, CLASSES, BATCH = 6, 3, 4  # BATCH: per clone


def data(seed=0, examples=4 * BATCH):
  rng = np.random.RandomState(seed)
  return (rng.randn(examples, FEATURES).astype(np.float32),
          rng.randint(0, CLASSES, examples).astype(np.int32))


def _model_fn(batches, hidden_activation=tf.nn.relu):
  """model_fn taking the next of `batches` (one per clone) on each call."""
  batches = iter(batches)

  def model_fn():
    x, y = next(batches)
    hidden = slim.fully_connected(tf.convert_to_tensor(x), 8,
                                  activation_fn=hidden_activation,
                                  scope='hidden')
    logits = slim.fully_connected(hidden, CLASSES, activation_fn=None,
                                  scope='logits')
    tf.losses.sparse_softmax_cross_entropy(tf.convert_to_tensor(y), logits)

  return model_fn


def _weights():
  """The model's variables: the trainable ones and the model variables
  (slim's batch-norm moving averages)."""
  return {v.op.name: v
          for v in tf.trainable_variables() + tf.model_variables()}


# What `train` returns: the loss of each step, the weights at the end, at the
# start (after the broadcast) and after each step ({name: value} each).
Run = collections.namedtuple('Run', ['losses', 'end', 'start', 'history'])


def train(config, batches, steps, master='', seed=0, session_kwargs=None,
          start=None, make_model_fn=_model_fn, **deploy_kwargs):
  """Builds and runs one replica; returns a Run.

  `start`: {name: value} of the weights to start from instead of `seed`'s.
  """
  with tf.Graph().as_default():
    tf.set_random_seed(seed)
    model = model_deploy.deploy(
        config, make_model_fn(batches),
        optimizer=tf.train.MomentumOptimizer(0.1, 0.9), **deploy_kwargs)
    broadcast = model_deploy.broadcast_variables(config)
    weights = _weights()
    session_config = model_deploy.session_config(config,
                                                 **(session_kwargs or {}))
    with tf.Session(master, config=session_config) as session:
      session.run(tf.global_variables_initializer())
      for name, value in (start or {}).items():
        weights[name].load(value, session)
      session.run(broadcast)
      start = session.run(weights)
      losses, history = [], []
      for _ in range(steps):
        losses.append(session.run(model.train_op))
        history.append(session.run(weights))
      return Run(losses, history[-1], start, history)


class Cluster:
  """In-process servers of a `worker` job on 127.0.0.1.

  `deployment_kwargs`: DeploymentConfig arguments of every worker.
  """

  def __init__(self, num_workers, **deployment_kwargs):
    self._deployment_kwargs = deployment_kwargs
    self.hosts = ['127.0.0.1:%d' % p for p in machine.free_ports(num_workers)]
    self.servers = []
    for index in range(num_workers):
      config = model_deploy.session_config(self.deployment(index))
      self.servers.append(tf.distribute.Server(
          tf.train.ClusterSpec({'worker': self.hosts}), job_name='worker',
          task_index=index, config=config, start=True))

  def deployment(self, index, **kwargs):
    kwargs = dict(self._deployment_kwargs, **kwargs)
    kwargs.setdefault('num_clones', 2)
    return model_deploy.DeploymentConfig(
        clone_on_cpu=True, replica_id=index, num_replicas=len(self.hosts),
        collective_timeout_secs=30, **kwargs)

  @contextlib.contextmanager
  def started_session(self, index, server, config):
    """A session of worker `index` on its server, over the default graph
    built with `config`: its variables initialised, then given the
    chief's values (the broadcast)."""
    session_config = model_deploy.session_config(
        config, device_filters=['/job:worker/task:%d' % index])
    with tf.Session(server.target, config=session_config) as session:
      session.run([tf.global_variables_initializer(),
                   tf.local_variables_initializer()])
      session.run(model_deploy.broadcast_variables(config))
      yield session

  def run(self, fn):
    """fn(index, server) in one thread per worker; the results in order."""
    results, errors = [None] * len(self.servers), []

    def target(index):
      try:
        results[index] = fn(index, self.servers[index])
      except Exception as e:  # pylint: disable=broad-except
        errors.append(e)

    threads = [threading.Thread(target=target, args=(i,))
               for i in range(len(self.servers))]
    for thread in threads:
      thread.start()
    for thread in threads:
      thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), 'a replica hung'
    if errors:
      raise errors[0]
    return results


@pytest.fixture
def cluster():
  # New servers per test: a server keeps the shape of every collective
  # instance it has run, and the tests' graphs reuse instance keys.
  return Cluster(2)


def replica_batches(x, y, replica, clones):
  per_replica = len(x) // 2
  start = replica * per_replica
  size = per_replica // clones
  return [(x[start + c * size:start + (c + 1) * size],
           y[start + c * size:start + (c + 1) * size]) for c in range(clones)]


def _train_replicas(cluster, steps, seeds=(0, 0), **deploy_kwargs):
  x, y = data()

  def replica(index, server):
    config = cluster.deployment(index)
    return train(config, replica_batches(x, y, index, 2), steps,
                  master=server.target, seed=seeds[index],
                  session_kwargs=dict(device_filters=[
                      '/job:worker/task:%d' % index]), **deploy_kwargs)

  return cluster.run(replica)


def train_one_device(steps, start=None, make_model_fn=_model_fn):
  x, y = data()
  return train(model_deploy.DeploymentConfig(clone_on_cpu=True), [(x, y)],
               steps, start=start, make_model_fn=make_model_fn)


def test_two_replicas_of_two_clones_equal_one_device_with_the_whole_batch(
    cluster):
  replicas = _train_replicas(cluster, steps=3)
  one_device = train_one_device(steps=3)
  for replica in replicas:
    for name, value in one_device.end.items():
      np.testing.assert_allclose(replica.end[name], value, atol=1e-5)
  # Each replica's loss is its half's; their mean is the whole batch's.
  np.testing.assert_allclose(
      np.mean([r.losses for r in replicas], axis=0), one_device.losses,
      atol=1e-5)


def test_without_all_reduce_a_worker_alone_drifts_from_the_whole_batch():
  x, y = data()
  alone = train(model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True), replica_batches(x, y, 0, 2), 3).end
  weights = train_one_device(steps=3).end
  assert max(np.abs(alone[n] - weights[n]).max() for n in weights) > 1e-3


def test_replicas_start_from_the_chief_weights_and_stay_identical(cluster):
  replicas = _train_replicas(cluster, steps=20, seeds=(1, 2))
  chief_end, chief_start = replicas[0].end, replicas[0].start
  other_end, other_start = replicas[1].end, replicas[1].start
  for name in chief_start:
    np.testing.assert_array_equal(other_start[name], chief_start[name])
    np.testing.assert_array_equal(other_end[name], chief_end[name])
  # The seeds differ: without the broadcast the starts would too.
  with tf.Graph().as_default():
    tf.set_random_seed(2)
    _model_fn(replica_batches(*data(), 0, 1))()
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      own = session.run(_weights())
  assert not np.array_equal(own['hidden/weights'],
                            chief_start['hidden/weights'])


def test_gradients_are_packed_into_few_collectives(cluster):
  del cluster
  config = model_deploy.DeploymentConfig(
      clone_on_cpu=True, replica_id=0, num_replicas=2)
  x, y = data()
  with tf.Graph().as_default():
    model_deploy.deploy(config, _model_fn([(x, y)]),
                        optimizer=tf.train.GradientDescentOptimizer(0.1))
    reduces = [op for op in tf.get_default_graph().get_operations()
               if op.type == 'CollectiveReduceV2']
  # Four variables, (6*8 + 8 + 8*3 + 3) floats: one buffer.
  assert len(reduces) == 1
  assert reduces[0].device == '/job:worker/task:0/device:CPU:0'
  assert reduces[0].inputs[0].shape.as_list() == [6 * 8 + 8 + 8 * 3 + 3]
  with tf.Graph().as_default():
    model_deploy.deploy(config, _model_fn([(x, y)]),
                        optimizer=tf.train.GradientDescentOptimizer(0.1),
                        update=update.UpdateOptions(
                            all_reduce_buffer_bytes=4 * 50))
    sizes = sorted(op.inputs[0].shape.as_list()[0]
                   for op in tf.get_default_graph().get_operations()
                   if op.type == 'CollectiveReduceV2')
  # Last variable first, 50 floats a buffer: logits (3 + 24) and 23 of
  # hidden/biases (8) + weights (48), then the other 33 weights.
  assert sizes == [33, 50]


def test_buffers_take_the_last_tensor_first_and_split_what_does_not_fit():
  with tf.Graph().as_default():
    tensors = [tf.zeros([10]), tf.zeros([5], tf.float64), tf.zeros([30]),
               tf.zeros([3], tf.float64)]
    # pylint: disable=protected-access
    assert collectives._buffers(tensors, 4 * 32) == [
        [(3, 0, 3), (1, 0, 5)], [(2, 0, 30), (0, 0, 2)], [(0, 2, 8)]]
    assert collectives._buffers(tensors, 10 ** 6) == [
        [(3, 0, 3), (1, 0, 5)], [(2, 0, 30), (0, 0, 10)]]
    # A buffer smaller than one element still holds one.
    assert collectives._buffers(tensors[:1], 1) == [
        [(0, i, 1)] for i in range(10)]


def test_packed_buffers_give_every_tensor_back_in_its_shape():
  values = [np.arange(12, dtype=np.float32).reshape(3, 4),
            np.arange(5, dtype=np.float64), np.arange(7, dtype=np.float32)]
  with tf.Graph().as_default():
    seen = []

    def reduce_fn(flat, number):
      seen.append((number, flat.shape.as_list(), flat.dtype))
      return flat * 2
    # pylint: disable=protected-access
    packed = collectives._packed([tf.constant(v) for v in values], 4 * 10,
                                 reduce_fn)
    with tf.Session() as session:
      results = session.run(packed)
  # The last tensor's 7 floats and 3 of the first's, the 5 doubles (40
  # bytes), the first's other 9 floats.
  assert seen == [(0, [10], tf.float32), (1, [5], tf.float64),
                  (2, [9], tf.float32)]
  for value, result in zip(values, results):
    assert result.shape == value.shape and result.dtype == value.dtype
    np.testing.assert_array_equal(result, value * 2)


def test_all_reduce_replicas_variables_sit_on_each_worker():
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, replica_id=1, num_replicas=2)
  assert config.all_reduce_replicas
  assert config.variables_device() == '/job:worker/task:1/device:CPU:0'
  assert config.clone_device(1) == '/job:worker/task:1/device:CPU:0'
  proto = model_deploy.session_config(config)
  assert (proto.experimental.collective_group_leader
          == '/job:worker/replica:0/task:0')
  assert not model_deploy.DeploymentConfig(
      num_replicas=2, num_ps_tasks=1).all_reduce_replicas


def _micro_batch_model_fn(x, y, micro_batch):
  """model_fn reading the next `micro_batch` rows of (x, y) per run."""
  def model_fn():
    features, labels = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(
            micro_batch).repeat()).get_next()
    _model_fn([(features, labels)])()
  return model_fn


def test_accumulation_all_reduces_the_mean_of_the_micro_steps(cluster):
  # 2 replicas x 2 micro-steps of BATCH = one device with 4 x BATCH.
  x, y = data()
  half = len(x) // 2

  def replica(index, server):
    rows = slice(index * half, (index + 1) * half)
    with tf.Graph().as_default():
      config = cluster.deployment(index, num_clones=1)
      model_deploy.deploy(
          config, _micro_batch_model_fn(x[rows], y[rows], BATCH),
          optimizer=tf.train.GradientDescentOptimizer(0.5),
          update=update.UpdateOptions(accumulation_steps=2))
      train_op = tf.get_default_graph().get_tensor_by_name('train_op:0')
      with cluster.started_session(index, server, config) as session:
        start = session.run(_weights())
        for _ in range(4):  # Two updates.
          session.run(train_op)
        return start, session.run(_weights())

  replicas = cluster.run(replica)
  with tf.Graph().as_default():
    model_deploy.deploy(model_deploy.DeploymentConfig(clone_on_cpu=True),
                        _micro_batch_model_fn(x, y, len(x)),
                        optimizer=tf.train.GradientDescentOptimizer(0.5))
    train_op = tf.get_default_graph().get_tensor_by_name('train_op:0')
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      weights = _weights()
      for name, variable in weights.items():
        variable.load(replicas[0][0][name], session)
      start = session.run(weights)
      for _ in range(2):
        session.run(train_op)
      expected = session.run(weights)
  for name, value in expected.items():
    np.testing.assert_allclose(replicas[1][1][name], value, atol=1e-5)
    assert not np.allclose(value, start[name], atol=1e-4)


def test_averaging_every_step_equals_averaging_the_gradients(cluster):
  averaged = _train_replicas(
      cluster, 3, seeds=(0, 1),
      update=update.UpdateOptions(replica_averaging_steps=1))
  reduced = _train_replicas(cluster, 3, seeds=(0, 1))
  for name, value in reduced[0].end.items():
    np.testing.assert_allclose(averaged[0].end[name], value, atol=1e-5)
    np.testing.assert_allclose(averaged[1].end[name], value, atol=1e-5)


def test_averaging_every_k_steps_syncs_only_then(cluster):
  chief_run, other_run = _train_replicas(
      cluster, 10, seeds=(0, 1),
      update=update.UpdateOptions(replica_averaging_steps=5))
  for step, (chief, other) in enumerate(
      zip(chief_run.history, other_run.history), start=1):
    same = all(np.array_equal(chief[n], other[n]) for n in chief)
    # Global step 5 and 10 end with the average; the others do not.
    assert same == (step % 5 == 0), step


def test_averaging_needs_all_reduce_replicas():
  x, y = data()
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match='replica_averaging_steps=2 needs '
                       'all-reduce replicas'):
      model_deploy.deploy(
          model_deploy.DeploymentConfig(num_replicas=2, num_ps_tasks=1),
          _model_fn([(x, y)]), optimizer=tf.train.GradientDescentOptimizer(
              0.1), update=update.UpdateOptions(replica_averaging_steps=2))



def _bn_model_fn(examples, clones):
  """make_model_fn of a conv + batch-norm net: clone i gets the i-th of
  `clones` slices of `examples` (images, labels)."""
  return test_sync_batch_norm.model_fn_over_slices(*examples, clones)


@pytest.mark.parametrize('sync', [True, False])
def test_sync_batch_norm_spans_every_clone_of_every_replica(sync):
  cluster = Cluster(2, separate_cpu_devices=True)
  images, labels = test_sync_batch_norm.data(4 * BATCH)
  half = 2 * BATCH

  def replica(index, server):
    examples = (images[index * half:(index + 1) * half],
                labels[index * half:(index + 1) * half])
    return train(cluster.deployment(index), examples, 3,
                 master=server.target,
                 make_model_fn=lambda e: _bn_model_fn(e, 2),
                 session_kwargs=dict(device_filters=[
                     '/job:worker/task:%d' % index]),
                 sync_batch_norm=sync)

  replicas = cluster.run(replica)
  one_device = train(model_deploy.DeploymentConfig(clone_on_cpu=True),
                     (images, labels), 3,
                     make_model_fn=lambda e: _bn_model_fn(e, 1))
  moving_variance = 'conv/BatchNorm/moving_variance'
  assert moving_variance in one_device.end
  if not sync:
    # Each clone normalised its own 4 examples: the moving variance (and
    # with it everything downstream) is not the whole batch's.
    assert np.abs(replicas[0].end[moving_variance] -
                  one_device.end[moving_variance]).max() > 1e-2
    return
  for replica_run in replicas:
    for name, value in one_device.end.items():
      np.testing.assert_allclose(replica_run.end[name], value, atol=1e-5,
                                 rtol=1e-5, err_msg=name)
  np.testing.assert_allclose(
      np.mean([r.losses for r in replicas], axis=0), one_device.losses,
      atol=1e-5)


def _sync_batch_norm_groups(config):
  """{device: group size} of the sync batch norm collectives of `config`."""
  images, labels = test_sync_batch_norm.data(2 * BATCH)
  with tf.Graph().as_default():
    model_deploy.deploy(config, _bn_model_fn((images, labels),
                                             config.num_clones),
                        optimizer=tf.train.GradientDescentOptimizer(0.1),
                        sync_batch_norm=True)
    return {op.device: int(tf.get_static_value(op.inputs[1]))
            for op in tf.get_default_graph().get_operations()
            if op.type == 'CollectiveReduceV2' and 'sync_moments' in op.name}


def test_sync_batch_norm_group_is_every_clone_of_every_all_reduce_replica():
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
      replica_id=1, num_replicas=3)
  assert _sync_batch_norm_groups(config) == {
      '/job:worker/task:1/device:CPU:0': 6,
      '/job:worker/task:1/device:CPU:1': 6}


def test_sync_batch_norm_with_ps_replicas_spans_each_workers_clones():
  # ps workers do not step together, so their batches are not one batch.
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, separate_cpu_devices=True,
      replica_id=1, num_replicas=3, num_ps_tasks=1)
  assert _sync_batch_norm_groups(config) == {
      '/job:worker/task:1/device:CPU:0': 2,
      '/job:worker/task:1/device:CPU:1': 2}


def _embedding_model_fn(batches):
  """model_fn whose embedding gets a sparse gradient (tf.IndexedSlices)."""
  batches = iter(batches)

  def model_fn():
    x, y = next(batches)
    ids = tf.convert_to_tensor((np.abs(x[:, :2]) * 3).astype(np.int32) % 7)
    embedding = tf.get_variable('embedding', [7, 5])
    rows = tf.reshape(tf.gather(embedding, ids), [len(x), 10])
    logits = slim.fully_connected(rows, CLASSES, activation_fn=None,
                                  scope='logits')
    tf.losses.sparse_softmax_cross_entropy(tf.convert_to_tensor(y), logits)

  return model_fn


def test_sparse_gradients_are_all_reduced_dense(cluster):
  replicas = _train_replicas(cluster, steps=3,
                             make_model_fn=_embedding_model_fn)
  one_device = train_one_device(steps=3, start=replicas[0].start,
                                make_model_fn=_embedding_model_fn)
  assert set(one_device.end) == {'embedding', 'logits/weights',
                                 'logits/biases'}
  for replica in replicas:
    for name, value in one_device.end.items():
      np.testing.assert_allclose(replica.end[name], value, atol=1e-5)
  with tf.Graph().as_default():
    x, y = data()
    model_deploy.deploy(cluster.deployment(0, num_clones=1),
                        _embedding_model_fn([(x, y)]),
                        optimizer=tf.train.GradientDescentOptimizer(0.1))
    graph = tf.get_default_graph()
    gathers = [op for op in graph.get_operations()
               if op.type in ('GatherV2', 'ResourceGather')]
    reduces = [op for op in graph.get_operations()
               if op.type == 'CollectiveReduceV2']
  assert gathers
  # The whole 7 x 5 embedding travels, beside the 10 x 3 + 3 logits layer.
  assert [op.inputs[0].shape.as_list() for op in reduces] == [
      [7 * 5 + 10 * 3 + 3]]


def test_an_overflow_on_one_replica_skips_the_update_on_every_replica(
    cluster):
  x, y = data()
  x[len(x) // 2] = np.inf  # The first example of replica 1's half.

  def replica(index, server, config=None):
    config = config or cluster.deployment(index)
    with tf.Graph().as_default():
      # A linear hidden layer carries the inf to the loss on every CPU: a
      # ReLU gives 0 for the NaN that inf x weights sums to where oneDNN's
      # kernels run (AVX-512 CPUs), and the loss came out finite there.
      model = model_deploy.deploy(
          config, _model_fn(replica_batches(x, y, index, 2),
                            hidden_activation=None),
          optimizer=tf.train.GradientDescentOptimizer(0.1),
          precision='mixed_float16')
      scale = [v for v in tf.global_variables()
               if v.op.name == 'loss_scale/scale'][0]
      weights = _weights()
      master = server.target if server else ''
      session_config = model_deploy.session_config(
          config, device_filters=(['/job:worker/task:%d' % index]
                                  if server else None))
      with tf.Session(master, config=session_config) as session:
        session.run(tf.global_variables_initializer())
        session.run(model_deploy.broadcast_variables(config))
        start = session.run(weights)
        losses = [session.run(model.train_op) for _ in range(2)]
        return (start, session.run(weights), session.run(scale),
                session.run(tf.train.get_global_step()), losses)

  for index, (start, end, scale, step, losses) in enumerate(
      cluster.run(replica)):
    # Replica 0's own gradients were finite; the all-reduced ones were not.
    assert np.isfinite(losses[0]) == (index == 0)
    for name in start:
      np.testing.assert_array_equal(end[name], start[name])
    assert step == 0
    assert scale == 2.0 ** 13  # Halved twice from 2^15.
  # Alone, replica 0 would have applied its finite update.
  start, end, scale, step, _ = replica(0, None, model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True))
  assert not np.array_equal(end['logits/weights'], start['logits/weights'])
  assert (scale, step) == (2.0 ** 15, 2)


def _all_reduced(cluster, values, compression):
  """Each worker's `values[index]` through all_reduce_mean_gradients with
  `compression`; (each worker's result, the dtypes the collectives sent)."""

  def replica(index, server):
    with tf.Graph().as_default() as graph:
      with tf.device('/job:worker/task:%d/device:CPU:0' % index):
        variable = tf.Variable(tf.zeros_like(values[index]))
        (mean, _), = collectives.all_reduce_mean_gradients(
            [(tf.constant(values[index]), variable)],
            update.replica_group(cluster.deployment(index),
                                 collectives.REPLICA_GRADIENTS_GROUP_KEY),
            member=0, wire_dtype=collectives.WIRE_DTYPES[compression])
      sent = [op.get_attr('T') for op in graph.get_operations()
              if op.type == 'CollectiveReduceV2']
      with tf.Session(server.target, config=tf.ConfigProto(
          device_filters=['/job:worker/task:%d' % index])) as session:
        return session.run(mean), sent

  return cluster.run(replica)


@pytest.mark.parametrize('compression, wire', [
    ('fp16', tf.float16), ('bf16', tf.bfloat16)])
def test_compressed_gradients_are_the_16_bit_sum_of_the_halves(
    compression, wire):
  rng = np.random.RandomState(3)
  values = [rng.randn(1000).astype(np.float32) * 10 ** rng.uniform(
      -3, 3, 1000).astype(np.float32) for _ in range(2)]
  narrow = wire.as_numpy_dtype
  # Each worker halves its own, rounds it to 16 bits; the sum is rounded.
  expected = (narrow(values[0] / 2) + narrow(values[1] / 2)).astype(
      np.float32)
  exact = (values[0] + values[1]) / 2
  for mean, sent in _all_reduced(Cluster(2), values, compression):
    assert sent == [wire]
    np.testing.assert_array_equal(mean, expected)
    # Rounded, not exact: within three 16-bit roundings (of the halves and
    # of their sum; fp16 keeps 11 significant bits, bf16 8) of the halves'
    # magnitudes.
    error = np.abs(mean - exact) / ((np.abs(values[0]) + np.abs(values[1]))
                                    / 2)
    assert 0 < error.max() <= 3 * 2.0 ** -{'fp16': 11, 'bf16': 8}[
        compression]


def test_without_compression_the_gradients_are_sent_and_averaged_exactly(
    cluster):
  values = [np.float32([0.1, 1e-4, 3e4]), np.float32([0.7, 2e-4, -1e4])]
  for mean, sent in _all_reduced(cluster, values, 'none'):
    assert sent == [tf.float32]
    np.testing.assert_array_equal(mean, (values[0] + values[1]) * 0.5)


def test_compressed_training_stays_within_16_bit_rounding_of_exact(cluster):
  exact = _train_replicas(cluster, 3)
  compressed = _train_replicas(
      Cluster(2), 3, update=update.UpdateOptions(gradient_compression='fp16'))
  # The replicas apply the same compressed update.
  for name, value in compressed[0].end.items():
    np.testing.assert_array_equal(compressed[1].end[name], value)
  differences = [np.abs(compressed[0].end[n] - exact[0].end[n]).max()
                 for n in exact[0].end]
  assert 0 < max(differences) < 1e-3
  np.testing.assert_allclose(compressed[0].losses, exact[0].losses,
                             atol=1e-3)


def test_compression_needs_all_reduce_replicas():
  with pytest.raises(ValueError, match="gradient_compression='fp16' "
                     'compresses the all-reduce between replicas'):
    update.UpdateOptions(gradient_compression='fp16').check_deployment(
        model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True))
  with pytest.raises(ValueError, match="must be one of 'none', 'fp16', "
                     "'bf16', got 'int8'"):
    update.UpdateOptions(gradient_compression='int8')
