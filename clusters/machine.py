"""What this machine can give a local cluster: memory, open files, ports.

The launcher (clusters/launch.py) asks these before any task starts, so
that a cluster the machine cannot hold is refused in one line instead of
failing halfway through its start.
"""

import contextlib
import resource
import socket

HOST = '127.0.0.1'

# The memory one task takes, for the check before any task starts. Measured
# on this project's machines (2 cores, 24 GiB, TensorFlow 2.21 on CPU): the
# peak of Anonymous in /proc/PID/smaps_rollup, sampled every 0.5 s, of each
# task of `--num_ps 1 --num_workers 2 -- train_image_classifier.py` training
# LeNet on digits (batch 16, 200 steps) was 433 and 434 MiB for the workers
# and 393 MiB for the ps. The ~390 MiB of TensorFlow's libraries that each
# task also maps are shared between the tasks and not counted. Larger models
# take more; --task_memory_mib says so.
TASK_MEMORY_MIB = 430
# Descriptors the launcher holds per task (its output pipe; before that, the
# socket that reserves its port), and a margin for its own.
_FILES_PER_TASK = 1
_FILES_OF_ITS_OWN = 64


def mem_available_mib():
  """MemAvailable of /proc/meminfo in MiB; None where there is none."""
  try:
    with open('/proc/meminfo') as meminfo:
      for line in meminfo:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) // 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def check_memory(num_ps, num_workers, task_memory_mib, available_mib):
  """Raises ValueError when the tasks would not fit in `available_mib`.

  Args:
    num_ps, num_workers: the size of the cluster.
    task_memory_mib: what one task takes; 0 skips the check.
    available_mib: what the machine has available; None skips the check.
  """
  num_tasks = num_ps + num_workers
  needed_mib = num_tasks * task_memory_mib
  if not task_memory_mib or available_mib is None or (
      needed_mib <= available_mib):
    return
  raise ValueError(
      '--num_ps %d --num_workers %d would start %d TensorFlow processes, '
      'about %.1f GiB at %d MiB each, and this machine has %.1f GiB '
      'available (MemAvailable); start at most %d tasks, or, if one task of '
      'your script takes less, say how much with --task_memory_mib (0 skips '
      'this check)' % (num_ps, num_workers, num_tasks, needed_mib / 1024.0,
                       task_memory_mib, available_mib / 1024.0,
                       available_mib // task_memory_mib))


def make_room_for_files(num_tasks):
  """Raises the soft limit on open files when the tasks need more.

  Returns:
    The line saying so, or None when the limit was enough.

  Raises:
    ValueError: even the hard limit is too low.
  """
  needed = num_tasks * _FILES_PER_TASK + _FILES_OF_ITS_OWN
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  if soft == resource.RLIM_INFINITY or needed <= soft:
    return None
  if hard != resource.RLIM_INFINITY and needed > hard:
    raise ValueError(
        '%d tasks need about %d open files in the launcher (one pipe each), '
        'and the limit is %d (ulimit -Hn); start fewer tasks, or raise the '
        'limit' % (num_tasks, needed, hard))
  resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
  return ('[launch] raised the open-file limit from %d to %d: one pipe per '
          'task\n' % (soft, needed))


def free_ports(count, host=HOST):
  """`count` distinct TCP ports that are free on `host` right now."""
  with contextlib.ExitStack() as stack:
    sockets = []
    for _ in range(count):
      sock = stack.enter_context(socket.socket(socket.AF_INET,
                                               socket.SOCK_STREAM))
      sock.bind((host, 0))
      sockets.append(sock)
    return [sock.getsockname()[1] for sock in sockets]
