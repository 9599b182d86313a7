"""Clusters of real ps and worker processes on 127.0.0.1, end to end.

Every process runs with one intra-op and one inter-op thread, tiny batches
and few steps; each launch is bounded by the launcher's --timeout and a
subprocess timeout, and whatever is left of it is killed afterwards.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from deployment import launch
from deployment.slim_compat import tf
from tests.script_runner import REPO
from tests.script_runner import process_alive
from tests.script_runner import script_env

TRAIN = 'train_image_classifier.py'
LAUNCH_TIMEOUT = 150
STEP_LINE = re.compile(r'^\[(worker\d+)\] INFO:tensorflow:step (\d+): loss',
                       re.M)



def _train_args(dataset_dir, train_dir, steps, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
          '--optimizer=sgd', '--learning_rate=0.01',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=1',
          '--save_interval_secs=1', '--save_summaries_secs=600',
          '--non_chief_wait_secs=1', '--num_readers=1',
          '--num_preprocessing_threads=1',
          '--train_dir=%s' % train_dir] + list(extra)


def _checkpoint_step(train_dir):
  latest = tf.train.latest_checkpoint(train_dir)
  return None if latest is None else int(latest.rsplit('-', 1)[1])



class _Launch:
  """`python -m deployment.launch ...` running in its own process group."""

  def __init__(self, log_path, num_ps, num_workers, args):
    self.log_path = log_path
    command = [sys.executable, '-m', 'deployment.launch',
               '--num_ps', str(num_ps), '--num_workers', str(num_workers),
               '--timeout', str(LAUNCH_TIMEOUT), '--intra_op_threads', '1',
               '--inter_op_threads', '1', '--grace_secs', '5', '--', TRAIN
              ] + list(args)
    with open(log_path, 'w') as log:
      self.process = subprocess.Popen(
          command, cwd=REPO, env=script_env(), stdout=log,
          stderr=subprocess.STDOUT, start_new_session=True)

  def log(self):
    with open(self.log_path) as log:
      return log.read()

  def wait(self):
    try:
      return self.process.wait(timeout=LAUNCH_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
      pytest.fail('launcher still running after %d s:\n%s' % (
          LAUNCH_TIMEOUT + 30, self.log()[-3000:]))

  def kill(self):
    """SIGKILLs the launcher and any task that outlived it."""
    try:
      os.killpg(self.process.pid, signal.SIGKILL)
    except ProcessLookupError:
      pass
    self.process.wait(timeout=30)
    pids = [int(p) for p in re.findall(r'^\[launch\] \w+: pid (\d+)',
                                       self.log(), re.M)]
    deadline = time.monotonic() + 10  # They die with the launcher (Linux).
    while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
      time.sleep(0.2)
    for pid in pids:
      if process_alive(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launcher(tmp_path):
  """Starts launchers; kills whatever is left of them after the test."""
  started = []

  def start(num_ps, num_workers, *args):
    path = str(tmp_path / ('launch%d.log' % len(started)))
    started.append(_Launch(path, num_ps, num_workers, args))
    return started[-1]

  yield start
  for launched in started:
    launched.kill()


def _assert_ok(launched):
  status = launched.wait()
  assert status == 0, launched.log()[-4000:]
  return launched.log()


def _steps_per_worker(log):
  counts = {}
  for worker, _ in STEP_LINE.findall(log):
    counts[worker] = counts.get(worker, 0) + 1
  return counts


def _placement(log, worker='worker0'):
  """{ps task: (variables, bytes)} from the worker's start-up report."""
  return {int(task): (int(count), int(size)) for task, count, size in
          re.findall(r'^\[%s\] INFO:tensorflow:  ps task (\d+): (\d+) '
                     r'variables, (\d+) bytes' % worker, log, re.M)}


@pytest.mark.slow
def test_async_two_ps_two_workers(launcher, digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  log = _assert_ok(launcher(2, 2, *_train_args(digits_dir, train_dir, 40)))

  steps = _steps_per_worker(log)
  assert set(steps) == {'worker0', 'worker1'}, log[-4000:]
  # Asynchronous: every worker step is one global step. Once the global step
  # reaches 40, each worker finishes at most two more: the one in flight,
  # whose read of the global step may be old, and one that sees 40.
  final = _checkpoint_step(train_dir)
  assert 40 <= final <= sum(steps.values()) <= 40 + 2 * 2 - 1

  # Round-robin: global_step and the weights on ps 0, the biases on ps 1.
  placement = _placement(log)
  assert placement == _placement(log, 'worker1')
  assert [placement[0][0], placement[1][0]] == [5, 4]
  assert placement[0][1] > 12 * 2**20 and placement[1][1] < 10000

  savers = set(re.findall(r'^\[(\w+)\] INFO:tensorflow:Saving checkpoints',
                          log, re.M))
  assert savers == {'worker0'}
  assert os.path.exists(os.path.join(train_dir, 'model.ckpt-%d.index'
                                     % final))
  assert '[launch] all workers finished; stopping the ps tasks' in log
  assert '[ps0] INFO:tensorflow:ps task 0 stopped' in log
  assert '[ps1] INFO:tensorflow:ps task 1 stopped' in log


@pytest.mark.slow
def test_sync_two_workers_one_global_step_per_two_worker_steps(
    launcher, digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  log = _assert_ok(launcher(1, 2, *_train_args(
      digits_dir, train_dir, 12, '--sync_replicas',
      '--replicas_to_aggregate=2')))

  final = _checkpoint_step(train_dir)
  assert final == 12
  # Each global step takes 2 fresh gradients; steps beyond 2 x 12 are the
  # stale ones that the 2 initial and the 2 released tokens allow. (Which
  # worker computed them is up to timing: the chief's initial tokens even
  # let it fill a step alone.)
  steps = _steps_per_worker(log)
  assert 2 * final <= sum(steps.values()) <= 2 * final + 4, steps
  assert ('global batch per step: 8 per clone x 1 clones x 2 replicas to '
          'aggregate = 16 examples') in log


@pytest.mark.slow
def test_sync_with_a_backup_worker_finishes_by_size(launcher, digits_dir,
                                                     tmp_path):
  train_dir = str(tmp_path / 'train')
  log = _assert_ok(launcher(2, 3, *_train_args(
      digits_dir, train_dir, 6, '--sync_replicas',
      '--replicas_to_aggregate=2', '--ps_strategy=by_size')))

  assert _checkpoint_step(train_dir) == 6
  assert sum(_steps_per_worker(log).values()) >= 2 * 6
  # By size, the big fc3 weights get a ps task of their own and the other
  # weights go to the other task (round-robin put every weight on ps 0).
  placement = _placement(log)
  assert sorted(count for count, _ in placement.values()) == [4, 5]
  assert min(size for _, size in placement.values()) > 200000
  assert 'by_size placement' in log


@pytest.mark.slow
def test_async_chief_finishes_when_a_non_chief_is_killed(digits_dir,
                                                         tmp_path):
  train_dir = str(tmp_path / 'train')
  lines = []
  lock = threading.Lock()

  class Sink:

    def write(self, text):
      with lock:
        lines.append(text)

    def flush(self):
      pass

  def log():
    with lock:
      return ''.join(lines)

  env = dict(script_env(), TF_NUM_INTRAOP_THREADS='1',
             TF_NUM_INTEROP_THREADS='1')
  local = launch.LocalCluster(
      [TRAIN] + _train_args(digits_dir, train_dir, 50), 1, 2, env=env,
      output=Sink(), cwd=REPO, grace_secs=5)
  try:
    local.start()
    deadline = time.monotonic() + 90
    while not re.search(r'^\[worker1\] INFO:tensorflow:step', log(), re.M):
      assert time.monotonic() < deadline, log()[-4000:]
      time.sleep(0.2)
    os.killpg(local.processes['worker1'].pid, signal.SIGKILL)
    local.processes['worker1'].wait(timeout=30)
    killed_at = len(log())
    chief = local.processes['worker0']
    assert chief.wait(timeout=LAUNCH_TIMEOUT) == 0, log()[-4000:]
  finally:
    local.stop()
  assert local.processes['worker1'].returncode == -signal.SIGKILL
  assert 50 <= _checkpoint_step(train_dir) <= 53
  # The chief kept training after the kill.
  assert re.search(r'^\[worker0\] INFO:tensorflow:step \d+:',
                   log()[killed_at:], re.M)


@pytest.mark.slow
def test_stopped_cluster_resumes_from_chiefs_last_checkpoint(
    launcher, digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  first = launcher(1, 2, *_train_args(digits_dir, train_dir, 100000))
  deadline = time.monotonic() + 120
  while (_checkpoint_step(train_dir) or 0) < 5:
    assert first.process.poll() is None, first.log()[-4000:]
    assert time.monotonic() < deadline, first.log()[-4000:]
    time.sleep(0.5)
  first.process.send_signal(signal.SIGTERM)
  assert first.wait() == 128 + signal.SIGTERM
  stopped_at = _checkpoint_step(train_dir)

  log = _assert_ok(launcher(1, 2, *_train_args(digits_dir, train_dir,
                                               stopped_at + 5)))
  assert ('[worker0] INFO:tensorflow:Restoring parameters from %s/model.ckpt-'
          '%d' % (train_dir, stopped_at)) in log
  assert stopped_at + 5 <= _checkpoint_step(train_dir) <= stopped_at + 8


def _tf_config(task_type, index, num_workers=2):
  return json.dumps({
      'cluster': {'ps': ['127.0.0.1:1'],
                  'worker': ['127.0.0.1:%d' % (2 + i)
                             for i in range(num_workers)]},
      'task': {'type': task_type, 'index': index}})


# (TF_CONFIG, extra flags, expected message). Nothing here starts a server:
# the ports are never bound.
BAD_INPUTS = {
    'malformed_tf_config': (
        '{"cluster": {"ps": ["127.0.0.1:1"]', [],
        r'error: TF_CONFIG is not valid JSON .*\'\{"cluster": \{"ps": '
        r'\["127.0.0.1:1"\]\''),
    'task_index_out_of_range': (
        _tf_config('worker', 2), [],
        r'error: TF_CONFIG: task index 2 is out of range: the worker job has '
        r'2 task\(s\), indices 0..1'),
    'job_name_neither_ps_nor_worker': (
        None, ['--ps_hosts=127.0.0.1:1', '--worker_hosts=127.0.0.1:2',
               '--job_name=chief'],
        r"error: --job_name=chief is neither 'ps' nor 'worker'"),
    'replicas_to_aggregate_above_workers': (
        _tf_config('worker', 0), ['--sync_replicas',
                                  '--replicas_to_aggregate=3'],
        r'error: --replicas_to_aggregate=3 is more than the 2 workers of the '
        r'cluster from TF_CONFIG'),
}


@pytest.fixture(scope='module')
def bad_input_results(tmp_path_factory):
  """Runs every BAD_INPUTS case at once (each is mostly TF's import time)."""
  train_dir = str(tmp_path_factory.mktemp('bad') / 'train')
  processes = {}
  try:
    for name, (config, args, _) in BAD_INPUTS.items():
      env = script_env()
      env.pop('TF_CONFIG', None)
      if config is not None:
        env['TF_CONFIG'] = config
      processes[name] = subprocess.Popen(
          [sys.executable, TRAIN, '--train_dir=%s' % train_dir] + args,
          cwd=REPO, env=env, stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT, text=True, start_new_session=True)
    yield {name: (process.communicate(timeout=120)[0], process.returncode)
           for name, process in processes.items()}
  finally:
    for process in processes.values():
      if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(BAD_INPUTS))
def test_bad_cluster_input_exits_2_naming_the_value(bad_input_results, case):
  output, status = bad_input_results[case]
  assert status == 2, output[-3000:]
  assert re.search(BAD_INPUTS[case][2], output), output[-3000:]
  assert 'Traceback' not in output
