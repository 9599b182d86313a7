"""clusters.cluster, clusters.addresses and clusters.replica_session,
without other processes."""

import json

import pytest
from tensorflow.python.training import session_manager

from clusters import addresses
from clusters import cluster
from clusters import replica_session
from tf2_compat.slim_compat import tf
from tests.fake_clock import FakeClock

PS = ['127.0.0.1:2220', '127.0.0.1:2221']
WORKERS = ['127.0.0.1:2222', '127.0.0.1:2223', '127.0.0.1:2224']


def _tf_config(task_type='worker', index=1, ps=None, workers=None):
  return json.dumps({'cluster': {'ps': PS if ps is None else ps,
                                 'worker': WORKERS if workers is None
                                           else workers},
                     'task': {'type': task_type, 'index': index}})


def test_tf_config_describes_task_and_cluster():
  task = cluster.from_tf_config(_tf_config('worker', 1))
  assert (task.job_name, task.task_index) == ('worker', 1)
  assert task.ps_hosts == tuple(PS)
  assert task.worker_hosts == tuple(WORKERS)
  assert (task.num_ps_tasks, task.num_workers) == (2, 3)
  assert task.address == '127.0.0.1:2223'
  assert task.cluster_spec.as_dict() == {'ps': PS, 'worker': WORKERS}
  assert task.source == 'TF_CONFIG'


@pytest.mark.parametrize('text', [None, '', '  ', '{}',
                                  '{"cluster": {}, "task": {}}'])
def test_unset_or_empty_tf_config_means_no_cluster(text):
  assert cluster.from_tf_config(text) is None


@pytest.mark.parametrize('job_name,index,is_chief', [
    ('worker', 0, True), ('worker', 2, False), ('ps', 0, False)])
def test_only_worker_0_is_chief(job_name, index, is_chief):
  task = cluster.from_tf_config(_tf_config(job_name, index))
  assert task.is_chief is is_chief


@pytest.mark.parametrize('job_name,index,is_ps', [
    ('ps', 0, True), ('ps', 1, True), ('worker', 0, False)])
def test_only_ps_tasks_are_ps(job_name, index, is_ps):
  task = cluster.from_tf_config(_tf_config(job_name, index))
  assert task.is_ps is is_ps


def test_device_filters_are_ps_job_and_own_worker_task():
  task = cluster.from_tf_config(_tf_config('worker', 2))
  assert task.device_filters == ['/job:ps', '/job:worker/task:2']


def test_workers_without_ps_all_reduce_and_see_only_themselves():
  task = cluster.from_tf_config(_tf_config('worker', 1, ps=[]))
  assert task.all_reduce and task.num_workers == 3
  assert task.device_filters == ['/job:worker/task:1']
  assert not cluster.from_tf_config(_tf_config('worker', 1)).all_reduce


def test_single_worker_without_ps_is_a_cluster_of_one_job():
  task = cluster.from_tf_config(_tf_config('worker', 0, ps=[],
                                           workers=WORKERS[:1]))
  assert task.cluster_spec.as_dict() == {'worker': WORKERS[:1]}
  assert task.num_ps_tasks == 0


@pytest.mark.parametrize('text,message', [
    ('{"cluster": {"ps": ["127.0.0.1:1"]', 'TF_CONFIG is not valid JSON'),
    ('["worker"]', 'TF_CONFIG must be a JSON object'),
    (json.dumps({'task': {'type': 'worker', 'index': 0}}),
     'TF_CONFIG has no "cluster" object'),
    (json.dumps({'cluster': {'ps': PS, 'worker': WORKERS}}),
     'TF_CONFIG needs "task"'),
    (_tf_config('worker', 3), r'TF_CONFIG: task index 3 is out of range: the '
     r'worker job has 3 task\(s\), indices 0..2'),
    (_tf_config('ps', -1), 'task index -1 is out of range'),
    (_tf_config('worker', '1'), "task index '1' is not an integer"),
    (_tf_config('evaluator', 0),
     "TF_CONFIG: job name 'evaluator' is neither 'ps' nor 'worker'"),
    (json.dumps({'cluster': {'chief': ['127.0.0.1:1'], 'worker': WORKERS},
                 'task': {'type': 'chief', 'index': 0}}),
     'TF_CONFIG cluster has job\\(s\\) "chief"; only "ps" and "worker"'),
    (json.dumps({'cluster': {'ps': '127.0.0.1:1', 'worker': WORKERS},
                 'task': {'type': 'ps', 'index': 0}}),
     'TF_CONFIG cluster "ps" must be a list'),
    (_tf_config(ps=['127.0.0.1']),
     "address '127.0.0.1' is not \"host:port\""),
    (_tf_config(ps=['127.0.0.1:70000']), "address '127.0.0.1:70000'"),
    (_tf_config(ps=[WORKERS[0]]),
     'address 127.0.0.1:2222 is given to more than one task'),
    (_tf_config(workers=[], task_type='ps', index=0),
     'the cluster has no worker'),
])
def test_bad_tf_config_is_a_clear_error(text, message):
  with pytest.raises(ValueError, match=message):
    cluster.from_tf_config(text)


@pytest.mark.parametrize('address,host_and_port', [
    ('127.0.0.1:2222', ('127.0.0.1', 2222)),
    ('ps0.example.com:1', ('ps0.example.com', 1)),
    ('[::1]:65535', ('::1', 65535)),
])
def test_an_address_splits_into_host_and_port(address, host_and_port):
  assert addresses.split_address(address) == host_and_port


@pytest.mark.parametrize('address,message', [
    (2222, 'address 2222 is not a string "host:port"'),
    ('127.0.0.1', "address '127.0.0.1' is not \"host:port\""),
    (':2222', "address ':2222' is not"),
    ('host:0', "address 'host:0' is not .* a port in 1..65535"),
    ('host:65536', "address 'host:65536' is not"),
    ('host:http', "address 'host:http' is not"),
])
def test_a_malformed_address_is_named(address, message):
  with pytest.raises(ValueError, match=message):
    addresses.split_address(address)


def test_flags_describe_task_and_cluster():
  task = cluster.from_flags(','.join(PS), ','.join(WORKERS), 'ps', 1)
  assert (task.job_name, task.task_index, task.address) == (
      'ps', 1, '127.0.0.1:2221')
  assert task.worker_hosts == tuple(WORKERS)


def test_no_cluster_flags_means_no_cluster():
  assert cluster.from_flags('', '', '', 0) is None


@pytest.mark.parametrize('ps_hosts,worker_hosts,job_name,task_index,message', [
    (PS[0], WORKERS[0], '', 0, '--job_name is required'),
    (PS[0], '', 'worker', 0, '--worker_hosts is required with '
     '--job_name=worker'),
    (PS[0], WORKERS[0], 'chief', 0,
     "--job_name=chief is neither 'ps' nor 'worker'"),
    (PS[0], WORKERS[0] + ',', 'worker', 0,
     '--worker_hosts=127.0.0.1:2222, has an empty entry'),
    (PS[0], ','.join(WORKERS), 'worker', 5, 'task index 5 is out of range'),
])
def test_bad_cluster_flags_are_clear_errors(ps_hosts, worker_hosts, job_name,
                                            task_index, message):
  with pytest.raises(ValueError, match=message):
    cluster.from_flags(ps_hosts, worker_hosts, job_name, task_index)


def test_flags_and_tf_config_that_agree_are_accepted():
  environ = {'TF_CONFIG': _tf_config('worker', 1)}
  task = cluster.from_flags_and_env(','.join(PS), ','.join(WORKERS), 'worker',
                                    1, environ=environ)
  assert (task.ps_hosts, task.worker_hosts, task.job_name,
          task.task_index) == (
              ('127.0.0.1:2220', '127.0.0.1:2221'),
              ('127.0.0.1:2222', '127.0.0.1:2223', '127.0.0.1:2224'),
              'worker', 1)


def test_flags_and_tf_config_that_disagree_are_an_error():
  environ = {'TF_CONFIG': _tf_config('worker', 1)}
  with pytest.raises(ValueError, match='the flags describe .* but TF_CONFIG '
                     'describes'):
    cluster.from_flags_and_env(','.join(PS), ','.join(WORKERS), 'worker', 2,
                               environ=environ)


def test_task_flag_must_match_tf_config_index():
  environ = {'TF_CONFIG': _tf_config('worker', 1)}
  with pytest.raises(ValueError, match='--task=0 but TF_CONFIG says task '
                     'index 1'):
    cluster.from_flags_and_env('', '', '', 0, environ=environ)


@pytest.mark.parametrize('task_flag', [None, 1])
def test_tf_config_alone_gives_the_task(task_flag):
  environ = {'TF_CONFIG': _tf_config('worker', 1)}
  task = cluster.from_flags_and_env('', '', '', task_flag, environ=environ)
  assert (task.job_name, task.task_index, task.address, task.source) == (
      'worker', 1, '127.0.0.1:2223', 'TF_CONFIG')


def test_no_flags_and_no_tf_config_means_no_cluster():
  assert cluster.from_flags_and_env('', '', '', None, environ={}) is None


def test_placement_report_hook_logs_at_begin(graph):
  del graph
  for task in range(2):
    with tf.device('/job:ps/task:%d' % task):
      tf.get_variable('v%d' % task, [4])
  lines = []
  hook = replica_session.PlacementReportHook(
      2, 'round_robin', log_fn=lambda fmt, *args: lines.append(fmt % args))
  hook.begin()
  assert lines == ['variables on 2 ps task(s), round_robin placement:',
                   '  ps task 0: 1 variables, 16 bytes (0.0 MiB)',
                   '  ps task 1: 1 variables, 16 bytes (0.0 MiB)']


def _sync_optimizer(total_num_replicas):
  weight = tf.get_variable('w', [], initializer=tf.ones_initializer())
  optimizer = tf.train.SyncReplicasOptimizer(
      tf.train.GradientDescentOptimizer(0.1),
      replicas_to_aggregate=min(2, total_num_replicas),
      total_num_replicas=total_num_replicas)
  optimizer.apply_gradients([(tf.constant(1.0), weight)],
                            global_step=tf.train.get_or_create_global_step())
  return optimizer


# Every worker, chief or not, releases tokens when it stops: the one that
# stops last may otherwise wait forever for a token nobody makes.
@pytest.mark.parametrize('is_chief,num_workers,tokens', [
    (True, 3, 4), (True, 1, 0), (False, 3, 4)])
def test_every_worker_releases_two_tokens_per_other_worker_at_end(
    graph, is_chief, num_workers, tokens):
  optimizer = _sync_optimizer(num_workers)
  hooks = replica_session.sync_replicas_hooks(optimizer, is_chief,
                                              num_workers)
  for hook in hooks:
    hook.begin()
  queue = graph.get_operation_by_name('sync_token_q')
  size = tf.raw_ops.QueueSizeV2(handle=queue.outputs[0])
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    # Used here so that TensorFlow does not warn that it never was.
    session.run(optimizer.ready_for_local_init_op)
    for hook in hooks:
      hook.end(session)
    assert session.run(size) == tokens


def test_non_chief_wait_must_be_positive():
  with pytest.raises(ValueError, match='wait_secs must be > 0, got 0'):
    replica_session.NonChiefSessionCreator(None, '', None, 0)


@pytest.mark.parametrize('wait_secs,max_wait_secs,sleeps', [
    # Sleeps while a check after the sleep would still be before the limit.
    (2, 7, [2, 2, 2]),
    (2, 8, [2, 2, 2, 2]),
    # TensorFlow's own 30 s period would not check again within 7 s.
    (30, 7, []),
])
def test_non_chief_polls_at_the_given_period(graph, monkeypatch, wait_secs,
                                             max_wait_secs, sleeps):
  """Checks every wait_secs until max_wait_secs, not every 30 s."""
  del graph
  tf.get_variable('never_initialised', [])
  clock = FakeClock(start=0.0)
  # SessionManager.wait_for_session times and sleeps through this module.
  monkeypatch.setattr(session_manager, 'time', clock)
  creator = replica_session.NonChiefSessionCreator(
      tf.train.Scaffold(), '', None, wait_secs=wait_secs,
      max_wait_secs=max_wait_secs)
  with pytest.raises(tf.errors.DeadlineExceededError,
                     match='not ready after waiting %d secs' % max_wait_secs):
    creator.create_session()
  assert clock.sleeps == sleeps


@pytest.mark.parametrize('is_chief,non_chief_wait_secs', [
    (True, 1),  # The chief never waits, whatever the period.
    (False, None),  # No period given: TensorFlow's 30 s.
])
def test_session_is_tensorflows_own_unless_a_non_chief_period_is_given(
    monkeypatch, is_chief, non_chief_wait_secs):
  calls = []

  def monitored_training_session(**kwargs):
    calls.append(kwargs)
    return 'the session of tf.train.MonitoredTrainingSession'

  monkeypatch.setattr(tf.train, 'MonitoredTrainingSession',
                      monitored_training_session)
  session = replica_session.monitored_training_session(
      non_chief_wait_secs=non_chief_wait_secs, is_chief=is_chief,
      master='grpc://127.0.0.1:2222', max_wait_secs=5)
  assert session == 'the session of tf.train.MonitoredTrainingSession'
  assert calls == [{'is_chief': is_chief, 'master': 'grpc://127.0.0.1:2222',
                    'max_wait_secs': 5}]


def test_non_chief_with_a_period_waits_through_non_chief_session_creator(
    graph, monkeypatch):
  del graph
  # Not TensorFlow's session: calling it would raise.
  monkeypatch.setattr(tf.train, 'MonitoredTrainingSession', None)
  created = []

  class RecordingCreator(tf.train.SessionCreator):

    def __init__(self, scaffold, master, config, wait_secs, max_wait_secs):
      created.append((master, config, wait_secs, max_wait_secs))

    def create_session(self):
      return tf.Session()

  monkeypatch.setattr(replica_session, 'NonChiefSessionCreator',
                      RecordingCreator)
  with replica_session.monitored_training_session(
      non_chief_wait_secs=3, is_chief=False, master='', max_wait_secs=9,
      config=None) as session:
    assert session.run(tf.constant(7)) == 7
  assert created == [('', None, 3, 9)]
