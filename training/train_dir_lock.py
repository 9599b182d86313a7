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
system it is as good as that file system makes it, and where the file
system has no flock at all the run is refused, naming
`--train_dir_lock=none`, which runs without the lock.

The lock file is only ever a regular file of its own: a symbolic link at
its path (dangling or not), a directory, a FIFO, a device or a file with
other hard links is refused, left as it is, and nothing is written through
it or blocks on it.
"""

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time

from tf2_compat.slim_compat import tf
from training.errors import UsageError

LOCK_NAME = 'train.lock'
# --train_dir_lock: hold train.lock with flock, or hold nothing.
FLOCK = 'flock'
NONE = 'none'
MODES = (FLOCK, NONE)
# How long a refused run waits for the holder to write its name into the
# file (it writes right after locking).
_HOLDER_WAIT_SECS = 2.0
# How much of a lock file's first line a message shows.
_SHOWN_CHARS = 200
# flock on a file system that does not implement it: NFS without its lock
# daemon (ENOLCK), some FUSE and SMB mounts (EOPNOTSUPP, EINVAL, ENOSYS).
_FLOCK_UNSUPPORTED = frozenset(
    [errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS])
# Never follow a link at the path, never wait on a FIFO.
_OPEN_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _holder_text():
  return 'pid %d on host %s since %s' % (
      os.getpid(), socket.gethostname(),
      time.strftime('%Y-%m-%d %H:%M:%S %Z'))


def _printable(raw, limit=_SHOWN_CHARS):
  """The first line of `raw` (bytes or str) for a message: characters that
  do not print escaped, at most `limit` characters, '...' when more follow.
  A lock file can hold anything (random bytes from a crashed disk, or a
  file that was never a lock file)."""
  if isinstance(raw, bytes):
    raw = raw.decode('utf-8', errors='backslashreplace')
  lines = raw.strip().split('\n', 1)
  shown = ''.join(
      c if c.isprintable() else c.encode('unicode_escape').decode('ascii')
      for c in lines[0].strip())
  if len(shown) > limit or len(lines) > 1:
    return shown[:limit] + '...'
  return shown


def _holder(fd):
  return _printable(os.pread(fd, 4096, 0))


def _not_a_lock_file(path, status):
  """(what is wrong, the fix) when `status` (of path, not followed) cannot
  be a lock file; None when it can."""
  mode = status.st_mode
  if stat.S_ISLNK(mode):
    return ('is a symbolic link (to %s)' % _printable(os.readlink(path)),
            'remove the link (rm %s; its target is not touched)' % path)
  if stat.S_ISDIR(mode):
    return 'is a directory', 'move it away or remove it'
  if not stat.S_ISREG(mode):
    kind = ('a FIFO' if stat.S_ISFIFO(mode) else 'a socket'
            if stat.S_ISSOCK(mode) else 'a device')
    return 'is %s, not a regular file' % kind, 'remove it (rm %s)' % path
  if status.st_nlink > 1:
    return ('has %d hard links: the same file is also elsewhere'
            % status.st_nlink,
            'remove this name of it (rm %s; its other names keep the '
            'file)' % path)
  return None


def _refuse_unless_lock_file(train_dir, path, status):
  problem = _not_a_lock_file(path, status)
  if problem:
    raise UsageError(
        '--train_dir=%s: its lock file %s %s; it was left as it is and '
        'nothing was written to it. To train there, %s and run again, or '
        'give another --train_dir' % ((train_dir, path) + problem))


def _open(train_dir, path):
  """(fd, whether this call created the file) of the lock file at `path`.

  Raises:
    UsageError: what is at `path` is no lock file (see _not_a_lock_file).
  """
  while True:
    with contextlib.suppress(FileNotFoundError):
      _refuse_unless_lock_file(train_dir, path, os.lstat(path))
    try:
      return os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
      pass
    try:
      fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:  # Its holder ended and removed it: again.
      continue
    except OSError:  # Replaced since lstat (a link: ELOOP; a directory).
      _refuse_unless_lock_file(train_dir, path, os.lstat(path))
      raise
    try:
      _refuse_unless_lock_file(train_dir, path, os.fstat(fd))
    except UsageError:
      os.close(fd)
      raise
    return fd, False


def _lock(train_dir, path):
  """An fd of `path` holding its exclusive flock.

  The holder unlinks the file when it ends: a run that opened it just before
  then locks a file no longer at `path`, so the lock counts only once the
  locked file is still the one at `path`.

  Raises:
    UsageError: another process holds it, what is at `path` is no lock
      file, or the file system has no flock (the file this created is
      removed again).
  """
  while True:
    fd, created = _open(train_dir, path)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      holder = _holder(fd)
      deadline = time.time() + _HOLDER_WAIT_SECS
      while not holder and time.time() < deadline:
        time.sleep(0.1)
        holder = _holder(fd)
      os.close(fd)
      raise UsageError(
          '--train_dir=%s is in use by another training run (%s, holding '
          '%s); wait for it to end or stop it, or give another --train_dir'
          % (train_dir, holder or 'just starting', path)) from None
    except OSError as e:
      os.close(fd)
      if created:
        with contextlib.suppress(FileNotFoundError):
          os.unlink(path)
      if e.errno not in _FLOCK_UNSUPPORTED:
        raise
      raise UsageError(
          '--train_dir=%s: its file system does not support flock (%s: %s), '
          'which keeps a second run off a train_dir; pass '
          '--train_dir_lock=none to train there without the lock (then '
          'make sure one run at a time uses it), or give a --train_dir on a '
          'local disk' % (train_dir, path, e.strerror or e)) from None
    try:
      if os.stat(path).st_ino == os.fstat(fd).st_ino:
        return fd
    except FileNotFoundError:
      pass
    os.close(fd)


@contextlib.contextmanager
def held(train_dir, mode=FLOCK, log_fn=None):
  """Holds train_dir's lock inside the block; creates train_dir if needed
  (and removes it again if the run leaves nothing else in it).

  A process that ends without leaving the block (SIGKILL, or os._exit on a
  signal, training/preemption.py) leaves the file: the kernel has dropped
  its lock, and the next run takes the file over.

  Args:
    train_dir: the run's --train_dir.
    mode: --train_dir_lock, one of MODES: FLOCK holds the lock, NONE holds
      nothing, touches nothing and logs a warning saying so.
    log_fn: where the line about a lock taken over from a run that ended
      without releasing it goes (tf.logging.info by default), and the
      warning of NONE (tf.logging.warning by default).

  Raises:
    UsageError: another run holds the lock, what is at train_dir/train.lock
      is no lock file, the file system has no flock, or the lock file cannot
      be written (train_dir on a full or read-only disk).
    ValueError: `mode` is not one of MODES.
  """
  if mode not in MODES:
    raise ValueError('mode must be one of %s, got %r' % (MODES, mode))
  if mode == NONE:
    (log_fn or tf.logging.warning)(
        '--train_dir_lock=none: %s is not locked; a second run started on it '
        'would mix its checkpoints with this one\'s', train_dir)
    yield
    return
  created = not os.path.isdir(train_dir)
  path = os.path.join(train_dir, LOCK_NAME)
  try:
    os.makedirs(train_dir, exist_ok=True)
    fd = _lock(train_dir, path)
  except (OSError, UsageError) as e:
    if created:
      with contextlib.suppress(OSError):
        os.rmdir(train_dir)
    if isinstance(e, UsageError):
      raise
    raise UsageError('--train_dir=%s: cannot create its lock file %s (%s); '
                     'free space or give a writable --train_dir'
                     % (train_dir, path, e.strerror or e)) from None
  try:
    previous = _holder(fd)
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
      # Only if it is still this run's: another run's file, made once this
      # one's was removed, is that run's lock.
      with contextlib.suppress(FileNotFoundError):
        if os.stat(path, follow_symlinks=False).st_ino == os.fstat(
            fd).st_ino:
          os.unlink(path)
    finally:
      os.close(fd)
    if created:
      with contextlib.suppress(OSError):  # Not empty: the run wrote there.
        os.rmdir(train_dir)
