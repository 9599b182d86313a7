"""training/watchdog.py: a step that does not finish names the task it waits
for, with stand-in probes; tests/test_cluster_faults.py stops a real ps
task."""

import threading
import time

import pytest

from clusters import cluster
from clusters import peers
from tests.fake_clock import FakeClock
from training import watchdog

_PS = [('ps task 0', '127.0.0.1:2222'), ('ps task 1', '127.0.0.1:2223')]


class _Exits:
  """Stands in for os._exit: records the status instead of exiting."""

  def __init__(self):
    self.statuses = []
    self.called = threading.Event()

  def __call__(self, status):
    self.statuses.append(status)
    self.called.set()


def _watchdog(silent=(), refusing=(), peers=tuple(_PS), **kwargs):
  """A StepWatchdog over _PS whose probe finds the addresses in `silent`
  not answering and those in `refusing` refusing connections; returns it,
  its error and warning lines, its exits and the addresses probed."""
  errors, warnings, probed, exits = [], [], [], _Exits()

  def probe(address):
    probed.append(address)
    if address in refusing:
      return 'connection refused'
    return 'accepts connections but has not answered' if (
        address in silent) else None

  dog = watchdog.StepWatchdog(
      peers, log_fn=lambda fmt, *a: errors.append(fmt % a),
      warn_fn=lambda fmt, *a: warnings.append(fmt % a), exit_fn=exits,
      probe=probe, poll_secs=0.02, **kwargs)
  return dog, errors, warnings, exits, probed


def test_a_step_past_its_bound_names_the_ps_task_that_does_not_answer():
  dog, errors, warnings, exits, _ = _watchdog(silent=['127.0.0.1:2223'],
                                              timeout_secs=0.2)
  with dog:
    with dog.watching('training step 7 of this worker'):
      assert exits.called.wait(10)
  assert exits.statuses == [1]
  assert warnings == []
  assert len(errors) == 1
  assert errors[0].startswith(
      'training step 7 of this worker has not finished after 0 s (bound '
      '0.2 s, --step_timeout_secs): ps task 1 at 127.0.0.1:2223 (accepts '
      'connections but has not answered) does not answer. Stopping this '
      'process (exit 1)'), errors[0]


def _wait_for(lines, count):
  deadline = time.monotonic() + 10
  while len(lines) < count:
    assert time.monotonic() < deadline, lines
    time.sleep(0.01)


def test_a_slow_step_whose_tasks_all_answer_warns_and_waits_on():
  clock = FakeClock()
  dog, errors, warnings, exits, _ = _watchdog(timeout_secs=10, clock=clock)
  with dog:
    with dog.watching('training step 2 of this worker'):
      clock.advance(10)
      _wait_for(warnings, 1)
      clock.advance(10)  # The bound doubled: 20 s.
      _wait_for(warnings, 2)
      clock.advance(10)  # 30 s, within the next bound, 40 s.
      time.sleep(0.2)
  assert exits.statuses == []
  assert errors == []
  assert warnings == [
      'training step 2 of this worker has not finished after 10 s (bound '
      '10 s, --step_timeout_secs); every task it needs answers (ps task 0, '
      'ps task 1), so it waits on its own work or its input. Still waiting.',
      'training step 2 of this worker has not finished after 20 s (bound '
      '20 s, --step_timeout_secs); every task it needs answers (ps task 0, '
      'ps task 1), so it waits on its own work or its input. Still waiting.']


def test_a_task_that_refuses_connections_is_waited_for_with_a_warning():
  # It exited or is being restarted: TensorFlow re-creates the session
  # once it is back.
  clock = FakeClock()
  dog, errors, warnings, exits, _ = _watchdog(refusing=['127.0.0.1:2222'],
                                              timeout_secs=5, clock=clock)
  with dog:
    with dog.watching('training step 4 of this worker'):
      clock.advance(5)
      _wait_for(warnings, 1)
  assert (exits.statuses, errors) == ([], [])
  assert warnings == [
      'training step 4 of this worker has not finished after 5 s (bound 5 s, '
      '--step_timeout_secs): ps task 0 at 127.0.0.1:2222 (connection '
      'refused) is not listening: it exited or is being restarted, and the '
      'step goes on once it is back. Still waiting.']


def test_a_step_that_finishes_while_its_tasks_are_probed_is_not_ended():
  finished = threading.Event()
  exits = _Exits()

  def probe(unused_address):
    finished.wait(10)  # The step ends during the probe.
    return 'accepts connections but has not answered'

  dog = watchdog.StepWatchdog(_PS, timeout_secs=0.05, exit_fn=exits,
                              probe=probe, poll_secs=0.01,
                              log_fn=lambda *a: None)
  with dog:
    with dog.watching('a step'):
      time.sleep(0.2)
    finished.set()
    time.sleep(0.2)
  assert exits.statuses == []


def test_a_step_within_its_bound_probes_nothing():
  dog, errors, warnings, exits, probed = _watchdog(
      silent=['127.0.0.1:2222'], timeout_secs=5)
  with dog:
    for _ in range(3):
      with dog.watching('a step'):
        threading.Event().wait(0.05)
    threading.Event().wait(0.1)  # Between steps nothing is watched.
  assert (probed, errors, warnings, exits.statuses) == ([], [], [], [])


def test_the_end_of_training_is_watched_against_its_own_tasks():
  # The other workers of a synchronous run may have finished: the end of
  # training needs the ps tasks only.
  dog, errors, _, exits, probed = _watchdog(
      silent=['127.0.0.1:2222', '127.0.0.1:3001'], timeout_secs=0.1,
      peers=_PS + [('worker task 1', '127.0.0.1:3001')], final_peers=[_PS[0]])
  with dog:
    dog.watch_until_exit('the end of training')
    assert exits.called.wait(10)
  assert errors[0].startswith('the end of training has not finished')
  assert 'ps task 0 at 127.0.0.1:2222' in errors[0]
  assert set(probed) == {'127.0.0.1:2222'}


def test_a_session_close_past_its_bound_after_the_final_checkpoint_exits_0():
  clock = FakeClock()
  dog, errors, warnings, exits, probed = _watchdog(
      silent=['127.0.0.1:2222'], timeout_secs=1000, clock=clock)
  with dog:
    dog.watch_until_exit('the end of training')
    dog.closing_hook().end(session=None)  # The final checkpoint is written.
    clock.advance(watchdog.CLOSE_SECS - 1)
    time.sleep(0.2)
    assert not exits.called.is_set()
    clock.advance(1)
    assert exits.called.wait(10)
    time.sleep(0.2)  # No second exit, no probe: the close needs no task.
  assert exits.statuses == [0]
  assert (errors, probed) == ([], [])
  assert warnings == [
      'the session close has not returned 20 s after the last step and the '
      'final checkpoint (tf.data\'s autotuning thread can hold up the input '
      'pipeline\'s deletion for up to 60 s); the training is over and its '
      'checkpoints are written: exiting (status 0) without waiting for it']


def test_the_closing_hook_ends_after_the_final_checkpoint():
  # MonitoredSession ends its hooks in list order: the checkpoint saver's
  # final save comes before the close is bounded.
  from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top
  events = []

  class Saver(tf.train.SessionRunHook):
    def end(self, session):
      events.append('final checkpoint')

  dog = watchdog.StepWatchdog([])
  dog._closing = lambda: events.append('close bounded')
  with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    with tf.train.MonitoredSession(hooks=[Saver(), dog.closing_hook()]) as s:
      s.run(step)
  assert events == ['final checkpoint', 'close bounded']


@pytest.mark.parametrize('step_secs, bound', [
    ([], 600.0),          # The first step: graph optimisation, warm-up.
    ([0.05] * 50, 60.0),  # At least a minute.
    ([0.5, 4.0, 1.0], 80.0),  # 20 x the longest recent step.
])
def test_the_derived_bound_follows_the_step_times(step_secs, bound):
  assert watchdog.derived_bound(step_secs) == bound


def test_the_bound_forgets_steps_older_than_the_last_hundred():
  dog = watchdog.StepWatchdog([])
  clock_values = iter([0.0, 30.0] + [30.0 + i for i in range(201)])
  dog._clock = type('Clock', (), {'monotonic': lambda: next(clock_values)})
  with dog.watching('a slow step'):   # 30 s
    pass
  assert dog.bound() == 600.0
  for _ in range(100):                # 100 steps of 1 s push it out.
    with dog.watching('a step'):
      pass
  assert dog.bound() == 60.0


def test_a_period_that_is_no_step_leaves_the_step_times_alone():
  # The session's start, the first step's warm-up: watched, not measured.
  clock = FakeClock()
  dog = watchdog.StepWatchdog([], clock=clock)
  with dog.watching('the start of the session', counts_as_step=False):
    clock.advance(30)
  assert dog.bound() == 600.0
  with dog.watching('training step 2 of this worker'):
    clock.advance(0.5)
  assert dog.bound() == 60.0


def _task(job_name, task_index, num_ps):
  workers = ['127.0.0.1:300%d' % i for i in range(3)]
  ps = ['127.0.0.1:400%d' % i for i in range(num_ps)]
  return cluster.ClusterTask(ps, workers, job_name, task_index)


@pytest.mark.parametrize('num_ps, sync_replicas, expected', [
    (1, False, [('ps task 0', '127.0.0.1:4000')]),
    (1, True, [('ps task 0', '127.0.0.1:4000'),
               ('worker task 0', '127.0.0.1:3000'),
               ('worker task 2', '127.0.0.1:3002')]),
    (0, False, [('worker task 0', '127.0.0.1:3000'),
                ('worker task 2', '127.0.0.1:3002')]),
])
def test_a_step_needs_the_ps_tasks_and_in_lockstep_the_other_workers(
    num_ps, sync_replicas, expected):
  task = _task('worker', 1, num_ps)
  assert peers.needed_at_each_step(task, sync_replicas) == expected


def test_a_step_without_a_cluster_needs_no_task():
  assert peers.needed_at_each_step(None) == []
