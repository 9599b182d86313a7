"""Times `make run` stage by stage and records the test accuracy it reaches.

The stages are the commands of the Makefile's `run` target, each in its
own subprocess, as make runs them:

  convert  download_and_convert_data.py: the embedded digits to TFRecords
  train    train_image_classifier.py: LeNet, 2 CPU clones, batch 32 per
           clone, adam, 800 steps
  eval     eval_image_classifier.py: accuracy on the 360 test digits

The commands are written once, in `stage_commands`, and
tests/test_benchmarks.py checks that they are the Makefile's, so the two
cannot drift apart. Each round works in a fresh temporary folder (make run
also starts training from an empty RUN_DIR; a fresh digits folder makes the
conversion do its whole work, as on a fresh checkout). What is not timed:
creating .venv and installing the requirements.

The table gives, per stage, the wall and CPU seconds (the stage's process
and its children), the median over --rounds rounds, and the test accuracy
that eval_image_classifier.py printed. It is printed and written, after the
machine it was measured on, to benchmarks/results/make_run.md
(--results_dir to write elsewhere).

Usage (from the repository root):

  .venv/bin/python benchmarks/make_run.py
  .venv/bin/python benchmarks/make_run.py --rounds 3
"""

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The Makefile's variables, and its step count.
DIGITS_DIR = 'data/digits'
RUN_DIR = 'train_dir/digits_lenet'
MAKE_RUN_STEPS = 800
NUM_TEST_DIGITS = 360

# eval_image_classifier.py's summary line, e.g.
# 'digits test: accuracy 98.61% on 360 examples (checkpoint step 800)'.
EVAL_LINE = re.compile(r'accuracy ([\d.]+)% on (\d+) examples '
                       r'\(checkpoint step (\d+)\)')


def stage_commands(python, digits_dir, run_dir, steps=MAKE_RUN_STEPS):
  """The commands of `make run`, as [(stage name, argv)].

  Args:
    python: the interpreter (the Makefile's $(PY)).
    digits_dir: the Makefile's $(DIGITS_DIR).
    run_dir: the Makefile's $(RUN_DIR); must not hold a checkpoint yet.
    steps: --max_number_of_steps; only tests pass another value.
  """
  return [
      ('convert', [python, 'download_and_convert_data.py',
                   '--dataset_name=digits', '--dataset_dir=%s' % digits_dir]),
      ('train', [python, 'train_image_classifier.py', '--dataset_name=digits',
                 '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                 '--num_clones=2', '--clone_on_cpu', '--batch_size=32',
                 '--optimizer=adam', '--opt_epsilon=1e-8',
                 '--learning_rate=0.001', '--learning_rate_decay_type=fixed',
                 '--max_number_of_steps=%d' % steps, '--log_every_n_steps=100',
                 '--train_dir=%s' % run_dir]),
      ('eval', [python, 'eval_image_classifier.py', '--dataset_name=digits',
                '--dataset_dir=%s' % digits_dir, '--dataset_split_name=test',
                '--model_name=lenet', '--checkpoint_path=%s' % run_dir,
                '--eval_dir=%s/eval' % run_dir]),
  ]


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--rounds', type=int, default=1,
                      help='times to run the whole job')
  parser.add_argument('--steps', type=int, default=MAKE_RUN_STEPS,
                      help='training steps; anything but %d is not make '
                      "run's job (the tests use a few)" % MAKE_RUN_STEPS)
  parser.add_argument('--stage_timeout', type=float, default=1800,
                      help='seconds before a stage counts as failed')
  parser.add_argument('--results_dir', default=None,
                      help='folder of the result file make_run.md; default: '
                      'benchmarks/results')
  args = parser.parse_args(argv)
  if args.rounds < 1 or args.steps < 1:
    parser.error('--rounds and --steps must be >= 1, got %d and %d'
                 % (args.rounds, args.steps))
  return args


def _children_cpu_seconds():
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def run_stage(name, argv, timeout):
  """Runs one stage from the repository root; returns (wall s, CPU s,
  output). Exits with the stage's output if it fails."""
  env = dict(os.environ)
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')  # As the Makefile exports it.
  start_wall, start_cpu = time.monotonic(), _children_cpu_seconds()
  process = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, check=False)
  wall = time.monotonic() - start_wall
  cpu = _children_cpu_seconds() - start_cpu
  if process.returncode != 0:
    sys.exit('stage %s failed with exit status %d: %s\n%s' % (
        name, process.returncode, ' '.join(argv), process.stdout[-3000:]))
  return wall, cpu, process.stdout


def parse_eval_output(output):
  """(accuracy in %, examples, checkpoint step) from eval's output."""
  match = EVAL_LINE.search(output)
  if match is None:
    raise ValueError('no accuracy line in the eval output:\n%s'
                     % output[-2000:])
  return float(match.group(1)), int(match.group(2)), int(match.group(3))


def run_job(args):
  """One round in a fresh folder: {stage: (wall, CPU)} and the eval result."""
  work_dir = tempfile.mkdtemp(prefix='make_run_')
  try:
    times = {}
    output = ''
    for name, argv in stage_commands(
        sys.executable, os.path.join(work_dir, DIGITS_DIR),
        os.path.join(work_dir, RUN_DIR), args.steps):
      wall, cpu, output = run_stage(name, argv, args.stage_timeout)
      times[name] = (wall, cpu)
    return times, parse_eval_output(output)
  finally:
    shutil.rmtree(work_dir, ignore_errors=True)


def table(rounds):
  """Markdown lines; `rounds` is [({stage: (wall, CPU)}, eval result)]."""
  stages = list(rounds[0][0])
  lines = ['| stage | wall s (median) | CPU s (median) | wall s per round |',
           '|---|---:|---:|---|']
  totals = [(sum(w for w, _ in times.values()),
             sum(c for _, c in times.values())) for times, _ in rounds]
  per_stage = [(name, [times[name] for times, _ in rounds])
               for name in stages] + [('total', totals)]
  for name, stage_times in per_stage:
    lines.append('| %s | %.1f | %.1f | %s |' % (
        name, statistics.median(w for w, _ in stage_times),
        statistics.median(c for _, c in stage_times),
        ', '.join('%.1f' % w for w, _ in stage_times)))
  accuracies = [accuracy for _, (accuracy, _, _) in rounds]
  _, examples, step = rounds[0][1]
  lines += ['', 'test accuracy: %.2f%% on %d examples, checkpoint step %d '
            '(per round: %s)' % (statistics.median(accuracies), examples, step,
                                 ', '.join('%.2f%%' % a for a in accuracies))]
  return lines


def main(argv=None):
  """Runs the job, prints the table and writes the result file; returns its
  path."""
  args = parse_args(argv)
  rounds = []
  with OtherLoad() as load:
    for round_index in range(args.rounds):
      rounds.append(run_job(args))
      times, (accuracy, _, _) = rounds[-1]
      print('round %d: %s; test accuracy %.2f%%' % (
          round_index + 1, ', '.join('%s %.1f s' % (name, wall)
                                     for name, (wall, _) in times.items()),
          accuracy), flush=True)
  lines = table(rounds) + [
      '',
      '- %d training steps%s; %d round(s), each in a fresh folder; .venv '
      'already installed' % (
          args.steps, '' if args.steps == MAKE_RUN_STEPS else
          ' (make run trains %d: this is not its job)' % MAKE_RUN_STEPS,
          args.rounds),
      disturbance_note(load)]
  print('\n' + '\n'.join(lines))
  path = results.write_result(
      'make_run', 'make run, stage by stage', lines,
      argv=argv,
      directory=args.results_dir)
  print('written to %s' % path)
  return path


if __name__ == '__main__':
  main()
