"""One training run per train_dir.

Two runs on one train_dir (a command started twice, a job restarted while
the old one still runs) each restore, then each save: their checkpoints
interleave in one index and each run's Saver deletes the other's. So the
process that writes checkpoints (the chief of a cluster, or the only
process) holds `train_dir/train.lock` for the whole run:

  with train_dir_lock.held(train_dir):
    ...  # train

A second run is refused (UsageError, exit 2) with the holder's pid, host and
start time, which the holder writes into the file. The lock is an
fcntl.flock: the kernel drops it when its process ends, however it ends, so
a file left by a killed run (SIGKILL) is simply taken over by the next run.
flock is reliable between the processes of one machine; on a network file
system it is as good as that file system makes it.
"""

import contextlib
import fcntl
import os
import socket
import time

from tf2_compat.slim_compat import tf
from training.errors import UsageError

LOCK_NAME = 'train.lock'
# How long a refused run waits for the holder to write its name into the
# file (it writes right after locking).
_HOLDER_WAIT_SECS = 2.0


def _holder_text():
  return 'pid %d on host %s since %s' % (
      os.getpid(), socket.gethostname(),
      time.strftime('%Y-%m-%d %H:%M:%S %Z'))


def _read(fd):
  return os.pread(fd, 4096, 0).decode(errors='replace').strip()


def _lock(path):
  """An fd of `path` holding its exclusive flock.

  The holder unlinks the file when it ends: a run that opened it just before
  then locks a file no longer at `path`, so the lock counts only once the
  locked file is still the one at `path`.

  Raises:
    UsageError: another process holds it.
  """
  while True:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _read(fd)
      deadline = time.time() + _HOLDER_WAIT_SECS
      while not holder and time.time() < deadline:
        time.sleep(0.1)
        holder = _read(fd)
      os.close(fd)
      raise UsageError(
          '--train_dir=%s is in use by another training run (%s, holding '
          '%s); wait for it to end or stop it, or give another --train_dir'
          % (os.path.dirname(path), holder or 'just starting', path)) from None
    try:
      if os.stat(path).st_ino == os.fstat(fd).st_ino:
        return fd
    except FileNotFoundError:
      pass
    os.close(fd)


@contextlib.contextmanager
def held(train_dir, log_fn=None):
  """Holds train_dir's lock inside the block; creates train_dir if needed
  (and removes it again if the run leaves nothing else in it).

  A process that ends without leaving the block (SIGKILL, or os._exit on a
  signal, training/preemption.py) leaves the file: the kernel has dropped
  its lock, and the next run takes the file over.

  Args:
    train_dir: the run's --train_dir.
    log_fn: where the line about a lock taken over from a run that ended
      without releasing it goes (tf.logging.info by default).

  Raises:
    UsageError: another run holds the lock, or the lock file cannot be
      written (train_dir on a full or read-only disk).
  """
  created = not os.path.isdir(train_dir)
  path = os.path.join(train_dir, LOCK_NAME)
  try:
    os.makedirs(train_dir, exist_ok=True)
    fd = _lock(path)
  except OSError as e:
    raise UsageError('--train_dir=%s: cannot create its lock file %s (%s); '
                     'free space or give a writable --train_dir'
                     % (train_dir, path, e.strerror or e)) from None
  try:
    previous = _read(fd)
    if previous:
      (log_fn or tf.logging.info)(
          '%s was left by a run that ended without releasing it (%s); this '
          'run takes it over', path, previous)
    try:
      os.ftruncate(fd, 0)
      os.pwrite(fd, (_holder_text() + '\n').encode(), 0)
    except OSError as e:
      raise UsageError('--train_dir=%s: cannot write its lock file %s (%s); '
                       'free space or give a writable --train_dir'
                       % (train_dir, path, e.strerror or e)) from None
    yield
  finally:
    try:
      # Unlinked while still locked: a run starting now creates a new file.
      with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    finally:
      os.close(fd)
    if created:
      with contextlib.suppress(OSError):  # Not empty: the run wrote there.
        os.rmdir(train_dir)
