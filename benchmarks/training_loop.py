"""The training script's per-step cost against an upstream-style Slim loop.

Both train make run's job (digits, LeNet, 2 CPU clones, batch 32 per
clone, adam; the training flags of benchmarks/make_run.py, which the tests
keep equal to the Makefile's):

  upstream-style  benchmarks/upstream_style_train.py: the same model and
                  deploy() graph, slim's queue input (DatasetDataProvider,
                  tf.train.batch, prefetch_queue) and slim.learning.train.
  this project    train_image_classifier.py.

End to end: each round runs both as subprocesses, one after the other (the
first of a round alternates), each --steps steps in a fresh train_dir, on
digits converted once into a temporary folder. One clock serves both: the
step lines each script logs every --log_every steps are timestamped as
they arrive, together with the process's CPU time (user + system, all
threads, from /proc). Over the lines from step --warmup_steps on:

  s/step       (last time - first time) / (last step - first step)
  CPU ms/step  the same with CPU time; other load on the machine changes
               it much less than s/step
  examples/sec the global batch / s/step

wall is from start to exit; start-up + shutdown is wall - steps x s/step
(and, in CPU seconds, the run's CPU time - steps x CPU/step). The figures
the scripts log about themselves are listed too, and differ in kind:
train_image_classifier.py logs examples/sec over each log window (listed:
their median); slim.learning.train logs the duration of the one
session.run before each log line, leaving out its loop's other
session.run calls (listed: global batch / the median of those durations).

Where the time goes: benchmarks/step_profile.py, run in a subprocess
after the rounds, times the script's step part by part (each hook, its
extra session.run calls, MonitoredSession) and against bare
session.run(train_op) with either input path; its tables follow.

Everything is printed and written, after the machine it was measured on,
to benchmarks/results/training_loop.md (--results_dir to write elsewhere).

Usage (from the repository root):

  .venv/bin/python benchmarks/training_loop.py
  .venv/bin/python benchmarks/training_loop.py --rounds 4 --profile_rounds 8
"""

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import make_run  # next to this script
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(REPO, 'benchmarks')

# (row name, script relative to the repository); the first is the baseline.
LOOPS = (
    ('upstream-style: queues + slim.learning.train',
     'benchmarks/upstream_style_train.py'),
    ('this project: train_image_classifier.py', 'train_image_classifier.py'),
)

# 'step 100: loss = ...' (this project) and 'global step 99: loss = ...'
# (slim.learning.train).
STEP_LINE = re.compile(r'step (\d+): loss')
PROJECT_RATE = re.compile(r'([\d.]+) examples/sec')
SLIM_STEP_TIME = re.compile(r'\(([\d.]+) sec/step\)')
PROFILE_JSON = 'step_profile json: '  # step_profile.JSON_PREFIX


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--rounds', type=int, default=2,
                      help='end-to-end runs of each loop, alternating')
  parser.add_argument('--steps', type=int, default=make_run.MAKE_RUN_STEPS,
                      help="training steps per run (make run's)")
  parser.add_argument('--log_every', type=int, default=100,
                      help="--log_every_n_steps of both (make run's)")
  parser.add_argument('--warmup_steps', type=int, default=100,
                      help='the timed window starts at the first step line '
                      'at or after this step')
  parser.add_argument('--profile_rounds', type=int, default=5,
                      help="step_profile.py's --rounds; 0 skips the profile")
  parser.add_argument('--profile_steps_per_round', type=int, default=20)
  parser.add_argument('--profile_warmup_steps', type=int, default=10)
  parser.add_argument('--run_timeout', type=float, default=900,
                      help='seconds before a run counts as failed')
  parser.add_argument('--dataset_dir', default=None,
                      help='digits TFRecords; default: converted into a '
                      'temporary folder')
  parser.add_argument('--results_dir', default=None,
                      help='folder of the result file training_loop.md; '
                      'default: benchmarks/results')
  args = parser.parse_args(argv)
  if args.warmup_steps + args.log_every > args.steps:
    parser.error('--steps=%d leaves no timed window after --warmup_steps=%d '
                 'with step lines every %d' % (args.steps, args.warmup_steps,
                                               args.log_every))
  return args


def with_flag(flags, name, value):
  """`flags` with --name set to value: replaced where it is, else added."""
  prefix = '--%s=' % name
  flag = prefix + str(value)
  if any(f.startswith(prefix) for f in flags):
    return [flag if f.startswith(prefix) else f for f in flags]
  return list(flags) + [flag]


def train_flags(args, dataset_dir, train_dir):
  """make run's training flags, with this benchmark's steps and log period."""
  commands = dict(make_run.stage_commands('python', dataset_dir, train_dir,
                                          args.steps))
  return with_flag(commands['train'][2:], 'log_every_n_steps',
                   args.log_every)


def global_batch(flags):
  values = dict(f[2:].split('=', 1) for f in flags if '=' in f)
  return int(values['batch_size']) * int(values['num_clones'])


def _env():
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  env.pop('TF_CONFIG', None)  # A cluster task would be another job.
  return env


def _cpu_seconds(pid):
  """User + system CPU time of a running process (all its threads)."""
  with open('/proc/%d/stat' % pid) as stat:
    fields = stat.read().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def _children_cpu_seconds():
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


class Run:
  """One training run's output lines, timestamped step lines and totals.

  `samples` holds (monotonic seconds, step, process CPU seconds) per step
  line; `wall` and `cpu` are the seconds of the whole run.
  """

  def __init__(self, lines, samples, wall, cpu):
    self.lines = lines
    self.samples = samples
    self.wall = wall
    self.cpu = cpu

  def _per_step(self, warmup_steps, field):
    timed = [s for s in self.samples if s[1] >= warmup_steps]
    if len(timed) < 2 or timed[-1][1] <= timed[0][1]:
      return None
    return (timed[-1][field] - timed[0][field]) / (timed[-1][1] - timed[0][1])

  def seconds_per_step(self, warmup_steps):
    """Over the step lines from warmup_steps on; None with fewer than 2."""
    return self._per_step(warmup_steps, 0)

  def cpu_seconds_per_step(self, warmup_steps):
    """Like seconds_per_step, in CPU seconds of the process."""
    return self._per_step(warmup_steps, 2)

  def self_reported_rate(self, batch):
    """examples/sec as the script itself logs it (median), or None."""
    project = [float(m.group(1)) for m in map(PROJECT_RATE.search, self.lines)
               if m]
    slim_times = [float(m.group(1))
                  for m in map(SLIM_STEP_TIME.search, self.lines) if m]
    if project:
      return statistics.median(project)
    if slim_times:
      return batch / statistics.median(slim_times)
    return None


def run_training(script, flags, timeout):
  """Runs one training script to its end; returns a Run.

  Exits with the run's output if it fails or times out.
  """
  argv = [sys.executable, script] + flags
  start, start_cpu = time.monotonic(), _children_cpu_seconds()
  process = subprocess.Popen(argv, cwd=REPO, env=_env(),
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
  timer = threading.Timer(timeout, os.killpg, (process.pid, signal.SIGKILL))
  timer.start()
  lines, samples = [], []
  try:
    for line in process.stdout:
      now = time.monotonic()
      lines.append(line)
      match = STEP_LINE.search(line)
      if match:
        samples.append((now, int(match.group(1)), _cpu_seconds(process.pid)))
    status = process.wait()
  finally:
    timer.cancel()
  wall = time.monotonic() - start
  if status != 0:
    sys.exit('%s failed with exit status %d:\n%s' % (
        ' '.join(argv), status, ''.join(lines)[-3000:]))
  return Run(lines, samples, wall, _children_cpu_seconds() - start_cpu)


def measure(args, dataset_dir):
  """Alternating rounds of both loops; returns {loop name: [Run]}."""
  runs = {name: [] for name, _ in LOOPS}
  work_dir = tempfile.mkdtemp(prefix='training_loop_')
  try:
    for round_index in range(args.rounds):
      first = round_index % len(LOOPS)
      for name, script in LOOPS[first:] + LOOPS[:first]:
        train_dir = os.path.join(work_dir, 'run%d_%s' % (
            round_index, os.path.basename(script)[:-3]))
        run = run_training(script, train_flags(args, dataset_dir, train_dir),
                           args.run_timeout)
        seconds = run.seconds_per_step(args.warmup_steps)
        if seconds is None:
          sys.exit('%s: fewer than 2 step lines after step %d; raise --steps'
                   % (name, args.warmup_steps))
        runs[name].append(run)
        print('round %d, %s: %.4f s/step, %.1f CPU ms/step, %.1f s wall' % (
            round_index + 1, name, seconds,
            1000 * run.cpu_seconds_per_step(args.warmup_steps), run.wall),
              flush=True)
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)
  return runs


def loops_table(args, runs, batch):
  """Markdown lines; ratios are to the first loop's medians."""
  def median_of(name, value):
    return statistics.median(value(run) for run in runs[name])

  def seconds(run):
    return run.seconds_per_step(args.warmup_steps)

  def cpu(run):
    return run.cpu_seconds_per_step(args.warmup_steps)

  baseline = median_of(LOOPS[0][0], seconds)
  baseline_cpu = median_of(LOOPS[0][0], cpu)
  lines = ['| loop | s/step (median) | examples/sec | ratio of s/step to '
           'upstream-style | CPU ms/step (median) | ratio of CPU/step | '
           'self-reported examples/sec | wall s | start-up + shutdown s | '
           'start-up + shutdown CPU s | s/step per round |',
           '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
  for name, _ in LOOPS:
    step = median_of(name, seconds)
    step_cpu = median_of(name, cpu)
    reported = [run.self_reported_rate(batch) for run in runs[name]]
    reported = [rate for rate in reported if rate is not None]
    lines.append(
        '| %s | %.4f | %.0f | %.3f | %.1f | %.3f | %s | %.1f | %.1f | %.1f '
        '| %s |' % (
            name, step, batch / step, step / baseline, 1000 * step_cpu,
            step_cpu / baseline_cpu,
            '%.0f' % statistics.median(reported) if reported else '-',
            median_of(name, lambda r: r.wall),
            median_of(name, lambda r: r.wall - args.steps * seconds(r)),
            median_of(name, lambda r: r.cpu - args.steps * cpu(r)),
            ', '.join('%.4f' % seconds(r) for r in runs[name])))
  return lines


def run_profile(args, dataset_dir):
  """step_profile.py's Markdown lines, from its JSON line."""
  train_dir = tempfile.mkdtemp(prefix='training_loop_profile_')
  try:
    argv = [sys.executable, os.path.join(BENCHMARKS, 'step_profile.py'),
            '--rounds=%d' % args.profile_rounds,
            '--steps_per_round=%d' % args.profile_steps_per_round,
            '--warmup_steps=%d' % args.profile_warmup_steps, '--'] + (
                train_flags(args, dataset_dir, train_dir))
    process = subprocess.run(argv, cwd=REPO, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=args.run_timeout, check=False)
  finally:
    shutil.rmtree(train_dir, ignore_errors=True)
  for line in reversed(process.stdout.splitlines()):
    if line.startswith(PROFILE_JSON) and process.returncode == 0:
      return json.loads(line[len(PROFILE_JSON):])
  sys.exit('step_profile.py failed with exit status %d:\n%s' % (
      process.returncode, process.stdout[-3000:]))


def convert_digits(directory):
  subprocess.run(
      [sys.executable, '-c', 'from datasets import convert_digits; '
       'convert_digits.run(%r)' % directory],
      cwd=REPO, env=dict(_env(), PYTHONPATH=REPO), check=True,
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)


def main(argv=None):
  """Measures, prints the tables and writes the result file; returns its
  path."""
  args = parse_args(argv)
  dataset_dir, made_dir = args.dataset_dir, None
  if dataset_dir is None:
    made_dir = dataset_dir = tempfile.mkdtemp(prefix='digits_')
    convert_digits(dataset_dir)
  try:
    with OtherLoad() as load:
      runs = measure(args, dataset_dir)
    flags = train_flags(args, dataset_dir, 'TRAIN_DIR')
    batch = global_batch(flags)
    lines = ['## End to end: make run\'s training, %d steps' % args.steps,
             ''] + loops_table(args, runs, batch) + [
                 '',
                 '- training flags of both: `%s`' % ' '.join(
                     f for f in flags if not f.startswith('--dataset_dir=')
                     and not f.startswith('--train_dir=')),
                 '- global batch %d; %d round(s), loops alternating; s/step '
                 'and CPU/step from the step lines of steps %d..%d' % (
                     batch, args.rounds, args.warmup_steps, args.steps),
                 '- self-reported: the median of what each script logs; '
                 'slim.learning.train times only the session.run before '
                 'each log line, this script the whole window since its '
                 'last line',
                 disturbance_note(load)]
    if args.profile_rounds:
      print('Profiling the step...', flush=True)
      with OtherLoad() as load:
        profile = run_profile(args, dataset_dir)
      lines += ['', '## Where the script\'s step goes', ''] + profile + [
          '', disturbance_note(load)]
  finally:
    if made_dir:
      shutil.rmtree(made_dir, ignore_errors=True)
  print('\n' + '\n'.join(lines))
  path = results.write_result(
      'training_loop', 'Training loop: this script against upstream-style '
      'Slim', lines,
      argv=argv,
      directory=args.results_dir)
  print('written to %s' % path)
  return path


if __name__ == '__main__':
  main()
