"""What SIGTERM does to a training process, whatever the process is doing.

Preemptible machines (cloud spot instances, Kubernetes evictions) send
SIGTERM, then SIGKILL after a grace period (30 s by default on
Kubernetes). What a SIGTERM does depends on when it comes:

  * before the first step (waiting for the cluster's ps tasks or for the
    chief, building the graph, creating the session): no step has run, so
    the process says so and exits at once, status 143 (128 + SIGTERM).
    Ctrl-C (SIGINT) does the same then, status 130;
  * during training, the first one: the loop checks `requested` before
    each step; once it is set, the loop ends, the monitored session closes
    as at the last step, the chief's checkpoint hook saves the step reached
    and the script exits 0. The time to stop is the rest of the step in
    progress plus one checkpoint write;
  * during training, a second one: the process exits at once, status 143,
    without finishing the step or the checkpoint write; the latest
    checkpoint is still whole (a checkpoint becomes the latest only once it
    is completely written), and the steps since it are lost. Not so for
    the tasks of a srun step: Slurm may send SIGTERM more than once as it
    ends a job (at its time limit, a second one follows the first within a
    second) and stops it with SIGKILL KillWait seconds later, so there a
    second SIGTERM is logged and the stop goes on.
  * Ctrl-C during training raises KeyboardInterrupt once the step in
    progress returns; a second Ctrl-C exits at once, status 130, as a
    second SIGTERM does (a step that waits for a task that does not
    answer never returns).

Python runs a signal handler only when the main thread comes back to the
interpreter, never while it waits inside TensorFlow's C++ code (a session
being created waits for every ps task; a step waits for its input or its
ps). So the signals also go to a socket (signal.set_wakeup_fd) that a
thread of ours reads: it acts on them at once, whatever the main thread is
doing.

  with preemption.SignalStop(checkpoint_dir=train_dir) as stop:
    session = ...                     # SIGTERM here: exit 143 at once
    stop.training_started()
    while not session.should_stop() and not stop.requested:
      session.run(train_op)
"""

import os
import signal
import socket
import sys
import threading

from tf2_compat.slim_compat import tf


class SignalStop:
  """Stops training after its step on a signal; before training, at once.

  Must be entered in the main thread (Python sets signal handlers only
  there).

  Args:
    signals: the signals that stop training after the step in progress
      (SIGTERM by default).
    checkpoint_dir: where the chief's checkpoints are, to name the latest
      one when a second signal stops it at once; None for a non-chief
      worker.
    log_fn: where the lines saying what happens go (tf.logging.info).
    exit_fn: ends the process with a status; os._exit by default, which
      works from the watching thread and skips the clean-up that would
      wait for the main thread.
    second_stops_at_once: whether a second signal during training ends the
      process at once; False where the sender repeats its signal and has
      its own hard stop (Slurm's SIGKILL).
  """

  # Before the first step these end the process at once too; afterwards
  # they keep Python's own handling (KeyboardInterrupt).
  _BEFORE_TRAINING = (signal.SIGINT,)

  def __init__(self, signals=(signal.SIGTERM,), checkpoint_dir=None,
               log_fn=None, exit_fn=os._exit,  # pylint: disable=protected-access
               second_stops_at_once=True):
    self._signals = tuple(signals)
    self._second_stops_at_once = second_stops_at_once
    self._checkpoint_dir = checkpoint_dir
    self._log = log_fn or tf.logging.info
    self._exit = exit_fn
    self._previous = {}
    self._previous_wakeup_fd = -1
    self._wakeup = None  # (read end, write end)
    self._watcher = None
    self._training = False
    self._received = 0
    self._interrupts = 0  # SIGINTs during training.
    self.requested = None  # The signal's name once one arrived.

  def training_started(self):
    """From now on a first signal ends the loop, not the process.

    Call it in the main thread, right before the first step.
    """
    for signum in self._BEFORE_TRAINING:
      if signum in self._previous and signum not in self._signals:
        signal.signal(signum, self._previous.pop(signum))
    self._training = True

  def _handle(self, signum, unused_frame):
    # In the main thread, between two steps: the loop sees `requested` at
    # once. The watching thread decides the rest.
    if self._training and signum in self._signals and self.requested is None:
      self.requested = signal.Signals(signum).name

  def __enter__(self):
    for signum in self._signals:
      self._previous[signum] = signal.signal(signum, self._handle)
    for signum in self._BEFORE_TRAINING:
      # An ignored SIGINT (a background job) stays ignored.
      if (signum not in self._previous and
          signal.getsignal(signum) is signal.default_int_handler):
        self._previous[signum] = signal.signal(signum, self._handle)
    read_end, write_end = socket.socketpair()
    write_end.setblocking(False)
    self._wakeup = (read_end, write_end)
    self._previous_wakeup_fd = signal.set_wakeup_fd(write_end.fileno())
    self._watcher = threading.Thread(target=self._watch, args=(read_end,),
                                     name='SignalStop', daemon=True)
    self._watcher.start()
    return self

  def __exit__(self, *unused_exc_info):
    signal.set_wakeup_fd(self._previous_wakeup_fd)
    for signum, handler in self._previous.items():
      signal.signal(signum, handler)
    self._previous.clear()
    read_end, write_end = self._wakeup
    write_end.close()  # The watcher reads the end of the stream and returns.
    self._watcher.join(timeout=5)
    read_end.close()

  def _watch(self, read_end):
    while True:
      try:
        received = read_end.recv(64)
      except OSError:
        return
      if not received:
        return
      for signum in received:
        self._react(signum)

  def _react(self, signum):
    """Runs in the watching thread for each signal received."""
    if signum in self._signals:
      self._received += 1
    elif signum not in self._BEFORE_TRAINING:
      return  # Python's own handler deals with it.
    elif self._training:
      # Python's KeyboardInterrupt waits for the main thread to leave
      # TensorFlow, which a step that waits for a task never does.
      self._interrupts += 1
      if self._interrupts > 1:
        self._log('%s again: stopped at once, without finishing the step; '
                  '%s', signal.Signals(signum).name, self._what_is_kept())
        self._exit_now(signum)
      return
    name = signal.Signals(signum).name
    if not self._training:
      self._log('%s: stopped before the first step; nothing was trained, so '
                'nothing is lost', name)
      self._exit_now(signum)
    elif self._received == 1:
      if self.requested is None:
        self.requested = name
      self._log('%s: stopping after the step in progress%s%s', name,
                ', then saving a checkpoint' if self._checkpoint_dir else '',
                ' (a second %s stops at once, without saving)' % name
                if self._second_stops_at_once else '')
    elif not self._second_stops_at_once:
      self._log('%s again: the stop goes on (a srun step: Slurm sends '
                'SIGKILL when it will wait no longer)', name)
    else:
      self._log('%s again: stopped at once, without finishing the step; %s',
                name, self._what_is_kept())
      self._exit_now(signum)

  def _what_is_kept(self):
    if self._checkpoint_dir is None:
      return 'the chief keeps the checkpoints'
    latest = tf.train.latest_checkpoint(self._checkpoint_dir)
    if latest is None:
      return 'no checkpoint was saved yet in %s' % self._checkpoint_dir
    return ('the latest checkpoint, %s, is whole: a resumed run starts '
            'there' % latest)

  def _exit_now(self, signum):
    flush_output()
    self._exit(128 + signum)


def flush_output():
  """Flushes stdout and stderr before an os._exit, which would not."""
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except (OSError, ValueError):
      pass
