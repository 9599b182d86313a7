"""Where the launcher's lines and its tasks' go, and what becomes of them
when that output breaks.

The launcher reads every task's pipe to its end whatever happens to its
own output: a task whose pipe is not read blocks once the pipe is full
(64 KiB, some hundreds of lines), and the cluster with it. So a write here
never raises. Training goes on either way: the checkpoints in --train_dir,
not the log, are what a run makes, and --timeout, Ctrl-C or SIGTERM still
end it.

  * The output is closed (a broken pipe: `... | head -5` has exited; a
    closed file): nothing will read it again, so every later line is
    dropped without a try. A broken pipe's descriptor is pointed at
    /dev/null, so that what else writes there, Python's own flush of
    stdout at exit included, has nothing to complain of.
  * A write fails (the disk is full, a quota is reached, an I/O error):
    the file may take writes again once space is freed, so every later
    line is tried; the first that goes through comes after a line that
    counts those lost.

Either is said once on stderr (a failing write: once each time writes
start failing); if stderr is gone too, nothing is said.
"""

import errno
import os
import sys
import threading

# A write that fails so will never go through: the reader is gone.
_CLOSED = (errno.EPIPE, errno.EBADF)


class _Stream:
  """Writes whole texts to a stream: to its file descriptor when it has
  one, so that nothing is left in Python's buffers after a failed write
  (a buffered stream would try it again at every flush, at exit too)."""

  def __init__(self, stream):
    self.stream = stream
    self.encoding = getattr(stream, 'encoding', None) or 'utf-8'
    try:
      stream.flush()  # What was written before goes first.
      self.fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
      self.fd = None  # An in-memory stream, or one that fails already.

  def write(self, text):
    """Writes `text`; raises OSError or ValueError as the stream does."""
    if self.fd is None:
      self.stream.write(text)
      self.stream.flush()
      return
    data = text.encode(self.encoding, 'backslashreplace')
    while data:  # A write to a pipe or a full disk may be short.
      data = data[os.write(self.fd, data):]


def _reason(error):
  """'Broken pipe', 'No space left on device', 'closed file'."""
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  return 'closed file' if isinstance(error, ValueError) else str(error)


class TaskOutput:
  """The launcher's output: lines written whole, one at a time, from any
  thread; a write never raises.

  Args:
    stream: where the lines go (sys.stdout, a file, an in-memory stream).
    errors: where to say that the output broke (sys.stderr by default).
  """

  def __init__(self, stream, errors=None):
    self._output = _Stream(stream)
    self._errors = errors
    self._lock = threading.Lock()
    self._closed = False
    self._lost = 0  # The lines lost since writes started failing.
    self._failure = ''  # Why they fail.

  def write(self, line):
    with self._lock:
      if self._closed:
        return
      try:
        if self._lost:
          self._output.write(
              '[launch] %d line(s) of output lost here: writing failed (%s)'
              '\n' % (self._lost, self._failure))
          self._lost = 0
        self._output.write(line)
      except (OSError, ValueError) as error:
        self._on_failure(error)

  def _on_failure(self, error):
    reason = _reason(error)
    if isinstance(error, ValueError) or error.errno in _CLOSED:
      self._closed = True
      if isinstance(error, BrokenPipeError):
        self._point_at_devnull()
      self._say('[launch] output closed (%s): task output is dropped from '
                'here on; training goes on\n' % reason)
      return
    if not self._lost:
      self._failure = reason
      self._say('[launch] output failed (%s): task output is dropped until '
                'it can be written again; training goes on\n' % reason)
    self._lost += 1

  def _point_at_devnull(self):
    if self._output.fd is None:
      return
    try:
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, self._output.fd)
      os.close(devnull)
    except OSError:
      pass  # Then the writes at exit fail, as they would have.

  def _say(self, text):
    try:
      _Stream(self._errors or sys.stderr).write(text)
    except (AttributeError, OSError, ValueError):
      pass  # Stderr is gone too (None, closed, broken): no one to tell.
