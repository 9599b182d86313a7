"""The launcher's --max_restarts with train_image_classifier.py on
127.0.0.1: an all-reduce cluster restarted whole after a SIGKILL keeps the
accuracy of an uninterrupted run; an asynchronous ps cluster restarts a
killed worker alone, then a killed chief, which takes the cluster back to
its latest checkpoint."""

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.script_runner import REPO
from tests.script_runner import digits_accuracy
from tests.script_runner import process_alive
from tests.script_runner import script_env
from tests import test_cluster_e2e
from tests.test_cluster_e2e import _checkpoint_step

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')

TIMEOUT = 600
STEP = r'^\[worker\d\] INFO:tensorflow:step (\d+): loss'


class _Launch(test_cluster_e2e._Launch):
  """test_cluster_e2e's launcher run, of `python -m MODULE OPTIONS --
  train_image_classifier.py ARGS`, with waits for its lines."""

  def __init__(self, log_path, module, options, args):  # pylint: disable=super-init-not-called
    self.log_path = log_path
    self.timeout = TIMEOUT
    command = [sys.executable, '-m', module, '--timeout', str(TIMEOUT),
               '--intra_op_threads', '1', '--inter_op_threads', '1',
               '--grace_secs', '5'] + list(options) + [
                   '--', 'train_image_classifier.py'] + list(args)
    with open(log_path, 'w') as log:
      self.process = subprocess.Popen(
          command, cwd=REPO, env=script_env(), stdout=log,
          stderr=subprocess.STDOUT, start_new_session=True)

  def wait_for(self, pattern, start=0):
    """The first match of `pattern` in the log from offset `start`.

    A hang ends with the launcher's --timeout, which fails the wait; the
    bound here only backs it up. (A restart's fresh tasks took over 120 s
    to start on a machine loaded 15-fold.)
    """
    deadline = time.monotonic() + self.timeout + 30
    while True:
      match = re.compile(pattern, re.M).search(self.log(), start)
      if match:
        return match
      assert self.process.poll() is None, self.log()[-4000:]
      assert time.monotonic() < deadline, self.log()[-4000:]
      time.sleep(0.1)

  def pids(self, task):
    return [int(pid) for pid in re.findall(
        r'^\[launch\] %s: pid (\d+),' % task, self.log(), re.M)]

  def configs(self, task):
    """The TF_CONFIG of each start of `task`."""
    return [json.loads(config) for config in re.findall(
        r'^\[launch\] %s: pid \d+, (.*)$' % task, self.log(), re.M)]

  def kill(self):
    for pid in self.pids(r'\w+'):  # A task the test stopped cannot die.
      if process_alive(pid):
        os.kill(pid, signal.SIGCONT)
    super().kill()


@pytest.fixture
def launcher(tmp_path):
  started = []

  def start(name, module, options, args):
    started.append(_Launch(str(tmp_path / (name + '.log')), module, options,
                           args))
    return started[-1]

  yield start
  for launched in started:
    launched.kill()


LAST_STEP = 200
# The interrupted run is killed once it has a checkpoint this far, a
# quarter of the way: the restart then trains most of the steps.
KILL_AFTER = 50


def _all_reduce_args(digits_dir, train_dir, save_interval_secs=5):
  """Batch 16 per worker; the same start (--random_seed) and batches
  (--shuffle_seed) in every run; the rate halves every epoch (45 steps),
  so that the accuracy settles by step 200 (98.33% with oneDNN's CPU
  kernels on and off; 96.94% at step 150 with the rate halving every 0.75
  epoch). A checkpoint every 5 s for the run that is killed, a few dozen
  steps apart: a LeNet checkpoint with Adam's slots is 40 MB, and one
  every second took most of that run's time on a loaded machine. 0: only
  the first and the last."""
  return ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=16',
          '--optimizer=adam', '--opt_epsilon=1e-8', '--learning_rate=0.002',
          '--learning_rate_decay_type=exponential',
          '--num_epochs_per_decay=1', '--learning_rate_decay_factor=0.5',
          '--shuffle_seed=3', '--random_seed=1',
          '--max_number_of_steps=%d' % LAST_STEP, '--log_every_n_steps=1',
          '--save_interval_secs=%d' % save_interval_secs,
          '--save_summaries_secs=600',
          '--num_readers=1', '--num_preprocessing_threads=1',
          '--train_dir=%s' % train_dir]


def _wait_for_checkpoint(launched, train_dir, step):
  """The latest checkpoint once it is at `step` or later.

  A hang ends with the launcher's --timeout, which fails the wait; the
  bound here only backs it up. (A bound of the cluster's start plus 3 s a
  step was too short for the start alone on a machine loaded 15-fold.)
  """
  deadline = time.monotonic() + launched.timeout + 30
  while (_checkpoint_step(train_dir) or 0) < step:
    assert launched.process.poll() is None, launched.log()[-4000:]
    assert time.monotonic() < deadline, launched.log()[-4000:]
    time.sleep(0.1)
  return _checkpoint_step(train_dir)


RESUMED = (r'^\[launch\] starting every task again on new ports: resuming '
           r'from step (\d+), the latest checkpoint in %s; (\d+) step\(s\) '
           r'lost \(the workers had logged step (\d+)\)$')


@pytest.mark.slow
def test_all_reduce_restarted_after_a_sigkill_keeps_the_accuracy(
    launcher, digits_dir, tmp_path):
  interrupted = str(tmp_path / 'interrupted')
  uninterrupted = str(tmp_path / 'uninterrupted')
  run = launcher('interrupted', 'clusters.launch',
                 ['--num_ps', '0', '--num_workers', '2', '--max_restarts',
                  '1'], _all_reduce_args(digits_dir, interrupted))
  # The uninterrupted run goes on beside it.
  reference = launcher('uninterrupted', 'clusters.launch',
                       ['--num_ps', '0', '--num_workers', '2'],
                       _all_reduce_args(digits_dir, uninterrupted,
                                        save_interval_secs=0))
  before_kill = _wait_for_checkpoint(run, interrupted, KILL_AFTER)
  time.sleep(random.Random(5).uniform(0.0, 1.0))  # Seeded: replayable.
  os.killpg(run.pids('worker1')[0], signal.SIGKILL)
  killed = time.monotonic()
  resumed_line = run.wait_for(RESUMED % re.escape(interrupted))
  first_step = run.wait_for(STEP, resumed_line.end())
  restart_secs = time.monotonic() - killed
  assert run.wait() == 0, run.log()[-4000:]
  assert reference.wait() == 0, reference.log()[-4000:]
  log = run.log()
  assert ('[launch] worker1 failed with exit status 137; stopping every task'
          ' to restart the cluster (restart 1 of --max_restarts 1)\n') in log
  assert [len(run.pids(w)) for w in ('worker0', 'worker1')] == [2, 2]
  # The figures of the restart line are those of the checkpoint the chief
  # restored and of the step lines before it.
  resumed, lost, logged = (int(g) for g in resumed_line.groups())
  assert resumed >= before_kill
  assert re.findall(r'^\[worker0\] INFO:tensorflow:Restoring parameters from '
                    r'%s/model\.ckpt-(\d+)$' % re.escape(interrupted),
                    log[resumed_line.end():], re.M) == [str(resumed)]
  steps_before = [int(s) for s in re.findall(STEP, log[:resumed_line.start()],
                                             re.M)]
  # A progress line shows the global step its step read, which may be the
  # one before that step's own: the chief can save a step past the last one
  # logged, and then nothing was lost.
  assert logged == max(steps_before) and lost == max(0, logged - resumed)
  assert resumed <= int(first_step.group(1)) <= resumed + 2
  assert _checkpoint_step(interrupted) == _checkpoint_step(
      uninterrupted) == LAST_STEP
  accuracy = digits_accuracy(digits_dir, interrupted)
  reference_accuracy = digits_accuracy(digits_dir, uninterrupted)
  print('restarted at step %d (%d lost), training again %.1f s after the '
        'kill: %.2f%%, uninterrupted %.2f%%' % (
            resumed, lost, restart_secs, accuracy,
            reference_accuracy))  # pytest -rP
  assert reference_accuracy > 96
  assert abs(accuracy - reference_accuracy) <= 1.5


ASYNC_LAST_STEP = 300
ROLLBACK = (r'^\[launch\] the chief restores step (\d+), the latest checkpoint '
            r'in %s, onto the ps tasks: at least (\d+) step\(s\) lost \(the '
            r'workers had logged step (\d+)\)$')


def _worker_steps(log, worker):
  return [int(s) for s in re.findall(
      r'^\[%s\] INFO:tensorflow:step (\d+):' % worker, log, re.M)]


@contextlib.contextmanager
def _held(pid):
  """The process stopped (SIGSTOP) inside the block."""
  os.kill(pid, signal.SIGSTOP)
  try:
    yield
  finally:
    os.kill(pid, signal.SIGCONT)


def _async_run(launcher, digits_dir, train_dir):
  return launcher('async', 'clusters.launch',
                  ['--num_ps', '1', '--num_workers', '2', '--max_restarts',
                   '2'],
                  ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
                   '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
                   '--optimizer=sgd', '--learning_rate=0.01',
                   '--max_number_of_steps=%d' % ASYNC_LAST_STEP,
                   '--log_every_n_steps=1', '--save_interval_secs=1',
                   '--save_summaries_secs=600', '--non_chief_wait_secs=1',
                   '--num_readers=1', '--num_preprocessing_threads=1',
                   '--train_dir=%s' % train_dir])


def _kill_worker1_until_it_rejoins(run):
  """SIGKILLs worker1; returns the launcher's line and worker1's first step
  line after it."""
  os.killpg(run.pids('worker1')[0], signal.SIGKILL)
  failed = run.wait_for(r'^\[launch\] worker1 failed with exit status 137; '
                        r'restarting it alone on (\S+) \(restart 1 of '
                        r'--max_restarts 2\); the other tasks go on$')
  # The chief goes on without it. Then it is held until worker1 is back,
  # so that on a busy machine the run cannot end before worker1 rejoins.
  run.wait_for(r'^\[worker0\] INFO:tensorflow:step \d+:', failed.end())
  with _held(run.pids('worker0')[0]):
    rejoined = run.wait_for(r'^\[worker1\] INFO:tensorflow:step (\d+):',
                            failed.end())
  return failed, rejoined


def _kill_the_chief_until_it_steps(run, train_dir, start):
  """SIGKILLs the chief; returns the launcher's ROLLBACK line, the
  restarted chief's restore line and its first step line.

  Worker1 is held from the launcher's line until the restarted chief has
  stepped: only the chief's steps then move the global step from the one
  it restored.
  """
  run.wait_for(r'^\[worker0\] INFO:tensorflow:step \d+:', start)
  os.killpg(run.pids('worker0')[0], signal.SIGKILL)
  rollback = run.wait_for(ROLLBACK % re.escape(train_dir), start)
  with _held(run.pids('worker1')[1]):
    restored = run.wait_for(
        r'^\[worker0\] INFO:tensorflow:Restoring parameters from %s/'
        r'model\.ckpt-(\d+)$' % re.escape(train_dir), rollback.end())
    chief_step = run.wait_for(r'^\[worker0\] INFO:tensorflow:step (\d+):',
                              restored.end())
  return rollback, restored, chief_step


@pytest.mark.slow
def test_async_ps_restarts_a_killed_worker_then_the_chief_alone(
    launcher, digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  run = _async_run(launcher, digits_dir, train_dir)
  # 'step N:', not the start-up's 'steps per epoch' line.
  run.wait_for(r'^\[worker1\] INFO:tensorflow:step \d+:')
  _wait_for_checkpoint(run, train_dir, 1)
  failed, rejoined = _kill_worker1_until_it_rejoins(run)
  # It joined at the global step the chief had reached, not at 0.
  assert int(rejoined.group(1)) >= max(
      _worker_steps(run.log()[:rejoined.start()], 'worker0'))
  rollback, restored, chief_step = _kill_the_chief_until_it_steps(
      run, train_dir, rejoined.end())
  assert run.wait() == 0, run.log()[-4000:]
  log = run.log()
  assert ('[launch] worker0 failed with exit status 137; restarting it alone '
          'on %s (restart 2 of --max_restarts 2); the other tasks go on\n'
          % run.configs('worker0')[0]['cluster']['worker'][0]) in log
  resumed, lost, logged = (int(g) for g in rollback.groups())
  assert int(restored.group(1)) == resumed
  before = log[:rollback.start()]
  assert logged == max(_worker_steps(before, w)[-1]
                       for w in ('worker0', 'worker1'))
  assert lost == max(0, logged - resumed)
  # The cluster went back to the restored step: the chief's second step
  # from there (its first logged) is one or two past it.
  assert resumed < int(chief_step.group(1)) <= resumed + 2
  # Only the task that died was started again, with its first TF_CONFIG.
  assert [len(run.pids(t)) for t in ('ps0', 'worker0', 'worker1')] == [
      1, 2, 2]
  for task in ('worker0', 'worker1'):
    assert run.configs(task)[0] == run.configs(task)[1]
  assert failed.group(1) == run.configs('worker1')[0]['cluster']['worker'][1]
  assert 'starting every task again' not in log
  # Each worker stops at its first step that sees the last step; the other
  # worker's step in flight may take the global step past it.
  assert ASYNC_LAST_STEP <= _checkpoint_step(train_dir) <= ASYNC_LAST_STEP + 4
