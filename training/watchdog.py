"""Says which task a step waits for when the step does not finish.

A step runs in TensorFlow's C++ code. When a task it needs stops answering
without closing its connections (a ps task stopped with SIGSTOP or by a
debugger, a machine frozen or swapping, a network that drops packets), the
step waits for ever and neither gRPC nor TensorFlow says a word. So a thread
of our own watches each step:

  * a step that runs past the bound makes it probe the tasks the step
    needs (clusters/peers.py: a gRPC server answers a new connection at
    once, a stopped one does not);
  * when one accepts connections but does not answer (stopped, hung), it
    logs an error naming the task, its address and why, and ends the
    process with status 1, so that the
    launcher or Slurm restarts it (a restarted worker then waits for the
    task at start-up, saying so every few seconds). Nothing is saved on the
    way out: the variables to save live on the task that does not answer,
    and the latest checkpoint is whole;
  * when one refuses connections (it exited, or is being restarted),
    TensorFlow re-creates the session once it is back: a warning names it
    and the watch goes on, the bound doubled for the next warning;
  * when every task answers, the step is slow of itself (its input, a
    busy machine): a warning says so and the watch goes on, the bound
    doubled too.

The bound is --step_timeout_secs when given. Otherwise it follows the step
times seen: 20 times the longest of the last 100 steps (the first, which
warms up, left out), at least 60 s, and 10 minutes for the first step
(graph optimisation, the input's warm-up) and for the session's start.
The end of training (the final checkpoint, the session's close) is watched
as one more step, against the ps tasks only: the other workers may have
finished. Once the final checkpoint is written (`closing_hook`, the last
hook to end), the session's close has CLOSE_SECS: deleting the input
pipeline's iterator waits for tf.data's autotuning thread, which wakes
only every 60 s once a run is a few minutes long (seen: 48 to 54 s), and
nothing is left to lose by then, so past the bound a warning says so and
the process ends with status 0, as it would have.

  with watchdog.StepWatchdog(peers.needed_at_each_step(task, sync)) as dog:
    while ...:
      with dog.watching('step'):
        session.run(train_op)
"""

import collections
import contextlib
import os
import threading
import time

from clusters import addresses
from clusters import peers as peers_lib
from tf2_compat.slim_compat import tf
from training import preemption

FIRST_STEP_SECS = 600.0
MIN_BOUND_SECS = 60.0
STEP_TIME_FACTOR = 20
RECENT_STEPS = 100
EXIT_STATUS = 1
CLOSE_SECS = 20.0

# The watched period: `what` started at `started` (monotonic seconds),
# `bound` seconds allowed, the (name, address) of the `peers` it needs;
# None for the session's close, which needs none and is not waited for.
_Period = collections.namedtuple('_Period',
                                 ['what', 'started', 'bound', 'peers'])


def derived_bound(step_secs):
  """The bound of the next step, from the durations of recent steps."""
  if not step_secs:
    return FIRST_STEP_SECS
  return max(MIN_BOUND_SECS, STEP_TIME_FACTOR * max(step_secs))


class StepWatchdog:
  """Watches steps from a thread; names a task that stops answering.

  Args:
    peers: [(name, address)] of the tasks a step needs, e.g.
      clusters.peers.needed_at_each_step(task, sync); [] without a cluster.
    final_peers: those the end of training needs (the ps tasks,
      clusters.peers.needed_by(task)); `peers` by default.
    timeout_secs: the bound of every step; None derives it from the steps
      seen (see derived_bound).
    log_fn: where the error naming a task goes (tf.logging.error).
    warn_fn: where the warning of a slow step goes (tf.logging.warning).
    exit_fn: ends the process; os._exit by default, which works from the
      watching thread while the main thread waits in TensorFlow.
    probe: clusters.peers.why_not_answering, or a stand-in.
    clock: the time module, or a stand-in with monotonic().
    poll_secs: how often the thread looks at the step in progress.
  """

  def __init__(self, peers, final_peers=None, timeout_secs=None,
               log_fn=None, warn_fn=None,
               exit_fn=os._exit,  # pylint: disable=protected-access
               probe=peers_lib.why_not_answering, clock=time, poll_secs=1.0):
    self._peers = list(peers)
    self._final_peers = self._peers if final_peers is None else list(
        final_peers)
    self._timeout_secs = timeout_secs
    self._log = log_fn or tf.logging.error
    self._warn = warn_fn or tf.logging.warning
    self._exit = exit_fn
    self._probe = probe
    self._clock = clock
    self._poll_secs = poll_secs
    self._step_secs = collections.deque(maxlen=RECENT_STEPS)
    self._lock = threading.Lock()
    self._closed = threading.Event()
    # The watched _Period, or None.
    self._watched = None
    self._thread = None

  def bound(self):
    """The bound of the next step, in seconds."""
    if self._timeout_secs:
      return self._timeout_secs
    with self._lock:
      return derived_bound(self._step_secs)

  def _describe_bound(self, bound):
    if self._timeout_secs:
      return '%g s, --step_timeout_secs' % bound
    return ('%d s, derived from the steps seen; --step_timeout_secs sets it'
            % bound)

  @contextlib.contextmanager
  def watching(self, what, counts_as_step=True):
    """Watches the block, e.g. one session.run, as `what` ('step 12').

    Args:
      what: how the error and the warning name the block.
      counts_as_step: whether its duration joins the step times the
        derived bound follows.
    """
    started = self._clock.monotonic()
    period = _Period(what, started, self.bound(), self._peers)
    with self._lock:
      self._watched = period
    try:
      yield
    finally:
      with self._lock:
        self._watched = None
        if counts_as_step:
          self._step_secs.append(self._clock.monotonic() - started)

  def watch_until_exit(self, what):
    """Watches from now until the watchdog's block ends, as `what`: the
    end of training, whose final save and session close run in the
    __exit__ of blocks inside the watchdog's."""
    period = _Period(what, self._clock.monotonic(), self.bound(),
                     self._final_peers)
    with self._lock:
      self._watched = period

  def closing_hook(self):
    """A session hook to pass last: its `end`, after the final checkpoint,
    gives the session's close CLOSE_SECS."""
    return _ClosingHook(self)

  def _closing(self):
    period = _Period('the session close', self._clock.monotonic(),
                     CLOSE_SECS, None)
    with self._lock:
      self._watched = period

  def __enter__(self):
    self._thread = threading.Thread(target=self._watch, name='StepWatchdog',
                                    daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *unused_exc_info):
    with self._lock:
      self._watched = None
    self._closed.set()
    self._thread.join(timeout=5)

  def _watch(self):
    while not self._closed.wait(self._poll_secs):
      with self._lock:
        watched = self._watched
      if watched is None:
        continue
      elapsed = self._clock.monotonic() - watched.started
      if elapsed < watched.bound:
        continue
      if watched.peers is None:
        self._give_up_close(elapsed)
        with self._lock:  # Once (the stand-in exits of tests return).
          if self._watched is watched:
            self._watched = None
      else:
        self._check(watched, elapsed)

  def _give_up_close(self, elapsed):
    self._warn('the session close has not returned %d s after the last '
               'step and the final checkpoint (tf.data\'s autotuning thread '
               'can hold up the input pipeline\'s deletion for up to 60 s); '
               'the training is over and its checkpoints are written: '
               'exiting (status 0) without waiting for it', elapsed)
    preemption.flush_output()
    self._exit(0)

  def _check(self, watched, elapsed):
    """Probes the peers once the `watched` period ran past its bound: ends
    the process when one does not answer, else warns and doubles the
    bound."""
    what, started, bound, peers = watched
    hung, gone = [], []
    for name, address in peers:
      why = self._probe(address)
      if why is not None:
        (gone if why == addresses.REFUSED else hung).append(
            '%s at %s (%s)' % (name, address, why))
    with self._lock:
      if self._watched is not watched:  # It finished while probed.
        return
    lead = '%s has not finished after %d s (bound %s)' % (
        what, elapsed, self._describe_bound(bound))
    if hung:
      self._log(
          '%s: %s does not answer. Stopping this process (exit %d) so that '
          'it can be restarted; it waits for the task at start-up, and the '
          'latest checkpoint is whole.', lead, ' and '.join(hung),
          EXIT_STATUS)
      preemption.flush_output()
      self._exit(EXIT_STATUS)
      return
    if gone:
      self._warn('%s: %s is not listening: it exited or is being '
                 'restarted, and the step goes on once it is back. Still '
                 'waiting.', lead, ' and '.join(gone))
    else:
      answering = ', '.join(name for name, _ in peers)
      self._warn(
          '%s; %s, so it waits on its own work or its input. Still waiting.',
          lead, 'every task it needs answers (%s)' % answering if answering
          else 'it needs no other task')
    with self._lock:
      if self._watched is watched:
        self._watched = watched._replace(bound=2 * bound)


class _ClosingHook(tf.train.SessionRunHook):
  """Ends after the hooks before it (the final checkpoint): the session's
  close is all that is left."""

  def __init__(self, watchdog):
    self._watchdog = watchdog

  def end(self, session):
    del session  # The close comes after every hook's end.
    self._watchdog._closing()  # pylint: disable=protected-access
