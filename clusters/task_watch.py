"""What the launcher says of tasks that make no progress, and when it stops
waiting for them.

A task can stop making progress without exiting: stopped (SIGSTOP, a
debugger, `kill -STOP` by a job scheduler) or hung. A worker whose step
waits for such a task names it and exits (training/watchdog.py), but
nothing waits for a worker in asynchronous ps training: the chief trains
to the last step, saves and exits 0, and the launcher, which waits for
every worker, would wait for ever without a line. So the launcher watches
too:

  * a task the kernel shows stopped (state T) for STOPPED_REPORT_SECS is
    named once, with what to do ("send SIGCONT, or Ctrl-C");
  * once the chief has finished, every other worker has a bound to finish
    in as well: the longer of MIN_FINISH_SECS and FINISH_FACTOR times the
    longest gap between two of its progress lines, or the launcher's
    --finish_timeout. A worker past it is named with its state and its
    last line's age, and stopped; the chief's final checkpoint is the
    run's result, so the launcher exits 0.

Lines and decisions only; clusters/local_cluster.py acts on them.
"""

import threading
import time

from clusters import process_tree
from clusters import restarts
from clusters import script_contract

CHIEF = 'worker0'
STOPPED_REPORT_SECS = 30.0
MIN_FINISH_SECS = 60.0
FINISH_FACTOR = 5

_STATE_WORDS = {
    'R': 'running', 'S': 'sleeping', 'D': 'waiting on a disk or device',
    'T': 'stopped (SIGSTOP or a job control signal)',
    't': 'stopped by a debugger', 'Z': 'exited, not yet reaped',
}


def process_state(pid):
  """The kernel's one-letter state of `pid` (R, S, D, T, t, Z, ...), None
  when there is no such process or no /proc (not Linux)."""
  found = process_tree.process_stat(pid)
  return found and found.state


def describe_state(state):
  return _STATE_WORDS.get(state, 'in state %s' % state)


class TaskWatch:
  """Progress lines and stopped states of a cluster's tasks, and the lines
  the launcher prints when a task makes no progress.

  Args:
    finish_timeout: seconds the other workers have to finish once the
      chief has; None derives it from their progress lines.
    clock: the time module, or a stand-in with monotonic().
    state_of: process_state, or a stand-in.

  Raises:
    ValueError: a finish_timeout that is not a finite number > 0.
  """

  def __init__(self, finish_timeout=None, clock=time, state_of=process_state):
    if finish_timeout is not None:
      restarts.check_seconds(
          'finish_timeout', finish_timeout, False, 'the time the other '
          'workers have to finish once the chief has, or none to derive it '
          'from their step times')
    self._finish_timeout = finish_timeout
    self._clock = clock
    self._state_of = state_of
    self._lock = threading.Lock()
    self._last_line = {}  # Task name -> (time, text) of its last line.
    self._longest_gap = {}  # Task name -> longest gap between step lines.
    self._last_step_line = {}
    self._stopped_since = {}  # pid -> when it was first seen stopped.
    self._reported = set()  # pids reported stopped, until they run again.
    self._chief_finished = None

  def observe(self, task_name, line):
    """Notes a line relayed from `task_name`."""
    now = self._clock.monotonic()
    with self._lock:
      self._last_line[task_name] = (now, line.strip())
      if script_contract.STEP_LINE.search(line):
        previous = self._last_step_line.get(task_name)
        if previous is not None:
          self._longest_gap[task_name] = max(
              self._longest_gap.get(task_name, 0.0), now - previous)
        self._last_step_line[task_name] = now

  def forget(self, task_name):
    """A task started again: its lines so far no longer count, and the
    chief's finish no longer does once the chief (worker0) starts again,
    as in a restart of every task."""
    with self._lock:
      for record in (self._last_line, self._longest_gap,
                     self._last_step_line):
        record.pop(task_name, None)
    if task_name == CHIEF:
      self._chief_finished = None

  def chief_finished(self):
    """The chief exited 0: the other workers' bound starts now."""
    if self._chief_finished is None:
      self._chief_finished = self._clock.monotonic()

  def finish_bound(self, task_name):
    """Seconds `task_name` has to finish once the chief has."""
    if self._finish_timeout is not None:
      return self._finish_timeout
    with self._lock:
      gap = self._longest_gap.get(task_name, 0.0)
    return max(MIN_FINISH_SECS, FINISH_FACTOR * gap)

  def overdue(self, running):
    """The lines naming the workers of `running` ({name: pid}, the chief
    finished) past their bound to finish; [] when none is, or the chief
    has not finished."""
    if self._chief_finished is None:
      return []
    waited = self._clock.monotonic() - self._chief_finished
    lines = []
    for name, pid in sorted(running.items()):
      bound = self.finish_bound(name)
      if waited < bound:
        continue
      lines.append(
          '[launch] %s (pid %d, %s) has not finished %d s after the chief '
          'did (bound %s); %s. Stopping it: the chief\'s final checkpoint '
          'is the run\'s result\n' % (
              name, pid, describe_state(self._state_of(pid)), waited,
              self._describe_bound(bound), self._last_line_text(name)))
    return lines

  def _describe_bound(self, bound):
    if self._finish_timeout is not None:
      return '%g s, --finish_timeout' % bound
    return '%d s, from its step times; --finish_timeout sets it' % bound

  def _last_line_text(self, name):
    with self._lock:
      last = self._last_line.get(name)
    if last is None:
      return 'it printed nothing'
    at, text = last
    return 'its last line, %d s ago: %s' % (self._clock.monotonic() - at,
                                            text[:200])

  def stopped(self, running):
    """Lines naming each task of `running` ({name: pid}) the kernel has
    shown stopped for STOPPED_REPORT_SECS, once per stop."""
    now = self._clock.monotonic()
    lines = []
    for name, pid in sorted(running.items()):
      state = self._state_of(pid)
      if state not in ('T', 't'):
        self._stopped_since.pop(pid, None)
        self._reported.discard(pid)
        continue
      since = self._stopped_since.setdefault(pid, now)
      if now - since < STOPPED_REPORT_SECS or pid in self._reported:
        continue
      self._reported.add(pid)
      lines.append(
          '[launch] %s (pid %d) has been %s for %d s: the tasks that need '
          'it wait. Send it SIGCONT (kill -CONT %d) to go on, or Ctrl-C to '
          'stop every task\n' % (name, pid, describe_state(state),
                                 now - since, pid))
    return lines
