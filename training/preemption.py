"""Stopping on SIGTERM between two steps, with a checkpoint.

Preemptible machines (cloud spot instances, Kubernetes evictions) send
SIGTERM, then SIGKILL after a grace period (30 s by default on
Kubernetes). The training loop checks `requested` before each step; once it
is set, the loop ends, the monitored session closes as at the last step,
and the chief's checkpoint hook saves the step reached. The time to stop is
the rest of the step in progress plus one checkpoint write.

  with preemption.SignalStop() as stop:
    while not session.should_stop() and not stop.requested:
      session.run(train_op)
"""

import signal


class SignalStop:
  """Records the first of `signals` received instead of dying of it.

  Args:
    signals: the signals to catch (SIGTERM by default).
  """

  def __init__(self, signals=(signal.SIGTERM,)):
    self._signals = tuple(signals)
    self._previous = {}
    self.requested = None  # The signal's name once one arrived.

  def _handle(self, signum, unused_frame):
    if self.requested is None:
      self.requested = signal.Signals(signum).name

  def __enter__(self):
    for signum in self._signals:
      self._previous[signum] = signal.signal(signum, self._handle)
    return self

  def __exit__(self, *unused_exc_info):
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
