"""clusters.task_watch: what the launcher says of tasks that make no
progress, on a fake clock and stand-in process states; the launcher acting
on it is tested in tests/test_launch.py."""

import os
import signal
import subprocess
import sys
import time

import pytest

from clusters import task_watch
from tests.fake_clock import FakeClock


def _watch(states, **kwargs):
  clock = FakeClock()
  watch = task_watch.TaskWatch(clock=clock, state_of=states.get, **kwargs)
  return watch, clock


def test_a_worker_not_finished_within_the_bound_after_the_chief_is_named():
  watch, clock = _watch({41: 'T'})
  for step in (10, 20, 30):  # Progress lines 4 s apart: bound 60 s.
    watch.observe('worker1', 'INFO: step %d: loss = 1.0, ...\n' % step)
    clock.advance(4)
  watch.chief_finished()
  clock.advance(59)
  assert watch.overdue({'worker1': 41}) == []
  clock.advance(1)
  assert watch.overdue({'worker1': 41}) == [
      "[launch] worker1 (pid 41, stopped (SIGSTOP or a job control signal)) "
      "has not finished 60 s after the chief did (bound 60 s, from its step "
      "times; --finish_timeout sets it); its last line, 64 s ago: INFO: step "
      "30: loss = 1.0, .... Stopping it: the chief's final checkpoint is the "
      "run's result\n"]


def test_the_bound_to_finish_grows_with_the_workers_step_times():
  watch, clock = _watch({})
  watch.observe('worker1', 'step 10: loss = 1.0\n')
  clock.advance(30)
  watch.observe('worker1', 'step 20: loss = 1.0\n')
  assert watch.finish_bound('worker1') == 150.0  # 5 x its 30 s gap.
  assert watch.finish_bound('worker2') == 60.0   # No step line seen.
  watch.forget('worker1')
  assert watch.finish_bound('worker1') == 60.0


def test_finish_timeout_sets_the_bound():
  watch, clock = _watch({7: 'S'}, finish_timeout=5)
  watch.chief_finished()
  clock.advance(5)
  lines = watch.overdue({'worker2': 7})
  assert len(lines) == 1
  assert ('worker2 (pid 7, sleeping) has not finished 5 s after the chief '
          'did (bound 5 s, --finish_timeout); it printed nothing.') in lines[0]


def test_a_chief_started_again_has_not_finished():
  # A restart of every task after the chief had finished: the new tasks'
  # bound starts when the new chief finishes.
  watch, clock = _watch({7: 'S'}, finish_timeout=5)
  watch.chief_finished()
  watch.forget('worker1')
  clock.advance(5)
  assert len(watch.overdue({'worker1': 7})) == 1
  watch.forget('worker0')
  clock.advance(100)
  assert watch.overdue({'worker1': 7}) == []


def test_nothing_is_overdue_before_the_chief_finishes():
  watch, clock = _watch({7: 'T'}, finish_timeout=1)
  clock.advance(1000)
  assert watch.overdue({'worker1': 7}) == []


def test_a_task_stopped_for_30_s_is_named_once_per_stop():
  states = {12: 'T'}
  watch, clock = _watch(states)
  assert watch.stopped({'ps0': 12}) == []
  clock.advance(29)
  assert watch.stopped({'ps0': 12}) == []
  clock.advance(1)
  assert watch.stopped({'ps0': 12}) == [
      '[launch] ps0 (pid 12) has been stopped (SIGSTOP or a job control '
      'signal) for 30 s: the tasks that need it wait. Send it SIGCONT '
      '(kill -CONT 12) to go on, or Ctrl-C to stop every task\n']
  clock.advance(100)
  assert watch.stopped({'ps0': 12}) == []  # Said once.
  states[12] = 'S'  # SIGCONT...
  assert watch.stopped({'ps0': 12}) == []
  states[12] = 'T'  # ... and stopped again: a new stop.
  assert watch.stopped({'ps0': 12}) == []
  clock.advance(30)
  assert len(watch.stopped({'ps0': 12})) == 1


def test_process_state_reads_the_kernels_state_of_a_real_process():
  process = subprocess.Popen([sys.executable, '-c',
                              'import time; time.sleep(60)'])
  try:
    os.kill(process.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while task_watch.process_state(process.pid) != 'T':
      assert time.monotonic() < deadline
      time.sleep(0.05)
    os.kill(process.pid, signal.SIGCONT)
    while task_watch.process_state(process.pid) == 'T':
      assert time.monotonic() < deadline
      time.sleep(0.05)
    assert task_watch.process_state(process.pid) in ('S', 'R')
  finally:
    process.kill()
    process.wait(timeout=10)
  assert task_watch.process_state(process.pid) is None


@pytest.mark.parametrize('state, words', [
    ('T', 'stopped (SIGSTOP or a job control signal)'),
    ('t', 'stopped by a debugger'),
    ('X', 'in state X'),
])
def test_states_are_named_in_words(state, words):
  assert task_watch.describe_state(state) == words
