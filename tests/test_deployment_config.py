"""DeploymentConfig: devices, scopes, ps placement and validation."""

import re
import types

import pytest

from clusters import cluster
from deployment import model_deploy
from tf2_compat.slim_compat import tf

DeploymentConfig = model_deploy.DeploymentConfig


def test_defaults_are_upstream_defaults():
  config = DeploymentConfig()
  assert (config.num_clones, config.clone_on_cpu, config.replica_id,
          config.num_replicas, config.num_ps_tasks) == (1, False, 0, 1, 0)
  assert config.ps_strategy == 'round_robin'


@pytest.mark.parametrize('attribute', [
    'num_clones', 'clone_on_cpu', 'replica_id', 'num_replicas',
    'num_ps_tasks', 'ps_device', 'worker_device'])
def test_properties_are_read_only(attribute):
  config = DeploymentConfig()
  with pytest.raises(AttributeError):
    setattr(config, attribute, 3)


def test_one_machine_puts_clone_i_on_gpu_i():
  config = DeploymentConfig(num_clones=3)
  assert [config.clone_device(i) for i in range(3)] == [
      '/device:GPU:0', '/device:GPU:1', '/device:GPU:2']


def test_one_machine_clone_on_cpu():
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  assert [config.clone_device(i) for i in range(2)] == [
      '/device:CPU:0', '/device:CPU:0']


def test_one_machine_inputs_optimizer_variables_on_cpu():
  config = DeploymentConfig(num_clones=2)
  assert config.inputs_device() == '/device:CPU:0'
  assert config.optimizer_device() == '/device:CPU:0'
  assert config.variables_device() == '/device:CPU:0'
  assert config.caching_device() is None


def test_clone_scope_is_empty_for_one_clone():
  assert DeploymentConfig(num_clones=1).clone_scope(0) == ''


def test_clone_scopes_for_several_clones():
  config = DeploymentConfig(num_clones=3)
  assert [config.clone_scope(i) for i in range(3)] == [
      'clone_0', 'clone_1', 'clone_2']


def test_ps_tasks_prefix_worker_devices_with_worker_job():
  config = DeploymentConfig(num_clones=2, num_ps_tasks=1)
  assert config.clone_device(1) == '/job:worker/device:GPU:1'
  assert config.inputs_device() == '/job:worker/device:CPU:0'
  assert config.optimizer_device() == '/job:worker/device:CPU:0'
  assert DeploymentConfig(num_ps_tasks=1, clone_on_cpu=True).clone_device(
      0) == '/job:worker/device:CPU:0'


def test_custom_job_names():
  config = DeploymentConfig(num_ps_tasks=1, worker_job_name='trainer',
                            ps_job_name='params')
  assert config.clone_device(0) == '/job:trainer/device:GPU:0'
  assert config.ps_device == '/job:params'


def test_several_replicas_name_the_worker_task():
  # Upstream omitted the task, so every replica resolved to one machine.
  config = DeploymentConfig(num_clones=2, replica_id=2, num_replicas=3,
                            num_ps_tasks=2)
  assert config.clone_device(1) == '/job:worker/task:2/device:GPU:1'
  assert config.inputs_device() == '/job:worker/task:2/device:CPU:0'
  assert config.optimizer_device() == '/job:worker/task:2/device:CPU:0'


def test_for_task_takes_the_replica_and_counts_from_a_cluster_task():
  task = cluster.ClusterTask(['127.0.0.1:2220'],
                             ['127.0.0.1:2221', '127.0.0.1:2222'], 'worker', 1)
  config = DeploymentConfig.for_task(task, num_clones=2, clone_on_cpu=True,
                                     separate_cpu_devices=True)
  assert (config.replica_id, config.num_replicas, config.num_ps_tasks) == (
      1, 2, 1)
  assert config.clone_devices(1) == ['/job:worker/task:1/device:CPU:1']
  assert config.inputs_device() == '/job:worker/task:1/device:CPU:0'
  assert config.ps_device == '/job:ps' and not config.is_chief


def test_for_task_reads_only_the_documented_attributes():
  # All-reduce workers: no ps task, so variables stay on the worker.
  task = types.SimpleNamespace(job_name='worker', task_index=0, num_workers=3,
                               num_ps_tasks=0)
  config = DeploymentConfig.for_task(task, clone_on_cpu=True)
  assert config.all_reduce_replicas and config.is_chief
  assert config.variables_device() == '/job:worker/task:0/device:CPU:0'
  assert config.clone_device(0) == '/job:worker/task:0/device:CPU:0'


def test_for_task_refuses_a_ps_task():
  task = cluster.ClusterTask(['127.0.0.1:2220'], ['127.0.0.1:2221'], 'ps', 0)
  with pytest.raises(ValueError, match=re.escape(
      "for_task needs a task of the 'worker' job, got ps 0: a ps task "
      "serves variables and deploys no clones")):
    DeploymentConfig.for_task(task)


def test_for_task_refuses_what_the_task_decides():
  task = types.SimpleNamespace(job_name='worker', task_index=1, num_workers=2,
                               num_ps_tasks=1)
  with pytest.raises(TypeError, match=re.escape(
      'for_task takes replica_id, num_replicas, num_ps_tasks from the task; '
      'drop num_replicas=4')):
    DeploymentConfig.for_task(task, num_replicas=4)


def _make_variables(graph, device_fn, use_resource, count):
  with graph.as_default(), tf.device(device_fn):
    return [tf.Variable(tf.zeros([i + 1]), name='v%d' % i,
                        use_resource=use_resource) for i in range(count)]


@pytest.mark.parametrize('use_resource,op_type', [
    (True, 'VarHandleOp'), (False, 'VariableV2')])
def test_variables_round_robin_over_ps_tasks(use_resource, op_type):
  config = DeploymentConfig(num_ps_tasks=3)
  graph = tf.Graph()
  variables = _make_variables(graph, config.variables_device(),
                              use_resource, 7)
  assert {v.op.type for v in variables} == {op_type}
  assert [v.op.device for v in variables] == [
      '/job:ps/task:%d/device:CPU:0' % (i % 3) for i in range(7)]


def test_non_variable_ops_under_variables_device_get_no_device():
  config = DeploymentConfig(num_ps_tasks=2)
  with tf.Graph().as_default(), tf.device(config.variables_device()):
    constant = tf.constant(1.0)
    total = constant + 2.0
  assert constant.op.device == ''
  assert total.op.device == ''


def test_explicitly_placed_variable_keeps_its_device():
  config = DeploymentConfig(num_ps_tasks=2)
  with tf.Graph().as_default(), tf.device(config.variables_device()):
    with tf.device('/job:ps/task:1/device:CPU:0'):
      pinned = tf.Variable(1.0, name='pinned')
    free = tf.Variable(1.0, name='free')
  assert pinned.op.device == '/job:ps/task:1/device:CPU:0'
  assert free.op.device == '/job:ps/task:0/device:CPU:0'


def test_by_size_strategy_balances_bytes():
  # Sizes 100, 1, 1, 1, 50 (floats): round-robin over 2 tasks puts 100+1+50
  # on task 0; greedy by bytes puts 100 alone on task 0.
  config = DeploymentConfig(num_ps_tasks=2, ps_strategy='by_size')
  chooser = config.variables_device()
  with tf.Graph().as_default(), tf.device(chooser):
    variables = [tf.Variable(tf.zeros([n]), name='v%d' % i)
                 for i, n in enumerate([100, 1, 1, 1, 50])]
  assert [v.op.device[:14] for v in variables] == [
      '/job:ps/task:0', '/job:ps/task:1', '/job:ps/task:1', '/job:ps/task:1',
      '/job:ps/task:1']
  assert chooser.bytes_per_task == [400, 212]
  assert chooser.variables_per_task == [['v0'], ['v1', 'v2', 'v3', 'v4']]


def test_caching_device_places_reads_on_the_reading_ops_device():
  config = DeploymentConfig(num_ps_tasks=1)
  caching = config.caching_device()
  with tf.Graph().as_default():
    with tf.device('/job:worker/device:GPU:0'):
      op = tf.constant(1.0).op
  assert caching(op) == '/job:worker/device:GPU:0'


@pytest.mark.parametrize('kwargs,message', [
    (dict(num_clones=0), 'num_clones must be >= 1, got 0'),
    (dict(num_replicas=0), 'num_replicas must be >= 1, got 0'),
    (dict(num_ps_tasks=-1), 'num_ps_tasks must be >= 0, got -1'),
    (dict(replica_id=-1), 'replica_id must be >= 0, got -1'),
    (dict(replica_id=2, num_replicas=2, num_ps_tasks=1),
     r'replica_id must be in \[0, num_replicas=2\), got 2'),
    (dict(num_replicas=2, worker_job_name=''),
     "worker_job_name must be a non-empty string .* got ''"),
    (dict(num_ps_tasks=1, worker_job_name=''),
     "worker_job_name must be a non-empty string .* got ''"),
    (dict(num_ps_tasks=1, ps_job_name=''),
     "ps_job_name must be a non-empty string .* got ''"),
    (dict(ps_strategy='random'), "ps_strategy must be one of .* got 'random'"),
])
def test_invalid_values_are_named(kwargs, message):
  with pytest.raises(ValueError, match=message):
    DeploymentConfig(**kwargs)


@pytest.mark.parametrize('value', [1.5, '2', True])
def test_non_integer_counts_are_rejected(value):
  with pytest.raises(TypeError, match='num_clones must be an integer'):
    DeploymentConfig(num_clones=value)


def test_empty_job_names_are_fine_without_ps_tasks():
  config = DeploymentConfig(worker_job_name='', ps_job_name='')
  assert config.clone_device(0) == '/device:GPU:0'


@pytest.mark.parametrize('index', [-1, 2, 5])
def test_clone_index_out_of_range_is_rejected(index):
  config = DeploymentConfig(num_clones=2)
  with pytest.raises(ValueError, match=r'clone_index must be in \[0, '
                     r'num_clones=2\), got %d' % index):
    config.clone_device(index)
  with pytest.raises(ValueError, match='clone_index'):
    config.clone_scope(index)
