"""Runs a ps/worker cluster of one script on this machine, on 127.0.0.1.

  python -m clusters.launch --num_ps 2 --num_workers 2 -- \\
      train_image_classifier.py --dataset_name=digits \\
      --dataset_dir=data/digits --model_name=lenet --clone_on_cpu \\
      --batch_size=16 --optimizer=sgd --learning_rate=0.05 \\
      --max_number_of_steps=200 --train_dir=train_dir/cluster

With --num_ps 0 the workers all-reduce their gradients instead of sharing
variables on ps tasks. The tasks and their output: clusters/local_cluster.py.

The launcher exits with:
  0    when every worker exited 0 (the ps tasks are then stopped), or when
       the chief did and the other workers are past --finish_timeout
       (named, then stopped);
  2    for bad arguments (a number not finite or out of range: --timeout
       > 0, --grace_secs >= 0, thread counts >= 1), or a cluster this
       machine cannot hold (its tasks would not fit in the memory
       available, or need more open files than the limit), before any task
       starts; or when a task exited 2, which --max_restarts does not
       restart (below);
  the exit status of the first worker or ps task that failed (128 + signal
       when it was killed), after stopping the others, once no restart is
       left for it;
  124  when --timeout passed first;
  130/143 on Ctrl-C / SIGTERM, after stopping every task.

With --max_restarts N a task that fails is restarted, up to N times in all,
as torchrun's elastic agent does: every task (all-reduce, or --sync_replicas
among the script's arguments), each resuming from the latest checkpoint, or
the task alone (asynchronous ps training) while the others go on. With
--ps_restarts N a ps task that dies is started again alone (same address,
same TF_CONFIG), up to N times in all, before --max_restarts is drawn on:
the workers of an asynchronous run re-create their sessions, the chief
restores the latest checkpoint onto it, and training goes on (see
training/hooks.py, SessionRecoveryLogHook). --max_restarts does not
restart a task that exits 2: the scripts exit 2 for what a restart would
meet again (bad input, a full disk). Restarts less than 60 s apart wait
1 s, then twice as long each time, up to 30 s, so that a task failing as it starts does not
use up the restarts in seconds; Ctrl-C and SIGTERM end the wait. The
policy, and the lines that report each restart: clusters/restarts.py.

Tasks are stopped with SIGTERM (the chief saves, a ps task exits cleanly),
then SIGKILL after --grace_secs; the workers first, so that the chief saves
while its ps tasks still serve, then the ps tasks. Each task is in its own
process group and, on Linux, dies with the launcher even if the launcher
is killed with SIGKILL. Nothing the tasks start outlives the launcher: a
task's group is ended once the task exits, and what left it is ended
whenever every task is stopped (the launcher is its subreaper; see
clusters/process_tree.py).

A task that makes no progress is named (clusters/task_watch.py): one
the kernel shows stopped (SIGSTOP, a debugger) for 30 s, and, once the
chief has finished, a worker that has not finished within --finish_timeout
(by default 5 x the longest gap between its progress lines, at least 60 s).
Stopping sends SIGCONT after SIGTERM, so that a stopped task saves too.

When the launcher's output breaks, the tasks' output is still read, so
that no task blocks on a full pipe, and training goes on; stderr says so
once (clusters/task_output.py). A broken pipe (`... | head -5`) is never
written again: its reader is gone. On a full disk every later line is
tried, and the first that goes through comes after one counting the lines
lost: space may be freed while training runs.
"""

import argparse
import signal
import sys

from clusters import task_watch
from clusters.local_cluster import LocalCluster
from clusters.local_cluster import check_timeout
from clusters.machine import TASK_MEMORY_MIB

__all__ = ['OPTIONS', 'main', 'parse_args']

_NO_LIMIT = None

# The launcher's options: (flag, type, default, help). The defaults keep a
# failed task's exit the end of the run.
OPTIONS = (
    ('--num_ps', int, 1,
     'number of ps tasks (default 1; 0: the workers all-reduce)'),
    ('--num_workers', int, 2, 'number of workers (default 2)'),
    ('--timeout', float, _NO_LIMIT,
     'stop everything after this many seconds, restarts included, and exit '
     '124 (default: no limit)'),
    ('--intra_op_threads', int, _NO_LIMIT,
     'TF_NUM_INTRAOP_THREADS of every task (default: TensorFlow decides, '
     'one per core)'),
    ('--inter_op_threads', int, _NO_LIMIT,
     'TF_NUM_INTEROP_THREADS of every task'),
    ('--grace_secs', float, 10,
     'seconds between SIGTERM and SIGKILL when stopping: the time a chief '
     'has to save (default 10; 0: SIGKILL at once)'),
    ('--max_restarts', int, 0,
     'restart after a task fails, up to this many times in all: every task, '
     'from the latest checkpoint, or, in asynchronous ps training, the task '
     'alone (default 0: a failed task stops the cluster); restarts less '
     'than 60 s apart wait 1 s, then twice as long each time, up to 30 s'),
    ('--ps_restarts', int, 0,
     'start a ps task that dies again, alone, up to this many times in all, '
     'before --max_restarts is drawn on (default 0)'),
    ('--finish_timeout', float, _NO_LIMIT,
     'seconds the other workers have to finish once the chief has; a worker '
     'past it is named and stopped, and the launcher exits 0 (default: 5 x '
     'the longest gap between two of its progress lines, at least 60 s)'),
    ('--task_memory_mib', int, TASK_MEMORY_MIB,
     'memory one task takes, in MiB: a cluster whose tasks would not fit in '
     'the memory available is refused before any starts (default '
     '%(default)s, a LeNet task; 0 skips the check)'),
)


def parse_args(argv):
  parser = argparse.ArgumentParser(
      prog='python -m clusters.launch',
      description=__doc__.split('\n\n', maxsplit=1)[0],
      usage='%(prog)s [options] -- SCRIPT [ARGS...]')
  for flag, kind, default, help_text in OPTIONS:
    parser.add_argument(flag, type=kind, default=default, help=help_text)
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


def _thread_env(args):
  """The tasks' TF_NUM_*_THREADS; raises ValueError for a count < 1."""
  env = {}
  for flag, variable in (('intra_op_threads', 'TF_NUM_INTRAOP_THREADS'),
                         ('inter_op_threads', 'TF_NUM_INTEROP_THREADS')):
    threads = getattr(args, flag)
    if threads is None:
      continue
    if threads < 1:
      raise ValueError('%s must be >= 1, got %d; give 1 or more, or no --%s '
                       'to let TensorFlow decide' % (flag, threads, flag))
    env[variable] = str(threads)
  return env


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  try:
    check_timeout(args.timeout)
    local = LocalCluster(args.command, args.num_ps, args.num_workers,
                         env=_thread_env(args), grace_secs=args.grace_secs,
                         ps_restarts=args.ps_restarts,
                         max_restarts=args.max_restarts,
                         task_memory_mib=args.task_memory_mib,
                         watch=task_watch.TaskWatch(args.finish_timeout),
                         end_leftovers=True)
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


def __getattr__(name):
  """The names this module re-exported before clusters/machine.py and
  clusters/local_cluster.py had them: see old_paths, which only such a name
  loads."""
  import old_paths  # pylint: disable=g-import-not-at-top
  return old_paths.moved_name(__name__, name)


if __name__ == '__main__':
  sys.exit(main())
