"""Reading a process's output line by line, never past a deadline."""

import queue
import re
import threading
import time


class LineReader:
  """Reads a process's output on a thread, so that no read outlasts a deadline.

  A readline() on the pipe itself would block for as long as the process
  stays silent, whatever deadline the caller had in mind.
  """

  def __init__(self, stream):
    self._lines = queue.Queue()
    self._thread = threading.Thread(target=self._read, args=(stream,),
                                    daemon=True)
    self._thread.start()

  def _read(self, stream):
    try:
      for line in stream:
        self._lines.put(line)
    finally:
      stream.close()
      self._lines.put(None)  # End of output.

  def _next(self, deadline):
    try:
      return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
      return None

  def until(self, pattern, timeout=30):
    """Lines up to the first matching `pattern`; fails after `timeout`."""
    lines = []
    deadline = time.monotonic() + timeout
    while True:
      line = self._next(deadline)
      if line is None:
        raise AssertionError('no line matching %r within %d s in:\n%s'
                             % (pattern, timeout, ''.join(lines)))
      lines.append(line)
      if re.search(pattern, line):
        return lines

  def rest(self, timeout=30):
    """The remaining lines up to the end of output, within `timeout`."""
    lines = []
    deadline = time.monotonic() + timeout
    while True:
      line = self._next(deadline)
      if line is None:
        if self._thread.is_alive():
          raise AssertionError('output still open after %d s:\n%s'
                               % (timeout, ''.join(lines)))
        return ''.join(lines)
      lines.append(line)

  def close(self, timeout=10):
    self._thread.join(timeout)
