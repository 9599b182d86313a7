"""Measures what training through a parameter server costs on one machine.

Eight setups train LeNet on the embedded digits dataset with
train_image_classifier.py (batch --batch_size per clone, SGD):

  * alone: one process, no cluster: a local session, no gRPC.
  * 1 ps + 1 worker: the worker reads every variable from the ps and sends
    every gradient back over gRPC on 127.0.0.1 at each step (LeNet's fc3
    weights alone are 12.25 MiB).
  * 1 ps + 2 workers: two workers update the same variables asynchronously.
  * 1 ps + 2 workers sync: SyncReplicasOptimizer, one global step per two
    worker batches.
  * 2 workers all-reduce: no ps; each worker holds the variables and the
    two average their gradients with collective ops every step.
  * 2 workers averaging every 10 steps: each worker trains on its own and
    the two average their weights every 10th step (--replica_averaging_steps).
  * 1 ps + 1 worker x 2 clones: the worker reads each variable from the ps
    once per step and its two clones share it (--cache_variable_reads, the
    default); "(reads not cached)" is the upstream way, a read per use.

Bytes per global step are those sent on the loopback interface during the
timed window (/proc/net/dev), so other traffic on 127.0.0.1 counts too.

The clusters are started with clusters.launch.LocalCluster. Every process
gets TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS (1 by default) and
one reader and one preprocessing thread, so that the setups differ in what
goes through the ps and not in how many threads each process grabs; with 3
single-threaded processes on a 2-core machine the last setup is also short
of cores, which the CPU column shows.

Measurement: the step lines that the workers log every --log_every steps
carry the global step; the benchmark timestamps them as they arrive and
reads the CPU time of all the setup's processes from /proc at the same
moment. After the global step passes --warmup_steps, examples/sec is
(global steps done x batch) / wall time, and CPU ms/example is the CPU time
of all processes (ps included) per example, which depends much less on
other load on the machine than examples/sec. The setups take turns for
--rounds rounds and the table gives the median of each column; the ratio
to the process alone is that of the medians.

The table is printed and written, after the machine it was measured on, to
benchmarks/results/cluster_throughput.md (--results_dir to write
elsewhere).

Usage (from the repository root):

  .venv/bin/python benchmarks/cluster_throughput.py
  .venv/bin/python benchmarks/cluster_throughput.py --rounds 1 --steps 200
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
from clusters import launch
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
# pylint: enable=g-import-not-at-top,wrong-import-position

TRAIN = os.path.join(REPO, 'train_image_classifier.py')
STEP_LINE = re.compile(r'INFO:tensorflow:step (\d+): loss')
# (name, ps tasks, workers, extra flags, worker batches per global step)
SETUPS = (
    ('alone', 0, 1, [], 1),
    ('1 ps + 1 worker', 1, 1, [], 1),
    ('1 ps + 2 workers', 1, 2, [], 1),
    ('1 ps + 2 workers sync', 1, 2,
     ['--sync_replicas', '--replicas_to_aggregate=2'], 2),
    ('2 workers all-reduce', 0, 2, [], 2),
    ('2 workers averaging every 10 steps', 0, 2,
     ['--replica_averaging_steps=10'], 2),
    ('1 ps + 1 worker x 2 clones', 1, 1, ['--num_clones=2'], 2),
    ('1 ps + 1 worker x 2 clones (reads not cached)', 1, 1,
     ['--num_clones=2', '--nocache_variable_reads'], 2),
)


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--batch_size', type=int, default=32,
                      help='examples per worker step')
  parser.add_argument('--steps', type=int, default=400,
                      help='global steps per run')
  parser.add_argument('--warmup_steps', type=int, default=60,
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
                      help='folder of the result file cluster_throughput.md; '
                      'default: benchmarks/results')
  parser.add_argument('--setups', default=None,
                      help='comma-separated names of the setups to run, '
                      'from: %s (default: all; alone always runs, as the '
                      'ratios are to it)' % ', '.join(s[0] for s in SETUPS))
  args = parser.parse_args(argv)
  names = set(args.setups.split(',')) if args.setups else None
  unknown = sorted((names or set()) - {setup[0] for setup in SETUPS})
  if unknown:
    parser.error('--setups: unknown setup(s) %s; use names from: %s' % (
        ', '.join(repr(name) for name in unknown),
        ', '.join(setup[0] for setup in SETUPS)))
  args.setups = [setup for setup in SETUPS if names is None or
                 setup[0] in names or setup is SETUPS[0]]
  return args


def _loopback_bytes():
  """Bytes sent on the loopback interface so far (/proc/net/dev)."""
  with open('/proc/net/dev') as dev:
    for line in dev:
      name, _, counters = line.partition(':')
      if name.strip() == 'lo':
        return int(counters.split()[8])
  return 0


def _cpu_seconds(pids):
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
  loopback bytes sent so far).
  """

  def __init__(self, pids):
    self._pids = pids
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
                             _cpu_seconds(self._pids()), _loopback_bytes()))

  def flush(self):
    pass


def _train_args(args, dataset_dir, train_dir, extra=()):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu',
          '--batch_size=%d' % args.batch_size, '--optimizer=sgd',
          '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
          '--max_number_of_steps=%d' % args.steps,
          '--log_every_n_steps=%d' % args.log_every,
          '--save_interval_secs=3600', '--save_summaries_secs=3600',
          '--non_chief_wait_secs=1', '--num_readers=1',
          '--num_preprocessing_threads=1', '--train_dir=%s' % train_dir
         ] + list(extra)


def _thread_env(args):
  return {'TF_CPP_MIN_LOG_LEVEL': '2',
          'TF_NUM_INTRAOP_THREADS': str(args.intra_op_threads),
          'TF_NUM_INTEROP_THREADS': str(args.inter_op_threads)}


def run_alone(args, dataset_dir, train_dir):
  env = dict(os.environ, PYTHONPATH=REPO, PYTHONUNBUFFERED='1',
             **_thread_env(args))
  env.pop('TF_CONFIG', None)
  process = subprocess.Popen(
      [sys.executable, TRAIN] + _train_args(args, dataset_dir, train_dir),
      cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, start_new_session=True)
  recorder = StepRecorder(lambda: [process.pid])
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


def run_cluster(args, dataset_dir, train_dir, num_ps, num_workers, extra):
  holder = {}
  recorder = StepRecorder(
      lambda: [p.pid for p in holder['cluster'].processes.values()])
  env = dict(PYTHONPATH=REPO, **_thread_env(args))
  cluster = launch.LocalCluster(
      [TRAIN] + _train_args(args, dataset_dir, train_dir, extra), num_ps,
      num_workers, env=env, output=recorder, cwd=REPO, grace_secs=5)
  holder['cluster'] = cluster
  cluster.start()
  return cluster.wait(timeout=args.run_timeout), recorder


def window(samples, warmup_steps, batch_size):
  """(examples/sec, CPU ms/example, loopback MiB per global step) after
  the warm-up; None if too short. `batch_size`: examples per global
  step."""
  timed = sorted((s for s in samples if s[1] >= warmup_steps),
                 key=lambda s: s[0])
  if len(timed) < 2 or timed[-1][1] <= timed[0][1]:
    return None
  (t0, step0, cpu0, sent0), (t1, step1, cpu1, sent1) = timed[0], timed[-1]
  examples = (step1 - step0) * batch_size
  return (examples / (t1 - t0), 1000.0 * (cpu1 - cpu0) / examples,
          (sent1 - sent0) / 2.0 ** 20 / (step1 - step0))


def measure(args, dataset_dir):
  setups = args.setups
  measured = {setup[0]: [] for setup in setups}
  for round_index in range(args.rounds):
    first = round_index % len(setups)  # Rotates, so no setup always leads.
    for name, num_ps, num_workers, extra, batches in (setups[first:] +
                                                      setups[:first]):
      train_dir = tempfile.mkdtemp(prefix='cluster_throughput_')
      try:
        if num_ps + num_workers == 1:
          status, recorder = run_alone(args, dataset_dir, train_dir)
        else:
          status, recorder = run_cluster(args, dataset_dir, train_dir,
                                         num_ps, num_workers, extra)
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
      measured[name].append(result)
      print('round %d, %s: %.0f examples/sec, %.2f CPU ms/example, %.1f '
            'MiB/step' % ((round_index + 1, name) + result), flush=True)
  return measured


def table(args, measured):
  """Markdown lines; `measured` is {setup name: [(examples/sec, CPU
  ms/example, MiB/step) per round]}, ratios are to the first setup
  (alone)."""
  alone = statistics.median(r[0] for r in measured[SETUPS[0][0]])
  lines = [
      '| setup | processes | examples/sec | per worker | ratio to alone | '
      'CPU ms/example (all processes) | MiB sent per global step | '
      'examples/sec per round |',
      '|---|---:|---:|---:|---:|---:|---:|---|',
  ]
  for name, num_ps, num_workers, _, _ in args.setups:
    rate, cpu, sent = (statistics.median(r[i] for r in measured[name])
                       for i in range(3))
    lines.append('| %s | %d | %.0f | %.0f | %.3f | %.2f | %.1f | %s |' % (
        name, num_ps + num_workers, rate, rate / num_workers, rate / alone,
        cpu, sent, ', '.join('%.0f' % r[0] for r in measured[name])))
  lines += [
      '',
      'LeNet on digits, batch %d per clone (one clone per worker unless '
      'named), SGD; %d global '
      'steps per run, timed after step %d; median of %d round(s). Every '
      'process: TF_NUM_INTRAOP_THREADS=%d, TF_NUM_INTEROP_THREADS=%d, 1 '
      'reader, 1 preprocessing thread.' % (
          args.batch_size, args.steps, args.warmup_steps, args.rounds,
          args.intra_op_threads, args.inter_op_threads),
  ]
  return lines


def main(argv=None):
  """Measures, prints the table and writes the result file; returns its
  path."""
  args = parse_args(argv)
  dataset_dir, made_dir = args.dataset_dir, None
  if dataset_dir is None:
    made_dir = dataset_dir = tempfile.mkdtemp(prefix='digits_')
    subprocess.run(
        [sys.executable, '-c', 'from datasets import convert_digits; '
         'convert_digits.run(%r)' % dataset_dir],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO,
                           TF_CPP_MIN_LOG_LEVEL='2'),
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        timeout=300)
  try:
    with OtherLoad() as load:
      measured = measure(args, dataset_dir)
  finally:
    if made_dir:
      shutil.rmtree(made_dir, ignore_errors=True)
  lines = table(args, measured) + ['', disturbance_note(load)]
  print('\n' + '\n'.join(lines))
  path = results.write_result(
      'cluster_throughput', 'What going through a ps costs', lines,
      argv=argv,
      directory=args.results_dir)
  print('written to %s' % path)
  return path


if __name__ == '__main__':
  main()
