"""clusters.slurm and --slurm: each task's role from a srun job step.

No Slurm here: the variables srun sets are set by hand, as srun would set
them for the task under test (tests/system/test_slurm.py runs real srun).
"""

import os
import re
import signal
import socket
import subprocess
import sys
import threading

import pytest

from clusters import servers
from clusters import slurm
from tests.script_runner import REPO
from tests.script_runner import run_script
from tests.script_runner import script_env
from tests.test_run_config import digits
from training import run_config
from training import slurm_eval
from training.errors import UsageError

SBATCH = os.path.join(REPO, 'clusters', 'slurm_two_nodes.sbatch')


def srun_env(num_tasks, rank, nodes='localhost', tasks_per_node=None,
             node='localhost', local_id=None):
  """What srun sets for task `rank` of a step (the variables read here)."""
  return {
      'SLURM_PROCID': str(rank),
      'SLURM_STEP_NUM_TASKS': str(num_tasks),
      'SLURM_STEP_NODELIST': nodes,
      'SLURM_STEP_TASKS_PER_NODE': tasks_per_node or str(num_tasks),
      'SLURMD_NODENAME': node,
      'SLURM_LOCALID': str(rank if local_id is None else local_id),
  }


@pytest.fixture
def in_step(monkeypatch):
  """Makes this process task `rank` of a srun step: in_step(3, 1)."""
  for name in list(os.environ):
    if name.startswith('SLURM'):
      monkeypatch.delenv(name)

  def enter(num_tasks, rank, **where):
    for name, value in srun_env(num_tasks, rank, **where).items():
      monkeypatch.setenv(name, value)
  return enter


def config_of(digits_dir, *argv):
  return run_config.from_flags(digits(digits_dir, '--slurm', *argv), {})


# srun -n 3 on one node, --num_ps_tasks=1: (job, index, port, chief).
ONE_PS_TWO_WORKERS = [('ps', 0, 8888, False), ('worker', 0, 8889, True),
                      ('worker', 1, 8890, False)]


@pytest.mark.parametrize('rank', range(3))
def test_ps_tasks_come_first_and_the_first_worker_is_the_chief(
    digits_dir, in_step, rank):
  in_step(3, rank)
  config = config_of(digits_dir, '--num_ps_tasks=1')
  job, index, port, chief = ONE_PS_TWO_WORKERS[rank]
  assert (config.task.job_name, config.task.task_index) == (job, index)
  assert config.task.address == 'localhost:%d' % port
  assert config.task.ps_hosts == ('localhost:8888',)
  assert config.task.worker_hosts == ('localhost:8889', 'localhost:8890')
  assert config.is_ps == (job == 'ps') and config.is_chief == chief
  assert config.num_workers == 2
  assert config.srun_step
  assert config.task.source == ('Slurm (srun task %d of 3, '
                                '--slurm_port_base=8888)' % rank)
  if job == 'worker':
    assert config.deployment.replica_id == index
    assert config.deployment.num_replicas == 2
    assert config.deployment.num_ps_tasks == 1


@pytest.mark.parametrize('rank', range(2))
def test_without_ps_tasks_the_workers_all_reduce(digits_dir, in_step, rank):
  in_step(2, rank)
  config = config_of(digits_dir)
  assert config.task.job_name == 'worker' and config.task.task_index == rank
  assert config.task.ps_hosts == ()
  assert config.task.all_reduce and config.deployment.all_reduce_replicas
  assert config.is_chief == (rank == 0)


# srun -n 4 on nodes n1 and n2, two tasks each, --num_ps_tasks=2:
# (rank, node, local id, job, index).
TWO_NODES = [(0, 'n1', 0, 'ps', 0), (1, 'n1', 1, 'ps', 1),
             (2, 'n2', 0, 'worker', 0), (3, 'n2', 1, 'worker', 1)]


@pytest.mark.parametrize('rank, node, local_id, job, index', TWO_NODES)
def test_ports_count_up_from_the_port_base_on_each_node(
    in_step, rank, node, local_id, job, index):
  in_step(4, rank, nodes='n[1-2]', tasks_per_node='2(x2)', node=node,
          local_id=local_id)
  task = slurm.from_flags(2, port_base=20000)
  assert (task.job_name, task.task_index) == (job, index)
  assert task.ps_hosts == ('n1:20000', 'n1:20001')
  assert task.worker_hosts == ('n2:20000', 'n2:20001')
  assert task.address == '%s:%d' % (node, 20000 + local_id)


def test_a_task_count_that_does_not_match_the_flags_names_both(
    digits_dir, in_step):
  in_step(3, 0)
  with pytest.raises(UsageError) as raised:
    config_of(digits_dir, '--num_ps_tasks=1', '--worker_replicas=3')
  assert raised.value.lines[0] == (
      '--num_ps_tasks=1 and --worker_replicas=3 make 4 tasks, but this srun '
      'step has 3 (SLURM_STEP_NUM_TASKS); start it with srun -n 4, or drop '
      '--worker_replicas (the tasks that are not ps tasks are the workers)')


def test_a_task_count_that_does_not_match_exits_2(digits_dir, tmp_path):
  env = dict(script_env(), **srun_env(3, 1))
  result = run_script(
      'train_image_classifier.py', '--slurm', '--num_ps_tasks=1',
      '--worker_replicas=3', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--train_dir=%s' % (tmp_path / 'train'), env=env)
  assert result.returncode == 2
  errors = [line for line in result.stdout.splitlines()
            if line.startswith('error:')]
  assert len(errors) == 1, result.stdout
  assert errors[0].startswith(
      'error: --num_ps_tasks=1 and --worker_replicas=3 make 4 tasks, but '
      'this srun step has 3 (SLURM_STEP_NUM_TASKS); start it with srun -n 4')
  assert not (tmp_path / 'train').exists()


def test_ps_tasks_that_leave_no_worker(in_step):
  in_step(2, 0)
  with pytest.raises(ValueError, match=r'--num_ps_tasks=2 leaves no worker '
                     r'among the 2 task\(s\) of this srun step .* srun -n 3'):
    slurm.from_flags(2)


def test_outside_a_srun_step(digits_dir, in_step):
  del in_step  # No SLURM_* variables.
  with pytest.raises(UsageError) as raised:
    config_of(digits_dir)
  assert raised.value.lines == (
      '--slurm: SLURM_PROCID is not set, so this process is not a task of a '
      'srun step; start every task with srun, or drop --slurm',)


@pytest.mark.parametrize('argv, source', [
    (['--ps_hosts=a:1', '--worker_hosts=b:1', '--job_name=ps'],
     '--ps_hosts/--worker_hosts/--job_name/--task'),
    (['--task=1'], '--task=1'),
])
def test_a_cluster_given_another_way_too_is_refused(digits_dir, in_step,
                                                    argv, source):
  in_step(2, 0)
  with pytest.raises(UsageError, match='with --slurm|--slurm takes') as e:
    config_of(digits_dir, *argv)
  assert source in e.value.lines[0]


def test_a_task_the_resolver_places_on_another_node_is_refused(in_step):
  # Slurm puts ranks 0-1 on node9 and 2-3 on node10; the resolver orders
  # 'node10' before 'node9' and gives rank 0 node10's first port.
  in_step(4, 0, nodes='node[9-10]', tasks_per_node='2(x2)', node='node9',
          local_id=0)
  with pytest.raises(ValueError) as raised:
    slurm.from_flags(1)
  assert str(raised.value).startswith(
      'Slurm started task 0 (SLURM_PROCID) on node9 as task 0 of that node '
      '(SLURM_LOCALID), so it listens on node9:8888, but TensorFlow\'s '
      'SlurmClusterResolver tells the other tasks it is at node10:8888')
  assert 'srun --distribution=block' in str(raised.value)


def test_no_scontrol_and_no_gpu_settings(in_step, monkeypatch, tmp_path):
  """TF 2.21's resolver expands the node list itself, and with its GPU
  assignment off it leaves CUDA_VISIBLE_DEVICES alone."""
  scontrol = tmp_path / 'scontrol'
  scontrol.write_text('#!/bin/sh\ntouch "%s.ran"\nexit 1\n' % scontrol)
  scontrol.chmod(0o755)
  monkeypatch.setenv('PATH', '%s:%s' % (tmp_path, os.environ['PATH']))
  monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
  in_step(6, 5, nodes='n[01-03]', tasks_per_node='2(x3)', node='n03',
          local_id=1)
  task = slurm.from_flags(0)
  assert task.worker_hosts == ('n01:8888', 'n01:8889', 'n02:8888',
                               'n02:8889', 'n03:8888', 'n03:8889')
  assert not (tmp_path / 'scontrol.ran').exists()
  assert 'CUDA_VISIBLE_DEVICES' not in os.environ


@pytest.mark.parametrize('rank, evaluates', [(0, True), (2, False)])
def test_eval_runs_on_task_0_only(in_step, capsys, rank, evaluates):
  in_step(3, rank)
  assert slurm_eval.this_task_evaluates(True) == evaluates
  assert capsys.readouterr().out == ('' if evaluates else (
      'srun task 2 of 3: only task 0 evaluates (--slurm); nothing to do '
      'here\n'))


def test_eval_of_another_task_exits_0_without_reading_anything(tmp_path):
  env = dict(script_env(), **srun_env(2, 1))
  result = run_script('eval_image_classifier.py', '--slurm',
                      '--checkpoint_path=%s' % (tmp_path / 'none'),
                      '--dataset_dir=%s' % (tmp_path / 'none'), env=env)
  assert result.returncode == 0, result.stdout
  assert 'srun task 1 of 2: only task 0 evaluates' in result.stdout


def test_eval_with_slurm_outside_a_srun_step(in_step):
  del in_step
  with pytest.raises(UsageError, match='SLURM_PROCID is not set'):
    slurm_eval.this_task_evaluates(True)
  assert slurm_eval.this_task_evaluates(False)


class Workers:
  """Listening sockets on 127.0.0.1 standing in for worker servers: each
  accepts and closes connections, as a server does, so that the watcher's
  probes never fill its backlog."""

  def __init__(self, count):
    self.sockets = [socket.socket() for _ in range(count)]
    for sock in self.sockets:
      sock.bind(('127.0.0.1', 0))
    self.hosts = ['127.0.0.1:%d' % s.getsockname()[1] for s in self.sockets]

    self.probed = [threading.Event() for _ in range(count)]

  def start(self, i):
    self.sockets[i].listen(8)
    threading.Thread(target=self._accept, args=(i,), daemon=True).start()

  def _accept(self, i):
    while True:
      try:
        self.sockets[i].accept()[0].close()
      except OSError:  # Ended.
        return
      self.probed[i].set()

  def end(self, i):
    try:
      self.sockets[i].shutdown(socket.SHUT_RDWR)  # Wakes accept().
    except OSError:  # Never listened.
      pass
    self.sockets[i].close()


class FakePsTask:
  def __init__(self, worker_hosts):
    self.worker_hosts = worker_hosts


# What happens to which worker, and whether the ps task has ended after it.
A_RUNNING_WORKER = [('start', 0, False), ('start', 1, False),
                    ('end', 0, False), ('end', 1, True)]
A_WORKER_NOT_STARTED_YET = [('start', 0, False), ('end', 0, False),
                            ('start', 1, False), ('end', 1, True)]


@pytest.mark.xdist_group('loopback')
@pytest.mark.parametrize('events', [A_RUNNING_WORKER,
                                    A_WORKER_NOT_STARTED_YET],
                         ids=['a_running_worker', 'a_worker_not_started_yet'])
def test_a_ps_task_ends_once_every_worker_has_ended(events):
  workers = Workers(2)
  ended = threading.Event()
  try:
    watcher = slurm.end_with_the_workers(
        FakePsTask(workers.hosts), ended.set, threading.Event(),
        poll_secs=0.05)
    for action, worker, ends in events:
      getattr(workers, action)(worker)
      # 0.5 s: ten polls, time for the watcher to see a worker listen.
      assert ended.wait(30 if ends else 0.5) == ends, (action, worker)
    watcher.join(30)
    assert not watcher.is_alive()
  finally:
    for i in range(2):
      workers.end(i)


@pytest.mark.xdist_group('loopback')
def test_after_sigterm_a_worker_that_never_started_does_not_count():
  workers = Workers(2)
  ended = threading.Event()
  terminating = threading.Event()
  try:
    workers.start(0)
    watcher = slurm.end_with_the_workers(
        FakePsTask(workers.hosts), ended.set, terminating, poll_secs=0.05)
    terminating.set()
    # Worker 0 still listens (it saves): the ps task serves on.
    assert not ended.wait(0.5)
    workers.end(0)
    assert ended.wait(30)
    watcher.join(30)
    assert not watcher.is_alive()
  finally:
    for i in range(2):
      workers.end(i)


# A ps task of a srun step: serves (a stand-in server) until the workers
# given as arguments have ended.
PS_TASK = """\
import sys
from clusters import slurm
from tf2_compat.slim_compat import tf

tf.logging.set_verbosity(tf.logging.INFO)

class Task:
  worker_hosts = sys.argv[1:]

slurm.serve_until_the_workers_end(object(), Task(), poll_secs=0.05)
print('ended')
"""


@pytest.mark.xdist_group('loopback')
def test_on_sigterm_a_ps_task_serves_until_no_worker_listens(tmp_path):
  workers = Workers(2)
  workers.start(0)  # Worker 1 never starts.
  script = tmp_path / 'ps_task.py'
  script.write_text(PS_TASK)
  process = subprocess.Popen(
      [sys.executable, str(script)] + workers.hosts, cwd=REPO,
      env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True)
  try:
    # A probe comes from the watcher, which starts after the handler.
    assert workers.probed[0].wait(60)
    process.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
      process.wait(1)  # Worker 0 listens: the chief is saving.
    workers.end(0)
    output, _ = process.communicate(timeout=30)
  finally:
    process.kill()
    for i in range(2):
      workers.end(i)
  assert process.returncode == 0, output
  lines = [l for l in output.splitlines() if not l.startswith('WARNING')]
  assert lines[-3:] == [
      'INFO:tensorflow:SIGTERM: this ps task serves until no worker listens, '
      'so that the chief can save',
      'INFO:tensorflow:no worker listens since the SIGTERM: stopping this ps '
      'task',
      'ended'], output


@pytest.mark.xdist_group('loopback')
def test_a_taken_port_names_the_port_base_flag(in_step):
  holder = socket.create_server(('127.0.0.1', 0))
  port = holder.getsockname()[1]
  in_step(2, 0)
  try:
    task = slurm.from_flags(0, port_base=port)
    with pytest.raises(servers.PortUnavailable) as raised:
      servers.check_port(task)
  finally:
    holder.close()
  assert str(raised.value) == (
      'worker task 0 cannot listen on localhost:%d: the port is already in '
      'use by another process (an earlier run of this task still running?); '
      'stop that process, or give the tasks another --slurm_port_base (the '
      'tasks of a node listen on consecutive ports from it)' % port)


def test_the_sbatch_script_of_the_page_is_the_committed_file():
  with open(os.path.join(REPO, 'docs', 'clusters.md')) as page:
    section = page.read().split('## Slurm\n', 1)[1]
  with open(SBATCH) as script:
    assert re.search(r'```sh\n(.*?)```', section, re.S).group(1) == (
        script.read())


def test_the_sbatch_script_parses_as_bash():
  subprocess.run(['bash', '-n', SBATCH], check=True, timeout=30)
