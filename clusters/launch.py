"""Runs a ps/worker cluster of one script on this machine, on 127.0.0.1.

  python -m clusters.launch --num_ps 2 --num_workers 2 -- \\
      train_image_classifier.py --dataset_name=digits \\
      --dataset_dir=data/digits --model_name=lenet --clone_on_cpu \\
      --batch_size=16 --optimizer=sgd --learning_rate=0.05 \\
      --max_number_of_steps=200 --train_dir=train_dir/cluster

With --num_ps 0 the workers all-reduce their gradients instead of sharing
variables on ps tasks.

Every task is `sys.executable SCRIPT ARGS...` with the same arguments; each
learns its job and index from its own TF_CONFIG (see clusters/cluster.py),
with ports picked free on 127.0.0.1. Output lines are prefixed with the task
('[ps0] ...', '[worker1] ...').

The launcher exits with:
  0    when every worker exited 0 (the ps tasks are then stopped);
  2    for bad arguments, or a cluster this machine cannot hold (its tasks
       would not fit in the memory available, or need more open files than
       the limit), before any task starts;
  the exit status of the first worker or ps task that failed (128 + signal
       when it was killed), after stopping the others;
  124  when --timeout passed first;
  130/143 on Ctrl-C / SIGTERM, after stopping every task.

With --ps_restarts N a ps task that dies is started again (same address,
same TF_CONFIG), up to N times in all, as a cluster manager would restart
it: the workers of an asynchronous run re-create their sessions, the chief
restores the latest checkpoint onto it, and training goes on (see
training/hooks.py, SessionRecoveryLogHook).

Tasks are stopped with SIGTERM (a ps task exits cleanly on it), then SIGKILL
after --grace_secs. Each task is in its own process group and, on Linux,
dies with the launcher even if the launcher is killed with SIGKILL.
"""

import argparse
import contextlib
import ctypes
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = '127.0.0.1'
_PR_SET_PDEATHSIG = 1
try:
  _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:
  _LIBC = None


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


def tf_config(ps_hosts, worker_hosts, job_name, task_index):
  """The TF_CONFIG value of one task."""
  return json.dumps({
      'cluster': {'ps': list(ps_hosts), 'worker': list(worker_hosts)},
      'task': {'type': job_name, 'index': task_index}})


def _die_with_parent():
  """Runs in the child before exec: SIGKILL it when the launcher dies.

  libc is loaded beforehand, in the parent: the child only makes the call.
  """
  prctl = getattr(_LIBC, 'prctl', None)
  if prctl is not None:  # Linux. Elsewhere stop() still ends the tasks.
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def exit_status(returncode):
  """A shell-style exit status: 128 + N for a process killed by signal N."""
  return 128 - returncode if returncode < 0 else returncode


class LocalCluster:
  """The processes of one cluster on this machine.

  Args:
    command: the program and its arguments, e.g. ['train.py', '--flag=1'];
      run as `sys.executable *command`.
    num_ps: number of ps tasks (>= 0); 0: the workers all-reduce.
    num_workers: number of workers (>= 1; >= 2 without ps tasks).
    env: extra environment variables for every task.
    output: where prefixed lines go (sys.stdout by default).
    cwd: working directory of the tasks.
    grace_secs: seconds between SIGTERM and SIGKILL when stopping a task.
    ps_restarts: how many times in all a ps task that dies is started
      again before its death stops the cluster.
    task_memory_mib: the memory one task takes: the cluster is refused
      when its tasks would not fit in what the machine has available
      (0 skips the check).

  Raises:
    ValueError: for a cluster of no valid size, or one this machine cannot
      hold (memory, open files), before any task starts.
  """

  def __init__(self, command, num_ps, num_workers, env=None, output=None,
               cwd=None, grace_secs=10, ps_restarts=0,
               task_memory_mib=TASK_MEMORY_MIB):
    if num_workers < 1:
      raise ValueError('num_workers must be >= 1, got %d' % num_workers)
    if num_ps < 0:
      raise ValueError('num_ps must be >= 0, got %d' % num_ps)
    if ps_restarts < 0:
      raise ValueError('ps_restarts must be >= 0, got %d' % ps_restarts)
    if num_workers == 1 and num_ps == 0:
      raise ValueError('--num_ps 0 --num_workers 1 is no cluster: without '
                       'ps tasks the workers all-reduce, which takes at '
                       'least 2; run the script directly to train alone')
    if task_memory_mib < 0:
      raise ValueError('task_memory_mib must be >= 0, got %d'
                       % task_memory_mib)
    check_memory(num_ps, num_workers, task_memory_mib, mem_available_mib())
    raised = make_room_for_files(num_ps + num_workers)
    self._command = [sys.executable] + list(command)
    self._env = dict(env or {})
    self._output = output or sys.stdout
    self._cwd = cwd
    self._grace_secs = grace_secs
    self._ps_restarts_left = ps_restarts
    ports = free_ports(num_ps + num_workers)
    addresses = ['%s:%d' % (HOST, port) for port in ports]
    self.ps_hosts = addresses[:num_ps]
    self.worker_hosts = addresses[num_ps:]
    self.processes = {}  # Task name ('ps0', 'worker1') -> Popen.
    self._pumps = []
    self._write_lock = threading.Lock()
    if raised:
      self.write(raised)

  @property
  def ps_names(self):
    return ['ps%d' % i for i in range(len(self.ps_hosts))]

  @property
  def worker_names(self):
    return ['worker%d' % i for i in range(len(self.worker_hosts))]

  def write(self, line):
    with self._write_lock:
      self._output.write(line)
      self._output.flush()

  def _pump(self, name, stream):
    for line in stream:
      self.write('[%s] %s' % (name, line))
    stream.close()

  def _start_task(self, name, job_name, task_index):
    env = dict(os.environ)
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    env['PYTHONUNBUFFERED'] = '1'
    env.update(self._env)
    env['TF_CONFIG'] = tf_config(self.ps_hosts, self.worker_hosts, job_name,
                                 task_index)
    process = subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
        self._command, cwd=self._cwd, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        errors='replace', start_new_session=True,
        preexec_fn=_die_with_parent)
    self.processes[name] = process
    self.write('[launch] %s: pid %d, %s\n' % (
        name, process.pid, env['TF_CONFIG']))

  def start(self):
    """Starts the ps tasks, then the workers, then relays their output.

    The relaying threads start last so that no thread of ours runs while a
    task is forked (see preexec_fn in the subprocess documentation); a ps
    task restarted later is forked while they run, which is safe as long
    as the child only calls prctl before exec, as _die_with_parent does.
    """
    for i, name in enumerate(self.ps_names):
      self._start_task(name, 'ps', i)
    for i, name in enumerate(self.worker_names):
      self._start_task(name, 'worker', i)
    for name in self.processes:
      self._start_pump(name)

  def _start_pump(self, name):
    pump = threading.Thread(target=self._pump,
                            args=(name, self.processes[name].stdout),
                            daemon=True)
    pump.start()
    self._pumps.append(pump)

  def _restart_stopped_ps_tasks(self):
    for i, name in enumerate(self.ps_names):
      code = self.processes[name].poll()
      if code is None or self._ps_restarts_left <= 0:
        continue
      self._ps_restarts_left -= 1
      self.write('[launch] %s exited with status %d; restarting it on %s '
                 '(%d more restart(s) allowed)\n' % (
                     name, exit_status(code), self.ps_hosts[i],
                     self._ps_restarts_left))
      self._start_task(name, 'ps', i)
      self._start_pump(name)

  def wait(self, timeout=None, poll_secs=0.2):
    """Waits for the workers; returns the launcher's exit status.

    Stops every task before returning, whatever the outcome.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
      while True:
        self._restart_stopped_ps_tasks()
        failed = self._first_failure()
        if failed is not None:
          name, status = failed
          self.write('[launch] %s failed with exit status %d; stopping the '
                     'cluster\n' % (name, status))
          return status
        if all(self.processes[n].poll() == 0 for n in self.worker_names):
          self.write('[launch] all workers finished%s\n' % (
              '; stopping the ps tasks' if self.ps_hosts else ''))
          return 0
        if deadline is not None and time.monotonic() > deadline:
          self.write('[launch] timeout after %.0f s; stopping the cluster\n'
                     % timeout)
          return 124
        time.sleep(poll_secs)
    finally:
      self.stop()

  def _first_failure(self):
    for name in self.worker_names:
      code = self.processes[name].poll()
      if code:
        return name, exit_status(code)
    for name in self.ps_names:
      code = self.processes[name].poll()
      if code is not None:  # A ps task never finishes on its own.
        return name, exit_status(code) or 1
    return None

  def stop(self):
    """SIGTERM to every task still running, SIGKILL after the grace time."""
    running = [p for p in self.processes.values() if p.poll() is None]
    for process in running:
      _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + self._grace_secs
    for process in running:
      try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()
    for pump in self._pumps:
      pump.join(timeout=5)


def _signal_group(process, signum):
  try:
    os.killpg(process.pid, signum)
  except ProcessLookupError:
    pass


def parse_args(argv):
  parser = argparse.ArgumentParser(
      prog='python -m clusters.launch',
      description=__doc__.split('\n\n', maxsplit=1)[0],
      usage='%(prog)s [options] -- SCRIPT [ARGS...]')
  parser.add_argument('--num_ps', type=int, default=1,
                      help='number of ps tasks (default 1; 0: the workers '
                           'all-reduce)')
  parser.add_argument('--num_workers', type=int, default=2,
                      help='number of workers (default 2)')
  parser.add_argument('--timeout', type=float, default=None,
                      help='stop everything after this many seconds and exit '
                           '124 (default: no limit)')
  parser.add_argument('--intra_op_threads', type=int, default=None,
                      help='TF_NUM_INTRAOP_THREADS of every task (default: '
                           'TensorFlow decides, one per core)')
  parser.add_argument('--inter_op_threads', type=int, default=None,
                      help='TF_NUM_INTEROP_THREADS of every task')
  parser.add_argument('--grace_secs', type=float, default=10,
                      help='seconds between SIGTERM and SIGKILL when stopping')
  parser.add_argument('--ps_restarts', type=int, default=0,
                      help='start a ps task that dies again, up to this many '
                           'times in all (default 0: its death stops the '
                           'cluster)')
  parser.add_argument('--task_memory_mib', type=int,
                      default=TASK_MEMORY_MIB,
                      help='memory one task takes, in MiB: a cluster whose '
                           'tasks would not fit in the memory available is '
                           'refused before any starts (default %(default)s,'
                           ' a LeNet task; 0 skips the check)')
  parser.add_argument('command', nargs=argparse.REMAINDER,
                      help='the script and its arguments, after --')
  args = parser.parse_args(argv)
  if args.command and args.command[0] == '--':
    args.command = args.command[1:]
  if not args.command:
    parser.error('give the script to run after --, e.g. -- '
                 'train_image_classifier.py --dataset_name=digits ...')
  return args


def _raise_interrupt(signum, unused_frame):
  raise KeyboardInterrupt(signum)


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  env = {}
  if args.intra_op_threads is not None:
    env['TF_NUM_INTRAOP_THREADS'] = str(args.intra_op_threads)
  if args.inter_op_threads is not None:
    env['TF_NUM_INTEROP_THREADS'] = str(args.inter_op_threads)
  try:
    local = LocalCluster(args.command, args.num_ps, args.num_workers, env=env,
                         grace_secs=args.grace_secs,
                         ps_restarts=args.ps_restarts,
                         task_memory_mib=args.task_memory_mib)
  except ValueError as e:
    print('error: %s' % e, file=sys.stderr)
    return 2
  signal.signal(signal.SIGTERM, _raise_interrupt)
  try:
    local.start()
    return local.wait(timeout=args.timeout)
  except KeyboardInterrupt as e:
    signum = e.args[0] if e.args else signal.SIGINT
    for ignored in (signal.SIGINT, signal.SIGTERM):  # Let the stop finish.
      signal.signal(ignored, signal.SIG_IGN)
    local.stop()
    local.write('[launch] interrupted by signal %d; every task is stopped\n'
                % signum)
    return 128 + signum
  finally:
    local.stop()


if __name__ == '__main__':
  sys.exit(main())
