"""A cluster from Slurm: the ps and worker tasks of one srun job step.

  srun -n 3 --kill-on-bad-exit=1 python train_image_classifier.py \
      --slurm --num_ps_tasks=1 ...

Every task of the step runs the same command. TensorFlow's own
SlurmClusterResolver reads the step from what srun sets (SLURM_PROCID,
SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE) and
gives each task an address: its node's name and a port, --slurm_port_base
for the first task of a node, the next port for the next task, and so on.
The first --num_ps_tasks tasks (SLURM_PROCID 0..P-1) are the ps tasks, the
others the workers; the first worker (SLURM_PROCID P) is the chief.
Without ps tasks, several workers all-reduce.

What this module adds to the resolver:

  * Every variable srun sets that is read here is checked first
    (`srun_step.SrunStep`), one line naming it, its value and the fix.
  * The counts are checked against the flags, one line naming both.
  * Each task checks that the address the resolver gives it is on the node
    Slurm started it on, at its place there (SLURMD_NODENAME,
    SLURM_LOCALID). The resolver orders the nodes by name as text (node10
    before node9) and the tasks of a node by rank; Slurm's order of nodes,
    or srun --distribution=cyclic, can differ, and a task would then listen
    where no other task looks for it: a hang. It stops with the fix
    instead.
  * GPUs are left to Slurm (srun --gpus-per-task sets CUDA_VISIBLE_DEVICES
    for each task). The resolver's own GPU assignment, which counts GPUs
    with nvidia-smi and overwrites CUDA_VISIBLE_DEVICES, is off. Only the
    CPU path is tested here: the test machines have no GPU.
  * A srun step ends once all its tasks have ended, and a ps task serves
    until it is stopped: `serve_until_the_workers_end` ends a ps task once
    every worker has ended, and keeps it serving after a SIGTERM until the
    chief has saved.
"""

import os
import signal
import threading
import time

from clusters import addresses
from clusters import cluster
from clusters import servers
from clusters import srun_step
from tf2_compat.slim_compat import tf

DEFAULT_PORT_BASE = 8888  # SlurmClusterResolver's.

# The resolver pairs the tasks of a node with blocks of GPU ids and lists
# only as many tasks as the node has blocks: on a node without GPUs, none.
# Giving it more imaginary GPUs, one per task, than any node has tasks lists
# every task, and auto_set_gpu=False keeps them imaginary.
_GPU_SLOTS = 1 << 16


def _resolve(port_base, jobs):
  """The resolver's (job, index) of this process and its ClusterSpec."""
  try:
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        jobs=jobs, port_base=port_base, gpus_per_node=_GPU_SLOTS,
        gpus_per_task=1, auto_set_gpu=False)
    spec = resolver.cluster_spec()
  except (RuntimeError, ValueError) as e:
    raise ValueError('--slurm: TensorFlow\'s SlurmClusterResolver says "%s";'
                     ' %s' % (str(e).rstrip('.'), srun_step.FIX)) from None
  return resolver.get_task_info(), spec


def step_size():
  """(SLURM_PROCID of this process, the number of tasks of its srun step).

  Raises:
    ValueError: outside a srun step, or a variable srun sets is wrong.
  """
  step = srun_step.SrunStep(os.environ)
  return step.rank, step.num_tasks


def from_flags(num_ps_tasks, num_workers=None, port_base=DEFAULT_PORT_BASE,
               given=None, given_task=None):
  """The ClusterTask of this process, one task of a srun job step.

  Args:
    num_ps_tasks: --num_ps_tasks: the first this many tasks are ps tasks.
    num_workers: --worker_replicas when it was given, else None (the tasks
      that are not ps tasks are the workers).
    port_base: --slurm_port_base, the port of the first task of each node.
    given: the ClusterTask that host flags or TF_CONFIG describe, if any.
    given_task: --task when it was given, else None.

  Raises:
    ValueError: outside a srun step, or a variable srun sets is wrong
      (srun_step.SrunStep); when the flags or TF_CONFIG also describe the
      cluster; when the counts do not match the step; when the resolver's
      address of this task is not where Slurm started it.
  """
  if given is not None:
    raise ValueError('--slurm takes the cluster from srun, but %s describes '
                     'one too (%r); give the cluster one way: drop --slurm, '
                     'or drop %s' % (given.source, given, given.source))
  if given_task is not None:
    raise ValueError('--task=%d with --slurm: each task\'s index comes from '
                     'srun (SLURM_PROCID); drop --task' % given_task)
  if num_ps_tasks < 0:
    raise ValueError('--num_ps_tasks=%d with --slurm: give the number of '
                     'ps tasks, 0 or more' % num_ps_tasks)
  if not 0 < port_base < 65536:
    raise ValueError('--slurm_port_base=%d is not a port; give one in '
                     '1..65535' % port_base)
  step = srun_step.SrunStep(os.environ)  # Before the resolver reads it.
  _check_counts(num_ps_tasks, num_workers, step.num_tasks)
  jobs = {cluster.WORKER_JOB: step.num_tasks - num_ps_tasks}
  if num_ps_tasks:
    jobs[cluster.PS_JOB] = num_ps_tasks
  (job, index), spec = _resolve(port_base, jobs)
  task = cluster.ClusterTask(
      spec.job_tasks(cluster.PS_JOB) if num_ps_tasks else [],
      spec.job_tasks(cluster.WORKER_JOB), job, index,
      source='Slurm (srun task %d of %d, --slurm_port_base=%d)' % (
          step.rank, step.num_tasks, port_base),
      port_fix='give the tasks another --slurm_port_base (the tasks of a '
               'node listen on consecutive ports from it)')
  _check_placement(task, step, port_base)
  return task


def _check_counts(num_ps_tasks, num_workers, num_tasks):
  if num_workers is not None and num_ps_tasks + num_workers != num_tasks:
    raise ValueError(
        '--num_ps_tasks=%d and --worker_replicas=%d make %d tasks, but this '
        'srun step has %d (SLURM_STEP_NUM_TASKS); start it with srun -n %d, '
        'or drop --worker_replicas (the tasks that are not ps tasks are the '
        'workers)' % (num_ps_tasks, num_workers, num_ps_tasks + num_workers,
                      num_tasks, num_ps_tasks + num_workers))
  if num_ps_tasks >= num_tasks:
    raise ValueError(
        '--num_ps_tasks=%d leaves no worker among the %d task(s) of this '
        'srun step (SLURM_STEP_NUM_TASKS); start it with srun -n %d or more, '
        'or give fewer ps tasks' % (num_ps_tasks, num_tasks, num_ps_tasks + 1))


def _check_placement(task, step, port_base):
  if step.node is None or step.local_id is None:
    return  # Not started by srun's slurmd: nothing to compare with.
  where = '%s:%d' % (step.node, port_base + step.local_id)
  if task.address != where:
    raise ValueError(
        'Slurm started task %d (SLURM_PROCID) on %s as task %s of that node '
        '(SLURM_LOCALID), so it listens on %s, but TensorFlow\'s '
        'SlurmClusterResolver tells the other tasks it is at %s (it orders '
        'the nodes by name as text, the tasks of a node by rank); run the '
        'step with srun --distribution=block (the default) on nodes whose '
        'names sort the same as text as in Slurm (node09 and node10, not '
        'node9 and node10)' % (step.rank, step.node, step.local_id, where,
                               task.address))


def serve_until_the_workers_end(server, task, poll_secs=2.0):
  """Serves this ps task of a srun step until the step's workers have ended.

  A srun step ends once all its tasks have, and a ps task has no last step
  of its own: it ends once every worker has accepted a connection at least
  once and none accepts anymore. A worker that never started keeps it
  serving: srun --kill-on-bad-exit=1 ends the step when a task fails.

  SIGTERM (scancel, the job's time limit) reaches every task of the step at
  once. The chief then saves the step it reached, reading the variables
  this task holds, so this task serves on until no worker accepts
  connections, started or not; Slurm's SIGKILL, KillWait seconds after the
  SIGTERM, bounds the wait. Ctrl-C (SIGINT) stops it at once. Must be
  called from the main thread.
  """
  ended = threading.Event()
  terminating = threading.Event()

  def on_sigterm(unused_signum, unused_frame):
    if terminating.is_set():
      return  # Slurm may send SIGTERM more than once.
    terminating.set()
    tf.logging.info('SIGTERM: this ps task serves until no worker listens, '
                    'so that the chief can save')

  previous = signal.signal(signal.SIGTERM, on_sigterm)
  try:
    end_with_the_workers(task, ended.set, terminating, poll_secs)
    servers.serve_until_stopped(server, (signal.SIGINT,), stopped=ended)
  finally:
    signal.signal(signal.SIGTERM, previous)


def end_with_the_workers(task, on_end, terminating, poll_secs=2.0):
  """Calls `on_end` once the workers of `task`'s cluster have ended.

  A thread connects to the workers' addresses every `poll_secs`. It calls
  `on_end` when none accepts a connection and either each has accepted one
  before or the threading.Event `terminating` is set.

  Returns:
    The thread, started (a daemon).
  """
  thread = threading.Thread(
      target=_watch_workers, name='end-with-the-workers', daemon=True,
      args=(task.worker_hosts, on_end, terminating, poll_secs))
  thread.start()
  return thread


def _watch_workers(worker_hosts, on_end, terminating, poll_secs):
  seen = set()
  while True:
    listening = {address for address in worker_hosts
                 if addresses.accepts_connections(address, 2.0)}
    seen |= listening
    if not listening and len(seen) == len(worker_hosts):
      tf.logging.info('every worker has ended: stopping this ps task')
      break
    if not listening and terminating.is_set():
      tf.logging.info('no worker listens since the SIGTERM: stopping this '
                      'ps task')
      break
    time.sleep(poll_secs)
  on_end()
