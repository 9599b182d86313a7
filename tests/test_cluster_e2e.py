"""Clusters of real ps and worker processes on 127.0.0.1, end to end.

Every process runs with one intra-op and one inter-op thread, tiny batches
and few steps; each run is bounded by a timeout, and whatever is left of it
is killed afterwards. The tasks are forked from the tests' warm Python
(_start_warm) unless the launcher's command line is what a test is about.
Runs that several tests read are made once per module.
"""

import collections
import glob
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from clusters import launch
from clusters import task_watch
from tf2_compat.slim_compat import tf
from tests.script_runner import REPO
from tests.script_runner import process_alive
from tests.script_runner import script_env
from tests.script_runner import start_script

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


TRAIN = 'train_image_classifier.py'
LAUNCH_TIMEOUT = 150
STEP_LINE = re.compile(r'^\[(worker\d+)\] INFO:tensorflow:step (\d+): loss',
                       re.M)

def _train_args(dataset_dir, train_dir, steps, *extra, save_interval_secs=1):
  """The training script's flags; `save_interval_secs=0` saves only at the
  end, for runs whose tests read no checkpoint but the last."""
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
          '--optimizer=sgd', '--learning_rate=0.01',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=1',
          '--save_interval_secs=%d' % save_interval_secs,
          '--save_summaries_secs=600',
          '--non_chief_wait_secs=1', '--num_readers=1',
          '--num_preprocessing_threads=1',
          '--train_dir=%s' % train_dir] + list(extra)


def _checkpoint_step(train_dir):
  latest = tf.train.latest_checkpoint(train_dir)
  return None if latest is None else int(latest.rsplit('-', 1)[1])


class _Launch:
  """`python -m clusters.launch ... -- PROGRAM ARGS` in its own process
  group; PROGRAM is the training script unless given."""

  def __init__(self, log_path, num_ps, num_workers, args, program=(TRAIN,),
               timeout=LAUNCH_TIMEOUT):
    self.log_path = log_path
    self.timeout = timeout
    command = [sys.executable, '-m', 'clusters.launch',
               '--num_ps', str(num_ps), '--num_workers', str(num_workers),
               '--timeout', str(timeout), '--intra_op_threads', '1',
               '--inter_op_threads', '1', '--grace_secs', '5', '--'
              ] + list(program) + list(args)
    with open(log_path, 'w') as log:
      self.process = subprocess.Popen(
          command, cwd=REPO, env=script_env(), stdout=log,
          stderr=subprocess.STDOUT, start_new_session=True)

  def log(self):
    with open(self.log_path) as log:
      return log.read()

  def wait(self):
    try:
      return self.process.wait(timeout=self.timeout + 30)
    except subprocess.TimeoutExpired:
      pytest.fail('launcher still running after %d s:\n%s' % (
          self.timeout + 30, self.log()[-3000:]))

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


def _run_to_end(log_path, num_ps, num_workers, args, program=(TRAIN,),
                timeout=LAUNCH_TIMEOUT):
  """Runs a cluster until the launcher exits 0 (its --timeout: `timeout`
  seconds); returns the launcher's log."""
  launched = _Launch(log_path, num_ps, num_workers, args, program, timeout)
  try:
    status = launched.wait()
  finally:
    launched.kill()
  assert status == 0, launched.log()[-4000:]
  return launched.log()


def _start_warm(argv, env, cwd, name):
  """LocalCluster's start_task for these tests: the task forked from the
  tests' warm Python (tests/script_runner.py) instead of a fresh
  interpreter, which would import TensorFlow again: 7-8 s of CPU per task,
  more than most of these runs train. Tests about the launcher's own
  command line (its exit status on SIGTERM) run `python -m clusters.launch`
  instead (_Launch).

  '{task}' in the script's arguments becomes the task's name (ps0,
  worker1), so that each task can have a train_dir of its own and every
  file there shows who wrote it (docs/clusters.md asks only the chief's
  train_dir to be the shared one).
  """
  del cwd  # start_script runs from the repository, as LocalCluster's cwd.
  script, args = argv[1], argv[2:]
  return start_script(script, *[arg.replace('{task}', name) for arg in args],
                      env=env)


def _warm_run(num_ps, num_workers, args, timeout=LAUNCH_TIMEOUT, **kwargs):
  """Runs a warm LocalCluster (_local_cluster) of the training script with
  `args` until every worker finished, or `timeout` seconds; returns its
  log. `kwargs` go to LocalCluster."""
  local, sink = _local_cluster(args, num_ps, num_workers, **kwargs)
  try:
    local.start()
    status = local.wait(timeout=timeout)
  finally:
    local.stop()
  assert status == 0, sink.text()[-4000:]
  return sink.text()


def _local_steps(log):
  """{worker: training steps it ran}, from its progress lines.

  With --log_every_n_steps=1 the progress hook logs every step but the
  first, which only starts its rate window: n lines are n + 1 steps.
  """
  lines = collections.Counter(worker for worker, _ in STEP_LINE.findall(log))
  return {worker: count + 1 for worker, count in lines.items()}


def _placement(log, worker='worker0'):
  """{ps task: (variables, bytes)} from the worker's start-up report."""
  return {int(task): (int(count), int(size)) for task, count, size in
          re.findall(r'^\[%s\] INFO:tensorflow:  ps task (\d+): (\d+) '
                     r'variables, (\d+) bytes' % worker, log, re.M)}


# A launcher's log and the train_dir of its tasks (the parent of the
# per-task train_dirs when each task has one).
ClusterRun = collections.namedtuple('ClusterRun', ['log', 'train_dir'])


# Asynchronous: 2 ps tasks, 2 workers, 40 steps, a train_dir per task.
@pytest.fixture(scope='module')
def async_run(digits_dir, tmp_path_factory):
  base = tmp_path_factory.mktemp('async')
  train_dirs = str(base / 'train')
  log = _warm_run(2, 2, _train_args(
      digits_dir, os.path.join(train_dirs, '{task}'), 40))
  return ClusterRun(log, train_dirs)


@pytest.mark.slow
def test_async_workers_stop_at_the_last_step_not_past_it(async_run):
  steps = _local_steps(async_run.log)
  assert set(steps) == {'worker0', 'worker1'}, async_run.log[-4000:]
  # Each update claims its global step (training/last_step.py): one past
  # 40 is given back, not applied, so the global step ends at 40 exactly,
  # and so does the chief's final checkpoint, whose name is the step it
  # holds. The workers' steps add up to 40 and the steps refused: at
  # least one per worker that was mid-step when the other reached 40.
  chief_dir = os.path.join(async_run.train_dir, 'worker0')
  assert _checkpoint_step(chief_dir) == 40, async_run.log[-4000:]
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(chief_dir))
  assert reader.get_tensor('global_step') == 40
  assert sum(steps.values()) >= 40, steps


@pytest.mark.slow
def test_round_robin_puts_weights_on_ps0_and_biases_on_ps1(async_run):
  # docs/clusters.md's placement: global_step and the 4 weights on task 0, the 4
  # biases on task 1.
  placement = _placement(async_run.log)
  assert placement == {0: (5, 13094024), 1: (4, 4520)}
  assert _placement(async_run.log, 'worker1') == placement


@pytest.mark.slow
def test_only_the_chief_saves_checkpoints(async_run):
  chief_dir = os.path.join(async_run.train_dir, 'worker0')
  saved = [int(step) for step in re.findall(
      r'^\[worker0\] INFO:tensorflow:Saving checkpoints for (\d+) into %s/'
      r'model\.ckpt\.$' % re.escape(chief_dir), async_run.log, re.M)]
  savers = re.findall(r'^\[(\w+)\] INFO:tensorflow:Saving checkpoints',
                      async_run.log, re.M)
  assert set(savers) == {'worker0'} and len(saved) == len(savers)
  # Every task had its own train_dir; checkpoints are in the chief's only,
  # and they are the last 5 (the Saver's max_to_keep) it logged.
  indexes = glob.glob(os.path.join(async_run.train_dir, '*',
                                   'model.ckpt-*.index'))
  assert {os.path.dirname(path) for path in indexes} == {chief_dir}
  assert sorted(int(re.search(r'ckpt-(\d+)\.index$', path).group(1))
                for path in indexes) == saved[-5:]
  assert saved[-1] == _checkpoint_step(chief_dir)


@pytest.mark.slow
def test_only_the_chief_writes_summaries(async_run):
  events = glob.glob(os.path.join(async_run.train_dir, '*',
                                  'events.out.tfevents.*'))
  assert [os.path.dirname(path) for path in events] == [
      os.path.join(async_run.train_dir, 'worker0')]
  summaries = [event.summary for event in tf.train.summary_iterator(events[0])
               if event.HasField('summary')]
  # --save_summaries_secs=600: only the first step's summaries are written.
  assert len(summaries) == 1
  values = {value.tag: value.simple_value for value in summaries[0].value}
  assert math.isfinite(values['Losses/clone_loss']), values
  assert values['Losses/clone_loss'] > 0, values


@pytest.mark.slow
def test_launcher_stops_the_ps_tasks_once_the_workers_finish(async_run):
  log = async_run.log
  finished = log.index('[launch] all workers finished; stopping the ps '
                       'tasks\n')
  assert log.index('[ps0] INFO:tensorflow:ps task 0 stopped\n') > finished
  assert log.index('[ps1] INFO:tensorflow:ps task 1 stopped\n') > finished


def _most_steps_using_every_gradient(final, num_workers):
  """The most worker steps of a sync run whose global steps used every
  gradient, 2 each.

  Each worker step pushes one gradient and ends on a token. Beyond 2 per
  global step (one more step may complete after the chief's last
  checkpoint, `final`), steps can end on the chief's 2 initial tokens and
  on the tokens that ReleaseWaitingWorkersHook gives at the end, of which
  each worker uses at most 2.
  """
  return 2 * (final + 1) + 2 + 2 * num_workers


@pytest.mark.slow
def test_sync_two_workers_one_global_step_per_two_worker_steps(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  log = _warm_run(1, 2, _train_args(
      digits_dir, train_dir, 12, '--sync_replicas',
      '--replicas_to_aggregate=2', save_interval_secs=0))

  # Which worker computed a step's 2 gradients is up to timing: the chief's
  # initial tokens even let it fill a step alone. One more step may
  # complete while the chief stops.
  final = _checkpoint_step(train_dir)
  assert 12 <= final <= 13
  steps = _local_steps(log)
  assert (2 * final <= sum(steps.values())
          <= _most_steps_using_every_gradient(final, 2)), steps
  assert ('global batch per step: 8 per clone x 1 clones x 2 replicas to '
          'aggregate = 16 examples') in log


# Synchronous with a backup worker: 3 workers, 2 replicas to aggregate,
# 2 ps tasks by size, 20 steps.
@pytest.fixture(scope='module')
def backup_run(digits_dir, tmp_path_factory):
  base = tmp_path_factory.mktemp('backup')
  train_dir = str(base / 'train')
  log = _warm_run(2, 3, _train_args(
      digits_dir, train_dir, 20, '--sync_replicas',
      '--replicas_to_aggregate=2', '--ps_strategy=by_size',
      save_interval_secs=0))
  return ClusterRun(log, train_dir)


@pytest.mark.slow
def test_sync_backup_worker_gradients_beyond_two_per_step_are_dropped(
    backup_run):
  log = backup_run.log
  assert ('[worker0] INFO:tensorflow:SyncReplicasV2: replicas_to_aggregate=2; '
          'total_num_replicas=3') in log
  final = _checkpoint_step(backup_run.train_dir)
  assert 20 <= final <= 21
  # The chief adds 3 tokens per global step, one per worker, so the workers
  # run about 3 steps, and compute 3 gradients, per global step. A step
  # applies the first 2, which the chief's take waits for; a gradient that
  # comes later carries a local step that is behind, and the accumulators
  # drop it. Had every gradient been used, there would be fewer steps.
  steps = _local_steps(log)
  assert set(steps) == {'worker0', 'worker1', 'worker2'}, log[-4000:]
  assert sum(steps.values()) > _most_steps_using_every_gradient(final, 3), steps
  assert ('global batch per step: 8 per clone x 1 clones x 2 replicas to '
          'aggregate = 16 examples') in log


@pytest.mark.slow
def test_by_size_moves_the_small_weights_off_the_fc3_weights_task(
    backup_run):
  # Round-robin put every weight on task 0 (4520 bytes on task 1). By size,
  # task 0 gets the 12.25 MiB of fc3 weights, the conv1 weights, the conv2
  # biases and global_step; task 1 all the rest.
  placement = _placement(backup_run.log)
  assert placement == {0: (4, 12848520), 1: (5, 250024)}
  assert ('[worker0] INFO:tensorflow:variables on 2 ps task(s), by_size '
          'placement:') in backup_run.log


class _Sink:
  """LocalCluster's output, kept in memory and read from the test thread."""

  def __init__(self):
    self._lines = []
    self._written = threading.Condition()

  def write(self, text):
    with self._written:
      self._lines.append(text)
      self._written.notify_all()

  def flush(self):
    pass

  def text(self):
    with self._written:
      return ''.join(self._lines)

  def wait_for(self, pattern, timeout=90):
    """Returns once a line matches `pattern`: woken by each write, not
    polling, so a test acts within a step or two of the line. `timeout`
    only ends a hang."""
    found = lambda: re.search(pattern, ''.join(self._lines), re.M)
    with self._written:
      assert self._written.wait_for(found, timeout), (
          ''.join(self._lines)[-4000:])


def _local_cluster(args, num_ps, num_workers, **kwargs):
  """A LocalCluster of the training script with `args`, its tasks forked
  from the warm Python (_start_warm), and its _Sink."""
  sink = _Sink()
  local = launch.LocalCluster(
      [TRAIN] + list(args), num_ps, num_workers,
      env={'TF_NUM_INTRAOP_THREADS': '1', 'TF_NUM_INTEROP_THREADS': '1'},
      output=sink, cwd=REPO, grace_secs=5, start_task=_start_warm,
      **kwargs)
  return local, sink


def _run_until_worker1_trains(local, sink):
  """Starts `local` and returns once worker1 has logged a step, with the
  chief (worker0) stopped by SIGSTOP since its own first step line.

  Which task trains first is up to timing: on a busy machine worker1
  logged its first step when the chief was at step 37. Without the pause
  the chief could run every step of a short run before worker1 trained
  one. SIGCONT lets the chief go on.
  """
  local.start()
  # 'step N:', not the start-up's 'steps per epoch' line.
  sink.wait_for(r'^\[worker0\] INFO:tensorflow:step \d+:')
  os.kill(local.processes['worker0'].pid, signal.SIGSTOP)
  sink.wait_for(r'^\[worker1\] INFO:tensorflow:step \d+:')


# The asynchronous runs that stop a non-chief mid-run: 100 global steps.
# Before the chief goes on alone, it runs a step or two past its first line
# and worker1 alone runs what it can until the test reacts to its first
# line: 15 to 35 steps in all on a loaded 2-core machine, which leaves the
# chief dozens.
MID_RUN_STEPS = 100


@pytest.mark.slow
def test_async_chief_finishes_when_a_non_chief_is_killed(digits_dir,
                                                         tmp_path):
  train_dir = str(tmp_path / 'train')
  local, sink = _local_cluster(_train_args(
      digits_dir, train_dir, MID_RUN_STEPS, save_interval_secs=0), 1, 2)
  try:
    _run_until_worker1_trains(local, sink)
    os.killpg(local.processes['worker1'].pid, signal.SIGKILL)
    local.processes['worker1'].wait(timeout=30)
    killed_at = len(sink.text())
    chief = local.processes['worker0']
    os.kill(chief.pid, signal.SIGCONT)
    assert chief.wait(timeout=LAUNCH_TIMEOUT) == 0, sink.text()[-4000:]
  finally:
    local.stop()
  assert local.processes['worker1'].returncode == -signal.SIGKILL
  # The chief kept training after the kill. Then only its steps moved the
  # global step, and it stopped after the one that took it to the last.
  assert re.search(r'^\[worker0\] INFO:tensorflow:step \d+:',
                   sink.text()[killed_at:], re.M), sink.text()[-4000:]
  assert _checkpoint_step(train_dir) == MID_RUN_STEPS


@pytest.mark.slow
def test_async_run_ends_when_a_non_chief_is_stopped(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  local, sink = _local_cluster(
      _train_args(digits_dir, train_dir, MID_RUN_STEPS, save_interval_secs=0),
      1, 2, watch=task_watch.TaskWatch(finish_timeout=5))
  try:
    _run_until_worker1_trains(local, sink)
    worker1 = local.processes['worker1']
    os.kill(worker1.pid, signal.SIGSTOP)  # Never exits by itself now.
    os.kill(local.processes['worker0'].pid, signal.SIGCONT)
    status = local.wait(timeout=LAUNCH_TIMEOUT)
  finally:
    local.stop()
  log = sink.text()
  assert status == 0, log[-4000:]
  assert re.search(
      r'^\[launch\] worker1 \(pid %d, stopped \(SIGSTOP or a job control '
      r'signal\)\) has not finished \d+ s after the chief did \(bound 5 s, '
      r'--finish_timeout\); its last line, \d+ s ago: INFO:tensorflow:'
      % worker1.pid, log, re.M), log[-4000:]
  assert _checkpoint_step(train_dir) == MID_RUN_STEPS
  assert worker1.returncode is not None


RECOVERED = re.compile(
    r'^\[(worker\d)\] WARNING:tensorflow:the session was re-created \(a ps '
    r'task restarted or a connection dropped\): training goes on from '
    r'global step (\d+); this worker last saw global step (\d+), so (\d+) '
    r'step\(s\) since the restored checkpoint are run again$', re.M)


@pytest.mark.slow
def test_async_workers_recover_from_a_restarted_ps_task(digits_dir,
                                                         tmp_path):
  train_dir = str(tmp_path / 'train')
  # 200 steps: a non-chief polls for the chief's restore every second; on a
  # busy machine the chief alone ran the 75 steps left of an 80-step run
  # before the other worker was back.
  local, sink = _local_cluster(_train_args(digits_dir, train_dir, 200), 1, 2,
                               ps_restarts=1)
  killed = {}

  def kill_ps_after_a_checkpoint():
    # Once both workers train: on a busy machine worker1 was still starting
    # at the chief's checkpoint 9, and a worker that never had a session
    # does not re-create one.
    for worker in ('worker0', 'worker1'):
      # 'step N:', not the start-up's 'steps per epoch' line.
      sink.wait_for(r'^\[%s\] INFO:tensorflow:step \d+:' % worker)
    deadline = time.monotonic() + 90
    while (_checkpoint_step(train_dir) or 0) < 5:
      if time.monotonic() > deadline:
        return
      time.sleep(0.2)
    killed['after_checkpoint'] = _checkpoint_step(train_dir)
    os.killpg(local.processes['ps0'].pid, signal.SIGKILL)

  killer = threading.Thread(target=kill_ps_after_a_checkpoint, daemon=True)
  try:
    local.start()
    killer.start()
    status = local.wait(timeout=LAUNCH_TIMEOUT)
  finally:
    local.stop()
    killer.join(timeout=10)
  log = sink.text()
  assert status == 0, log[-4000:]
  assert ('[launch] ps0 exited with status 137; restarting it on %s (0 more '
          'restart(s) allowed)' % local.ps_hosts[0]) in log
  # The chief restored its latest checkpoint onto the restarted ps task:
  # at least the one seen before the kill (one more may have been written
  # before the ps died).
  restored = [int(step) for step in re.findall(
      r'^\[worker0\] INFO:tensorflow:Restoring parameters from .*'
      r'model\.ckpt-(\d+)$', log, re.M)]
  assert len(restored) == 1 and restored[0] >= killed['after_checkpoint']
  recovered = {worker: (int(step), int(reached), int(lost)) for
               worker, step, reached, lost in RECOVERED.findall(log)}
  assert sorted(recovered) == ['worker0', 'worker1'], '\n'.join(
      line for line in log.splitlines() if 'INFO:tensorflow:step ' not in line)
  # Each worker reads the global step once its new session is ready, so
  # none is bound to read the restored step itself: the chief read 23
  # after restoring 22 in one run (a non-chief that saw the model ready had
  # already run a step), and a non-chief, which polls for the chief's
  # restore every --non_chief_wait_secs (1 s), read 6 past it in another.
  # Each counts the steps it saw after the step it goes on from.
  last_step = _checkpoint_step(train_dir)
  assert last_step in range(200, 203)
  for step, last_seen, lost in recovered.values():
    assert restored[0] <= step <= last_step
    assert lost == max(0, last_seen - step)


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
  # The launcher stops the workers before the ps task, so the chief saves
  # the step it reached from the variables the ps task still holds.
  assert ('[worker0] INFO:tensorflow:SIGTERM: stopped; saved %s/model.ckpt-'
          '%d\n' % (train_dir, stopped_at)) in first.log(), first.log()[-4000:]

  log = _warm_run(1, 2, _train_args(digits_dir, train_dir, stopped_at + 5,
                                    save_interval_secs=0))
  assert ('[worker0] INFO:tensorflow:Restoring parameters from %s/model.ckpt-'
          '%d\n' % (train_dir, stopped_at)) in log
  # 5 more steps, passed by at most 2 as in the asynchronous run above.
  assert stopped_at + 5 <= _checkpoint_step(train_dir) <= stopped_at + 7


def _tf_config(task_type, index, num_workers=2):
  return json.dumps({
      'cluster': {'ps': ['127.0.0.1:1'],
                  'worker': ['127.0.0.1:%d' % (2 + i)
                             for i in range(num_workers)]},
      'task': {'type': task_type, 'index': index}})


# (TF_CONFIG, extra flags, expected message). None of them may get as far as
# starting a server: the ports are never bound.
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
        r'error: --replicas_to_aggregate=3 is more than the 2 worker\(s\) of '
        r'the cluster from TF_CONFIG: a global step would never complete; use '
        r'at most 2'),
    'sync_replicas_with_all_reduce': (
        json.dumps({'cluster': {'worker': ['127.0.0.1:2', '127.0.0.1:3']},
                    'task': {'type': 'worker', 'index': 0}}),
        ['--sync_replicas'],
        r'error: --sync_replicas with the 2 workers and no ps tasks of the '
        r'cluster from TF_CONFIG: they all-reduce their gradients every '
        r'step, which is synchronous already; drop --sync_replicas'),
}

BadInputResult = collections.namedtuple('BadInputResult',
                                        ['output', 'status', 'train_dir'])


@pytest.fixture(scope='module')
def bad_input_results(tmp_path_factory):
  """Runs every BAD_INPUTS case at once (each is mostly TF's import time),
  each with a train_dir of its own that does not exist yet."""
  base = tmp_path_factory.mktemp('bad')
  processes = {}
  try:
    for name, (config, args, _) in BAD_INPUTS.items():
      env = {} if config is None else {'TF_CONFIG': config}
      train_dir = str(base / name / 'train')
      processes[name] = (start_script(TRAIN, '--train_dir=%s' % train_dir,
                                      *args, env=env), train_dir)
    yield {name: BadInputResult(process.communicate(timeout=120)[0],
                                process.returncode, train_dir)
           for name, (process, train_dir) in processes.items()}
  finally:
    for process, _ in processes.values():
      if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(BAD_INPUTS))
def test_bad_cluster_input_exits_2_naming_the_value(bad_input_results, case):
  result = bad_input_results[case]
  assert result.status == 2, result.output[-3000:]
  assert re.search(BAD_INPUTS[case][2], result.output), result.output[-3000:]
  assert 'Traceback' not in result.output


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(BAD_INPUTS))
def test_bad_cluster_input_starts_no_server_and_creates_no_train_dir(
    bad_input_results, case):
  result = bad_input_results[case]
  assert result.status == 2, result.output[-3000:]
  # The script logs 'started <job> task <index> ...' once its server runs.
  assert not re.search(r'INFO:tensorflow:started (ps|worker) task',
                       result.output), result.output[-3000:]
  assert os.path.isdir(os.path.dirname(os.path.dirname(result.train_dir)))
  assert not os.path.exists(os.path.dirname(result.train_dir))
