"""The processes of one cluster on this machine: started, relayed, watched,
restarted and stopped.

Every task is `sys.executable SCRIPT ARGS...` with the same arguments; each
learns its job and index from its own TF_CONFIG (see clusters/cluster.py),
with ports picked free on 127.0.0.1. Output lines are prefixed with the task
('[ps0] ...', '[worker1] ...'). What a failed task leads to is
clusters/restarts.py's decision; this module carries it out.
"""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from clusters import machine
from clusters import process_tree
from clusters import restarts
from clusters import task_output
from clusters import task_watch


def tf_config(ps_hosts, worker_hosts, job_name, task_index):
  """The TF_CONFIG value of one task."""
  return json.dumps({
      'cluster': {'ps': list(ps_hosts), 'worker': list(worker_hosts)},
      'task': {'type': job_name, 'index': task_index}})


def exit_status(returncode):
  """A shell-style exit status: 128 + N for a process killed by signal N."""
  return 128 - returncode if returncode < 0 else returncode


def _task(name):
  """('worker', 1) of 'worker1'."""
  job = name.rstrip('0123456789')
  return job, int(name[len(job):])


def _start_process(argv, env, cwd, name):
  """LocalCluster's default start_task: `argv` in a session of its own,
  which dies with this process."""
  del name  # The task's TF_CONFIG in `env` says who it is.
  return subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
      argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      errors='replace', start_new_session=True,
      preexec_fn=process_tree.die_with_parent)


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
      again, alone, before --max_restarts is drawn on.
    max_restarts: how many times in all a failed task leads to a restart
      (of every task, or of it alone in asynchronous ps training; see
      clusters/restarts.py) before its failure stops the cluster.
    task_memory_mib: the memory one task takes: the cluster is refused
      when its tasks would not fit in what the machine has available
      (0 skips the check).
    restart_backoff: a restarts.Backoff, the waits before restarts that
      follow each other quickly (default: 1 s, doubled each time up to
      30 s).
    watch: the task_watch.TaskWatch that says when a task makes no
      progress (default: one with the bounds it derives).
    end_leftovers: make this process the subreaper of what the tasks
      start, and end what they leave outside their process groups whenever
      every task is stopped (see clusters/process_tree.py). Only for a
      process whose every child is a task, as the launcher's is: every
      other process below it would be ended too.
    start_task: how a task's process starts: a callable (argv, env, cwd,
      name) returning a subprocess.Popen, or an object with its pid,
      poll(), wait(), send_signal() and a text `stdout` of the task's
      output and errors, in a process group of its own (the task `name`'s
      group is what stop() signals). Default: `argv` run in a new session.
      The tests fork tasks from a Python that has imported TensorFlow.

  Raises:
    ValueError: for a cluster of no valid size, a negative budget or grace
      time, or a cluster this machine cannot hold (memory, open files),
      before any task starts.
  """

  def __init__(self, command, num_ps, num_workers, env=None, output=None,
               cwd=None, grace_secs=10, ps_restarts=0, max_restarts=0,
               task_memory_mib=machine.TASK_MEMORY_MIB,
               restart_backoff=None, watch=None, end_leftovers=False,
               start_task=None):
    _check_size(num_ps, num_workers, task_memory_mib)
    restarts.check_seconds('grace_secs', grace_secs, True, 'the time a task has to '
                   'save after SIGTERM, e.g. 10 (0: SIGKILL at once)')
    self._script = restarts.read_script_args(command)
    self._policy = restarts.RestartPolicy(
        restarts.training_mode(num_ps, self._script), max_restarts,
        ps_restarts)
    machine.check_memory(num_ps, num_workers, task_memory_mib,
                         machine.mem_available_mib())
    raised = machine.make_room_for_files(num_ps + num_workers)
    self._command = [sys.executable] + list(command)
    self._env = dict(env or {})
    self._output = task_output.TaskOutput(output or sys.stdout)
    self._cwd = cwd
    self._grace_secs = grace_secs
    self.ps_hosts, self.worker_hosts = [], []
    self._pick_ports(num_ps, num_workers)
    self.processes = {}  # Task name ('ps0', 'worker1') -> its latest Popen.
    self._threads = {}  # Task name -> the threads relaying and awaiting it.
    self._exits = queue.Queue()  # (name, Popen), in the order they exit.
    self._steps = restarts.StepLog()
    self._backoff = restart_backoff or restarts.Backoff()
    self._watch_progress = watch or task_watch.TaskWatch()
    self._timeout = self._deadline = None  # wait()'s, and when it ends.
    self._start_number = 0
    self._end_leftovers = end_leftovers
    self._start_task = start_task or _start_process
    self._groups = set()  # The process group of every task started.
    if raised:
      self.write(raised)
    if end_leftovers:
      process_tree.become_subreaper()

  @property
  def ps_names(self):
    return ['ps%d' % i for i in range(len(self.ps_hosts))]

  @property
  def worker_names(self):
    return ['worker%d' % i for i in range(len(self.worker_hosts))]

  def address(self, name):
    job, index = _task(name)
    return (self.ps_hosts if job == 'ps' else self.worker_hosts)[index]

  def write(self, line):
    """Writes a line of the launcher's output; never raises (see
    clusters/task_output.py)."""
    self._output.write(line)

  def _pick_ports(self, num_ps, num_workers):
    addresses = ['%s:%d' % (machine.HOST, port)
                 for port in machine.free_ports(num_ps + num_workers)]
    self.ps_hosts = addresses[:num_ps]
    self.worker_hosts = addresses[num_ps:]

  def start(self):
    """Starts the ps tasks, then the workers, then relays their output.

    The threads start last so that no thread of ours runs while a task is
    forked (see preexec_fn in the subprocess documentation); a task
    restarted later is forked while they run, which is safe as long as the
    child only calls prctl before exec, as die_with_parent does.
    """
    self._start_number = self._steps.new_start()
    for name in self.ps_names + self.worker_names:
      self._fork(name)
    for name in self.ps_names + self.worker_names:
      self._watch(name)

  def _fork(self, name):
    job, index = _task(name)
    env = dict(os.environ)
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
    env['PYTHONUNBUFFERED'] = '1'
    env.update(self._env)
    env['TF_CONFIG'] = tf_config(self.ps_hosts, self.worker_hosts, job, index)
    process = self._start_task(self._command, env, self._cwd, name)
    self.processes[name] = process
    self._groups.add(process.pid)
    self._watch_progress.forget(name)
    self.write('[launch] %s: pid %d, %s\n' % (
        name, process.pid, env['TF_CONFIG']))

  def _watch(self, name):
    """Relays the task's output, and reports its exit to wait()."""
    process, start = self.processes[name], self._start_number

    def relay():
      for line in process.stdout:
        self.write('[%s] %s' % (name, line))
        self._steps.observe(start, name, line)
        self._watch_progress.observe(name, line)
      process.stdout.close()

    def wait_for_exit():
      process.wait()
      # What the task left in its group serves no one now (see
      # clusters/process_tree.py); its pipe closes with them.
      process_tree.signal_group(process.pid, signal.SIGKILL)
      self._exits.put((name, process))

    threads = self._threads[name] = []
    for target in (relay, wait_for_exit):
      thread = threading.Thread(target=target, daemon=True)
      thread.start()
      threads.append(thread)  # Once started: a Ctrl-C may come in between.

  def wait(self, timeout=None, poll_secs=0.2):
    """Watches the tasks until the workers finish; returns the launcher's
    exit status. A failed task is restarted while the RestartPolicy allows.

    Stops every task before returning, whatever the outcome.

    Raises:
      ValueError: a timeout that is not a finite number > 0.
    """
    check_timeout(timeout)
    self._timeout = timeout
    self._deadline = None if timeout is None else time.monotonic() + timeout
    try:
      while True:
        exited = self._next_exit()
        while exited is not None:
          status = self._on_exit(*exited)
          if status is not None:
            return status
          exited = self._next_exit()
        if self._deadline is not None and time.monotonic() > self._deadline:
          return self._time_out()
        if self._no_progress():
          return 0
        time.sleep(poll_secs)
    finally:
      self.stop()

  def _no_progress(self):
    """Names the tasks that make no progress (clusters/task_watch.py);
    True when the watch ends: workers past their bound to finish after
    the chief, which stop() then stops."""
    running = {name: process.pid for name, process in self.processes.items()
               if process.poll() is None}
    for line in self._watch_progress.stopped(running):
      self.write(line)
    overdue = self._watch_progress.overdue(
        {name: pid for name, pid in running.items()
         if name in self.worker_names})
    for line in overdue:
      self.write(line)
    return bool(overdue)

  def _time_out(self):
    self.write('[launch] timeout after %.0f s; stopping the cluster\n'
               % self._timeout)
    return 124

  def _wait_before_restart(self):
    """Waits as long as the Backoff says; returns False, once the timeout
    has run out, when it ran out first. Ctrl-C and SIGTERM end the wait:
    time.sleep returns to the KeyboardInterrupt they raise."""
    wait, line = self._backoff.pause(time.monotonic())
    if not wait:
      return True
    self.write(line)
    if self._deadline is None or time.monotonic() + wait <= self._deadline:
      time.sleep(wait)
      return True
    time.sleep(max(0.0, self._deadline - time.monotonic()))
    return False

  def _next_exit(self):
    """(name, exit status) of the next task that exited, of those running
    now (a task stopped for a restart is not); None when no other has."""
    while True:
      try:
        name, process = self._exits.get_nowait()
      except queue.Empty:
        return None
      if self.processes.get(name) is process:
        return name, exit_status(process.returncode)

  def _on_exit(self, name, status):
    """Acts on a task's exit; returns the launcher's status when it ends
    the watch, None when the watch goes on."""
    if name in self.worker_names and status == 0:
      if name == self.worker_names[0]:
        self._watch_progress.chief_finished()
      if all(self.processes[n].returncode == 0 for n in self.worker_names):
        self.write('[launch] all workers finished%s\n' % (
            '; stopping the ps tasks' if self.ps_hosts else ''))
        return 0
      return None
    # A ps task never finishes on its own: even its exit 0 is a failure.
    decision = self._policy.decide(name, status or 1)
    self.write(restarts.failure_line(name, status, decision,
                                     self.address(name)))
    if decision.action == restarts.GIVE_UP:
      return status or 1
    if decision.action == restarts.RESTART_CLUSTER:
      self.stop()
    elif decision.flag == '--max_restarts' and restarts.rolls_back(name):
      self._join([name])  # Its last step lines are counted.
      self.write(restarts.rollback_line(self._script.train_dir,
                                        self._resumed_step(),
                                        self._steps.highest))
    # After the stop: in a restart of every task, none waits half-stopped.
    if not self._wait_before_restart():
      return self._time_out()
    if decision.action == restarts.RESTART_CLUSTER:
      self._start_every_task_again()
    else:
      self._fork(name)
      self._watch(name)
    return None

  def _resumed_step(self):
    """The step of the latest checkpoint in the script's --train_dir
    (relative to the tasks' working directory); None when there is none or
    no --train_dir."""
    if self._script.train_dir is None:
      return None
    return restarts.latest_checkpoint_step(
        os.path.join(self._cwd or os.getcwd(), self._script.train_dir))

  def _start_every_task_again(self):
    """Starts every task, stopped, again on new ports."""
    self.write(restarts.every_task_line(self._script.train_dir,
                                        self._resumed_step(),
                                        self._steps.highest))
    self._pick_ports(len(self.ps_hosts), len(self.worker_hosts))
    self.start()

  def stop(self):
    """SIGTERM to every task still running, SIGKILL after the grace time:
    the workers first, so that the chief can still save the variables its
    ps tasks hold, then the ps tasks. Then, with end_leftovers, what the
    tasks left outside their process groups."""
    self._stop(self.worker_names)
    self._stop(self.ps_names)
    if self._end_leftovers:
      ended = process_tree.end_descendants(self._groups)
      if ended:
        self.write('[launch] ended %d process(es) the tasks had left '
                   'running: pid %s\n' % (len(ended),
                                           ', '.join(map(str, ended))))
    self._join(self.worker_names + self.ps_names)

  def _stop(self, names):
    running = [self.processes[n] for n in names
               if n in self.processes and self.processes[n].poll() is None]
    for process in running:
      process_tree.signal_group(process.pid, signal.SIGTERM)
      # A stopped task (SIGSTOP) acts on the SIGTERM once it runs again.
      process_tree.signal_group(process.pid, signal.SIGCONT)
    deadline = time.monotonic() + self._grace_secs
    for process in running:
      try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        process_tree.signal_group(process.pid, signal.SIGKILL)
        process.wait()
      process_tree.signal_group(process.pid, signal.SIGKILL)  # Its leftovers.

  def _join(self, names):
    """Waits until the output of the tasks, which have exited, is relayed
    (at most 5 s each: a child they left may hold their pipe)."""
    for name in names:
      for thread in self._threads.get(name, ()):
        thread.join(timeout=5)


def check_timeout(timeout):
  """Raises ValueError unless `timeout` is None (no limit) or a finite
  number of seconds > 0."""
  if timeout is not None:
    restarts.check_seconds('timeout', timeout, False, 'the time the run may take, '
                   'or no --timeout for no limit')


def _check_size(num_ps, num_workers, task_memory_mib):
  if num_workers < 1:
    raise ValueError('num_workers must be >= 1, got %d' % num_workers)
  if num_ps < 0:
    raise ValueError('num_ps must be >= 0, got %d' % num_ps)
  if num_workers == 1 and num_ps == 0:
    raise ValueError('--num_ps 0 --num_workers 1 is no cluster: without '
                     'ps tasks the workers all-reduce, which takes at '
                     'least 2; run the script directly to train alone')
  if task_memory_mib < 0:
    raise ValueError('task_memory_mib must be >= 0, got %d'
                     % task_memory_mib)
