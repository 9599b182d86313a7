"""Runs of LeNet training, alone or as a cluster, timed from their step lines.

What cluster_throughput.py (clusters on 127.0.0.1) and cluster_network.py
(clusters in network namespaces) share: their common flags, the setups and
the programs their tasks run, the runs themselves and the timed window of a
run.

  parser = cluster_runs.run_parser(__doc__, SETUPS, 400, 60)
  args = cluster_runs.parse_run_args(parser, None, SETUPS)
  with cluster_runs.digits_dataset(args.dataset_dir) as dataset_dir:
    window = cluster_runs.timed_run(   # 1 worker batch per global step
        'alone', args, 1,
        functools.partial(cluster_runs.run_alone, args, dataset_dir))
"""

import argparse
import collections
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
from clusters import launch
# pylint: enable=g-import-not-at-top,wrong-import-position

TRAIN = os.path.join(REPO, 'train_image_classifier.py')
KERAS_MWMS_TRAIN = os.path.join(REPO, 'benchmarks', 'keras_mwms_train.py')
STEP_LINE = re.compile(r'INFO:tensorflow:step (\d+): loss')
LEARNING_RATE = 0.01

# What a run measured after its warm-up. `mib_sent_per_step`: MiB sent on
# all links per global step; `busiest_out_mib_per_step` and
# `busiest_in_mib_per_step`: MiB per global step that the busiest link (the
# most bytes both ways together) carried out of its host and into it.
Window = collections.namedtuple(
    'Window', ['examples_per_sec', 'cpu_ms_per_example', 'mib_sent_per_step',
               'busiest_out_mib_per_step', 'busiest_in_mib_per_step'])


def run_parser(doc, setups, default_steps, default_warmup_steps):
  """The flags every cluster benchmark takes (batch, steps, threads,
  setups, ...); `doc` is the benchmark's module docstring."""
  parser = argparse.ArgumentParser(
      description=doc.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--batch_size', type=int, default=32,
                      help='examples per worker step')
  parser.add_argument('--steps', type=int, default=default_steps,
                      help='global steps per run')
  parser.add_argument('--warmup_steps', type=int,
                      default=default_warmup_steps,
                      help='global steps before the timed window')
  parser.add_argument('--log_every', type=int, default=10,
                      help='--log_every_n_steps of the workers')
  parser.add_argument('--rounds', type=int, default=2,
                      help='runs of each setup, interleaved')
  parser.add_argument('--intra_op_threads', type=int, default=1)
  parser.add_argument('--inter_op_threads', type=int, default=1)
  parser.add_argument('--run_timeout', type=float, default=300,
                      help='seconds before a run is stopped as failed')
  parser.add_argument('--dataset_dir', default=None,
                      help='digits TFRecords; default: converted into a '
                      'temporary folder')
  parser.add_argument('--results_dir', default=None,
                      help='folder of the result file; default: '
                      'benchmarks/results')
  parser.add_argument('--setups', default=None,
                      help='comma-separated names of the setups to run, '
                      'from: %s (default: all; %s always runs, as the '
                      'ratios are to it)' % (
                          ', '.join(s[0] for s in setups), setups[0][0]))
  return parser


def parse_run_args(parser, argv, setups):
  """Parses `argv`; args.setups becomes the setups named by --setups."""
  args = parser.parse_args(argv)
  args.setups = choose_setups(parser, args.setups, setups)
  return args


def choose_setups(parser, names_flag, setups):
  """The setups named by --setups (comma-separated), the first always.

  `setups` are tuples whose first item is the name; the first setup is the
  reference the ratios are to, so it always runs.
  """
  names = set(names_flag.split(',')) if names_flag else None
  unknown = sorted((names or set()) - {setup[0] for setup in setups})
  if unknown:
    parser.error('--setups: unknown setup(s) %s; use names from: %s' % (
        ', '.join(repr(name) for name in unknown),
        ', '.join(setup[0] for setup in setups)))
  return [setup for setup in setups if names is None or
          setup[0] in names or setup is setups[0]]


def loopback_bytes():
  """[(sent, received)] of the loopback interface so far (/proc/net/dev)."""
  with open('/proc/net/dev') as dev:
    for line in dev:
      name, _, counters = line.partition(':')
      if name.strip() == 'lo':
        fields = counters.split()
        return [(int(fields[8]), int(fields[0]))]
  return [(0, 0)]


def no_link():
  """[(0, 0)]: a process alone on a network of namespaces has no link; the
  loopback interface would count other processes' bytes."""
  return [(0, 0)]


def cpu_seconds(pids):
  """User + system CPU time of the processes so far (0 for a gone one)."""
  ticks = os.sysconf('SC_CLK_TCK')
  total = 0.0
  for pid in pids:
    try:
      with open('/proc/%d/stat' % pid) as stat:
        fields = stat.read().rsplit(')', 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
      continue
    total += (int(fields[11]) + int(fields[12])) / ticks
  return total


class StepRecorder:
  """An output sink that timestamps the step lines of a run.

  `samples` holds (monotonic time, global step, CPU seconds of `pids()`,
  `link_bytes()`: [(bytes sent, bytes received)] per link so far).
  """

  def __init__(self, pids, link_bytes=loopback_bytes):
    self._pids = pids
    self._link_bytes = link_bytes
    self._lock = threading.Lock()
    self.samples = []
    self.lines = []

  def write(self, text):
    now = time.monotonic()
    with self._lock:
      self.lines.append(text)
      match = STEP_LINE.search(text)
      if match:
        self.samples.append((now, int(match.group(1)),
                             cpu_seconds(self._pids()), self._link_bytes()))

  def flush(self):
    pass


def train_args(args, dataset_dir, train_dir, extra=()):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu',
          '--batch_size=%d' % args.batch_size, '--optimizer=sgd',
          '--learning_rate=%g' % LEARNING_RATE,
          '--learning_rate_decay_type=fixed',
          '--max_number_of_steps=%d' % args.steps,
          '--log_every_n_steps=%d' % args.log_every,
          '--save_interval_secs=3600', '--save_summaries_secs=3600',
          '--non_chief_wait_secs=1', '--num_readers=1',
          '--num_preprocessing_threads=1', '--train_dir=%s' % train_dir
         ] + list(extra)


def keras_mwms_args(args, dataset_dir, train_dir, extra=()):
  """keras_mwms_train.py's flags for the training train_args describes."""
  return ['--dataset_dir=%s' % dataset_dir,
          '--batch_size=%d' % args.batch_size,
          '--learning_rate=%g' % LEARNING_RATE,
          '--max_number_of_steps=%d' % args.steps,
          '--log_every_n_steps=%d' % args.log_every, '--num_readers=1',
          '--num_preprocessing_threads=1', '--train_dir=%s' % train_dir
         ] + list(extra)


# What the tasks of a setup run: `script`, with the flags
# `arguments(args, dataset_dir, train_dir, extra)` returns.
Program = collections.namedtuple('Program', ['script', 'arguments'])
SLIM_TRAINING = Program(TRAIN, train_args)
KERAS_MWMS = Program(KERAS_MWMS_TRAIN, keras_mwms_args)

# A setup the benchmarks measure: its name, ps tasks, workers, the extra
# flags of every task, worker batches per global step, and the Program the
# tasks run (train_image_classifier.py unless named).
Setup = collections.namedtuple(
    'Setup', ['name', 'num_ps', 'num_workers', 'extra', 'batches',
              'program'], defaults=(SLIM_TRAINING,))


def thread_env(args):
  return {'TF_CPP_MIN_LOG_LEVEL': '2',
          'TF_NUM_INTRAOP_THREADS': str(args.intra_op_threads),
          'TF_NUM_INTEROP_THREADS': str(args.inter_op_threads)}


def run_alone(args, dataset_dir, train_dir, link_bytes=loopback_bytes):
  """One training process, no cluster; returns (exit status, recorder).

  `link_bytes`: what StepRecorder samples.
  """
  env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED='1',
             **thread_env(args))
  env.pop('TF_CONFIG', None)
  process = subprocess.Popen(
      [sys.executable, TRAIN] + train_args(args, dataset_dir, train_dir),
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, start_new_session=True)
  recorder = StepRecorder(lambda: [process.pid], link_bytes)
  reader = threading.Thread(
      target=lambda: [recorder.write(line) for line in process.stdout],
      daemon=True)
  reader.start()
  try:
    status = process.wait(timeout=args.run_timeout)
  except subprocess.TimeoutExpired:
    status = 124
  finally:
    if process.poll() is None:
      os.killpg(process.pid, signal.SIGKILL)
      process.wait()
    reader.join(timeout=10)
  return status, recorder


def run_cluster(args, dataset_dir, train_dir, num_ps, num_workers, extra,
                wrapper=(), env=None, link_bytes=loopback_bytes,
                program=SLIM_TRAINING):
  """A cluster of `program`'s tasks on this machine.

  Args:
    wrapper: the script (and its arguments) each task runs first, which
      then runs the program's script; none by default.
    env: extra environment variables of every task.
    link_bytes: what StepRecorder samples: the loopback interface's bytes
      by default.
    program: the Program every task runs (train_image_classifier.py by
      default).

  Returns:
    (exit status of the cluster, its StepRecorder).
  """
  holder = {}
  recorder = StepRecorder(
      lambda: [p.pid for p in holder['cluster'].processes.values()],
      link_bytes)
  task_env = dict(env or {}, PYTHONPATH=REPO, **thread_env(args))
  cluster = launch.LocalCluster(
      list(wrapper) + [program.script] + program.arguments(
          args, dataset_dir, train_dir, extra),
      num_ps, num_workers, env=task_env, output=recorder, cwd=REPO,
      grace_secs=5)
  holder['cluster'] = cluster
  cluster.start()
  return cluster.wait(timeout=args.run_timeout), recorder


def window(samples, warmup_steps, batch_size):
  """The Window of the step lines after the warm-up; None if too short.

  `batch_size`: examples per global step.
  """
  timed = sorted((s for s in samples if s[1] >= warmup_steps),
                 key=lambda s: s[0])
  if len(timed) < 2 or timed[-1][1] <= timed[0][1]:
    return None
  (t0, step0, cpu0, links0), (t1, step1, cpu1, links1) = timed[0], timed[-1]
  steps = step1 - step0
  examples = steps * batch_size
  moved = [(sent1 - sent0, received1 - received0) for (sent0, received0), (
      sent1, received1) in zip(links0, links1)]
  busiest_out, busiest_in = max(moved, key=sum)
  mib = 2.0 ** 20 * steps
  return Window(examples / (t1 - t0), 1000.0 * (cpu1 - cpu0) / examples,
                sum(sent for sent, _ in moved) / mib, busiest_out / mib,
                busiest_in / mib)


def timed_run(name, args, batches, run):
  """Runs `run(train_dir)` in a fresh train_dir; returns its Window.

  Exits the benchmark, with the run's last output, when the run fails or
  logs too few steps after the warm-up.

  Args:
    name: the setup, for messages.
    args: the parsed common flags (warmup_steps, batch_size).
    batches: worker batches per global step.
    run: returns (exit status, StepRecorder).
  """
  train_dir = tempfile.mkdtemp(prefix='cluster_run_')
  try:
    status, recorder = run(train_dir)
  finally:
    shutil.rmtree(train_dir, ignore_errors=True)
  if status != 0:
    sys.exit('%s failed with exit status %d:\n%s' % (
        name, status, ''.join(recorder.lines)[-3000:]))
  result = window(recorder.samples, args.warmup_steps,
                  args.batch_size * batches)
  if result is None:
    sys.exit('%s: too few step lines after the warm-up; raise --steps'
             % name)
  return result


@contextlib.contextmanager
def digits_dataset(dataset_dir=None):
  """`dataset_dir`, or the digits converted into a temporary folder."""
  if dataset_dir is not None:
    yield dataset_dir
    return
  made_dir = tempfile.mkdtemp(prefix='digits_')
  try:
    subprocess.run(
        [sys.executable, '-c', 'from datasets import convert_digits; '
         'convert_digits.run(%r)' % made_dir],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO,
                           TF_CPP_MIN_LOG_LEVEL='2'),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        timeout=300)
    yield made_dir
  finally:
    shutil.rmtree(made_dir, ignore_errors=True)
