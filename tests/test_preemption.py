"""SIGTERM saves and exits 0; a failed checkpoint write is named, keeps
the previous checkpoint and leaves no temporary file."""

import os
import random
import re
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest

from tf2_compat.slim_compat import tf
from training import preemption
from tests.script_runner import REPO
from tests.script_runner import kill_group
from tests.script_runner import run_script
from tests.script_runner import script_env
from tests.script_runner import start_script
from tests.script_runner import wait_for_log_line

TRAIN = 'train_image_classifier.py'
# Kubernetes' default grace period before SIGKILL.
GRACE_SECS = 30


def _flags(digits_dir, train_dir, steps, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--model_name=lenet', '--num_clones=2', '--clone_on_cpu',
          '--batch_size=16', '--optimizer=sgd', '--learning_rate=0.01',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=1',
          '--save_interval_secs=600', '--train_dir=%s' % train_dir] + list(
              extra)


def _latest_step(train_dir):
  latest = tf.train.latest_checkpoint(train_dir)
  return None if latest is None else int(latest.rsplit('-', 1)[1])


@pytest.mark.slow
@pytest.mark.parametrize('seed', [1, 2])
def test_sigterm_saves_the_step_reached_and_exits_0(digits_dir, tmp_path,
                                                    seed):
  train_dir = str(tmp_path / 'train')
  process = start_script(TRAIN, *_flags(digits_dir, train_dir, 100000))
  try:
    wait_for_log_line(process, r'step \d+: loss')
    time.sleep(random.Random(seed).uniform(0.0, 2.0))
    sent = time.time()
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=GRACE_SECS)
    elapsed = time.time() - sent
  finally:
    kill_group(process)
  assert process.returncode == 0, rest[-3000:]
  assert elapsed < GRACE_SECS
  step = _latest_step(train_dir)
  assert step and step > 1
  assert re.search(r'SIGTERM: stopped; saved %s/model.ckpt-%d$' % (
      re.escape(train_dir), step), rest, re.M), rest[-2000:]
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert reader.get_tensor('global_step') == step

  result = run_script(TRAIN, *_flags(digits_dir, train_dir, step + 3))
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'Restoring parameters from %s/model.ckpt-%d' % (
      train_dir, step) in result.stdout
  assert _latest_step(train_dir) == step + 3


def _limit_file_size(max_bytes):
  def preexec():
    os.setsid()
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
  return preexec


def _checkpoint_files(train_dir):
  return sorted(name for name in os.listdir(train_dir)
                if name.startswith(('model.ckpt', 'checkpoint')))


@pytest.mark.slow
def test_a_failed_checkpoint_write_is_named_and_keeps_the_last_one(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 5))
  assert result.returncode == 0, result.stdout[-3000:]
  assert _latest_step(train_dir) == 5
  saved = _checkpoint_files(train_dir)
  # A disk that fills up: no file may grow past 1 MB, and LeNet's
  # checkpoint is 13 MB (Python ignores SIGXFSZ: the write fails, EFBIG).
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, TRAIN)] + _flags(
          digits_dir, train_dir, 10, '--save_interval_secs=1'),
      cwd=REPO, env=script_env(), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True, timeout=300,
      preexec_fn=_limit_file_size(1 << 20))
  # The limit would stop a restarted run too: exit 2, never restarted.
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  errors = [l for l in result.stdout.splitlines() if l.startswith('error:')]
  assert len(errors) == 1
  assert re.match(
      r"error: writing the checkpoint of step \d+ to %s failed \(File too large\); the "
      r'latest checkpoint is still %s/model.ckpt-5\. Free space' % (
          re.escape(train_dir), re.escape(train_dir)), errors[0]), errors[0]
  assert _latest_step(train_dir) == 5
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert reader.get_tensor('global_step') == 5
  # Each failed save removed what it began (model.ckpt-N...tempstate...).
  assert _checkpoint_files(train_dir) == saved
  assert 'removed the temporary files of the failed save of step' in (
      result.stdout)


class _Exits:
  """Stands in for os._exit: records the status instead of exiting."""

  def __init__(self):
    self.statuses = []
    self.called = threading.Event()
    self.at = None

  def __call__(self, status):
    self.statuses.append(status)
    self.at = time.monotonic()
    self.called.set()


def _signal_stop(checkpoint_dir=None, **kwargs):
  lines = []
  exits = _Exits()
  stop = preemption.SignalStop(
      checkpoint_dir=checkpoint_dir, exit_fn=exits,
      log_fn=lambda fmt, *args: lines.append(fmt % args), **kwargs)
  return stop, lines, exits


def _wait_until(condition, timeout=10):
  deadline = time.monotonic() + timeout
  while not condition():
    assert time.monotonic() < deadline
    time.sleep(0.01)


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_a_signal_before_the_first_step_exits_at_once(signum):
  # Python's own SIGINT handler, even where the shell ignores SIGINT.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    stop, lines, exits = _signal_stop()
    with stop:
      os.kill(os.getpid(), signum)
      assert exits.called.wait(10)
  finally:
    signal.signal(signal.SIGINT, previous)
  assert exits.statuses == [128 + signum]
  assert lines == ['%s: stopped before the first step; nothing was trained, '
                   'so nothing is lost' % signal.Signals(signum).name]
  assert stop.requested is None


def test_a_signal_is_seen_while_the_main_thread_waits_in_tensorflow():
  stop, lines, exits = _signal_stop()
  with tf.Graph().as_default():
    # A dequeue nobody feeds: the main thread waits in C++, where no Python
    # signal handler runs, until the run times out.
    dequeue = tf.queue.FIFOQueue(1, tf.float32).dequeue()
    with tf.Session() as session, stop:
      threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
      with pytest.raises(tf.errors.DeadlineExceededError):
        # 5 s: room for a busy machine to schedule the timer and the
        # watching thread.
        session.run(dequeue, options=tf.RunOptions(timeout_in_ms=5000))
      returned = time.monotonic()
  assert exits.statuses == [128 + signal.SIGTERM]
  assert exits.at < returned - 1  # During the wait, not after it.


def test_a_second_ctrl_c_exits_while_the_step_waits_in_tensorflow():
  # A handler that records, where Python's would raise KeyboardInterrupt
  # once the run returns.
  handled = []
  previous = signal.signal(signal.SIGINT, lambda *_: handled.append(1))
  stop, lines, exits = _signal_stop()
  try:
    with tf.Graph().as_default():
      dequeue = tf.queue.FIFOQueue(1, tf.float32).dequeue()
      with tf.Session() as session, stop:
        stop.training_started()
        for delay in (0.2, 0.5):
          threading.Timer(delay, os.kill,
                          (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(tf.errors.DeadlineExceededError):
          session.run(dequeue, options=tf.RunOptions(timeout_in_ms=5000))
        returned = time.monotonic()
  finally:
    signal.signal(signal.SIGINT, previous)
  assert exits.statuses == [128 + signal.SIGINT]
  assert exits.at < returned - 1  # During the wait, not after it.
  assert handled  # Python's handler ran too, once the run returned.
  assert lines == ['SIGINT again: stopped at once, without finishing the '
                   'step; the chief keeps the checkpoints']


def test_a_first_sigterm_in_training_ends_the_loop_a_second_exits_at_once(
    tmp_path):
  tf.train.update_checkpoint_state(str(tmp_path), 'model.ckpt-7')
  (tmp_path / 'model.ckpt-7.index').write_bytes(b'')
  stop, lines, exits = _signal_stop(checkpoint_dir=str(tmp_path))
  with stop:
    stop.training_started()
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.requested == 'SIGTERM'  # Before the loop's next check.
    _wait_until(lambda: lines)
    assert not exits.statuses
    os.kill(os.getpid(), signal.SIGTERM)
    assert exits.called.wait(10)
  assert exits.statuses == [128 + signal.SIGTERM]
  assert lines == [
      'SIGTERM: stopping after the step in progress, then saving a '
      'checkpoint (a second SIGTERM stops at once, without saving)',
      'SIGTERM again: stopped at once, without finishing the step; the '
      'latest checkpoint, %s/model.ckpt-7, is whole: a resumed run starts '
      'there' % tmp_path]


def test_in_a_srun_step_a_second_sigterm_lets_the_stop_go_on(tmp_path):
  stop, lines, exits = _signal_stop(checkpoint_dir=str(tmp_path),
                                    second_stops_at_once=False)
  with stop:
    stop.training_started()
    for _ in range(3):  # Slurm's time limit sent two within a second.
      os.kill(os.getpid(), signal.SIGTERM)
    _wait_until(lambda: len(lines) == 3)
    assert stop.requested == 'SIGTERM'
  assert not exits.statuses
  assert lines == [
      'SIGTERM: stopping after the step in progress, then saving a '
      'checkpoint'] + ['SIGTERM again: the stop goes on (a srun step: Slurm '
                       'sends SIGKILL when it will wait no longer)'] * 2


def test_handlers_are_restored_after_the_stop():
  before = signal.getsignal(signal.SIGTERM)
  with preemption.SignalStop():
    assert signal.getsignal(signal.SIGTERM) is not before
  assert signal.getsignal(signal.SIGTERM) is before
  assert signal.set_wakeup_fd(-1) == -1
