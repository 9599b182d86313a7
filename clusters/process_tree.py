"""The processes a launcher starts, and all that they start, end with it.

Three layers, because each catches what the one before misses (Linux):

  * Each task runs in a process group of its own, and the launcher ends
    the whole group (SIGKILL) once the task itself has exited: on its own,
    for a restart, or when stopped. What is left in the group then (a data
    loader, a shell's children) served a task that is gone, and the task
    had its chance to save on SIGTERM before it exited.
  * A task gets SIGKILL when the launcher dies (PR_SET_PDEATHSIG), even by
    SIGKILL. That setting is not inherited across fork: a task's own
    children do not get it.
  * The launcher is a child subreaper (PR_SET_CHILD_SUBREAPER): a process
    that left its task's group (setsid, a double fork) and lost its parent
    is reparented to the launcher instead of to init, so that at exit the
    launcher finds it among its descendants and ends it
    (end_descendants). One that exits earlier stays a zombie of the
    launcher until then.

Not covered: a launcher killed by SIGKILL takes its subreaper role with
it, so what had left the tasks' groups outlives it.
"""

import collections
import ctypes
import os
import signal
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
try:
  _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
  _LIBC = None


def die_with_parent():
  """Runs in a task before exec: SIGKILL it when the launcher dies.

  libc is loaded beforehand, in the parent: the child only makes the call.
  """
  prctl = getattr(_LIBC, 'prctl', None)
  if prctl is not None:  # Linux. Elsewhere stop() still ends the tasks.
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper():
  """Makes this process the one its orphaned descendants are reparented
  to; returns whether it is (False where prctl has no such option).

  For the launcher's own process only: a process that is a subreaper must
  reap the orphans it adopts, which end_descendants does at the end.
  """
  prctl = getattr(_LIBC, 'prctl', None)
  return prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1) == 0


def signal_group(pid, signum):
  """Sends `signum` to the process group `pid` leads; nothing if it has
  no member left."""
  try:
    os.killpg(pid, signum)
  except (ProcessLookupError, PermissionError):
    pass  # PermissionError: what is left is another user's, not ours to end.


# What /proc/PID/stat says of a process, after its name.
_Stat = collections.namedtuple('_Stat', ['state', 'parent', 'group'])


def process_stat(pid):
  """The _Stat of `pid` (its one-letter state, R, S, T, Z..., its parent
  and its process group), None when there is no such process or no /proc
  (not Linux)."""
  try:
    with open('/proc/%d/stat' % pid) as stat:
      text = stat.read()
  except OSError:
    return None
  # The command name, in parentheses, may hold spaces and parentheses.
  try:
    state, parent, group = text.rsplit(')', 1)[1].split()[:3]
    return _Stat(state, int(parent), int(group))
  except ValueError:
    return None


def _processes():
  """{pid: _Stat} of every process /proc shows."""
  processes = {}
  if not os.path.isdir('/proc'):
    return processes  # Not Linux: there is no subreaper either.
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      found = process_stat(int(entry))
      if found is not None:  # Else gone since the listing.
        processes[int(entry)] = found
  return processes


def _tree(root):
  """{pid: _Stat} of every process below `root`."""
  processes = _processes()
  children = {}
  for pid, stat in processes.items():
    children.setdefault(stat.parent, []).append(pid)
  found, below = {}, list(children.get(root, ()))
  while below:
    pid = below.pop()
    found[pid] = processes[pid]
    below.extend(children.get(pid, ()))
  return found


def descendants(root):
  """The pids of every process below `root`, zombies included."""
  return sorted(_tree(root))


def end_descendants(ended_groups=(), timeout_secs=5, poll_secs=0.02):
  """SIGKILLs every process below this one, and reaps those that were, or
  became, its children; returns the pids of those it found running outside
  `ended_groups`, the process groups ended already (a member may still be
  on its way out).

  For the launcher once every task is stopped and waited for: what is left
  below it is what the tasks left. Killing a process reparents its
  children to this one (a subreaper), so the tree is walked again until it
  is empty, for at most `timeout_secs`.
  """
  me, ended = os.getpid(), set()
  deadline = time.monotonic() + timeout_secs
  while time.monotonic() < deadline:
    left = _tree(me)
    if not left:
      break
    for pid, stat in left.items():
      if stat.state == 'Z':
        continue
      if stat.group not in ended_groups:
        ended.add(pid)
      try:
        os.kill(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    for pid in left:
      try:
        os.waitpid(pid, os.WNOHANG)
      except ChildProcessError:
        pass  # Not a child of this one (yet): its parent reaps it.
    time.sleep(poll_secs)
  return sorted(ended)
