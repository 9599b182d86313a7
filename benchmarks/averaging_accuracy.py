"""Test accuracy of periodic parameter averaging over seeds and CPU kernels.

tests/test_all_reduce_cluster.py trains LeNet on digits with 2 all-reduce
workers that average their weights every 10 steps, and asserts a floor on
the test accuracy. The floor must hold on any x86-64 CPU, whatever its
vector units: where the CPU has AVX-512, TensorFlow runs oneDNN's custom
operations, whose float results differ in the last bits, and over 450
steps the runs drift apart. This runs the test's job for several seeds
with oneDNN's custom operations on (TF_ENABLE_ONEDNN_OPTS=1) and off (=0),
and records the accuracy of each run, so the floor keeps a margin below
the lowest.

Each run: `python -m clusters.launch --num_ps 0 --num_workers 2 --
train_image_classifier.py ...` with the test's flags and
--shuffle_seed=--random_seed=SEED, then eval_image_classifier.py on the
360 test digits. Written to benchmarks/results/averaging_accuracy.md.

Usage (from the repository root; about 2 minutes a run on 2 idle cores):

  .venv/bin/python benchmarks/averaging_accuracy.py
  .venv/bin/python benchmarks/averaging_accuracy.py --seeds 1,2,3,4
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import results  # next to this script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 450

# The test's flags, less the seeds and the folders.
TRAIN_FLAGS = [
    '--dataset_name=digits', '--model_name=lenet', '--clone_on_cpu',
    '--batch_size=32', '--optimizer=adam', '--opt_epsilon=1e-4',
    '--learning_rate=0.005', '--learning_rate_decay_type=polynomial',
    '--num_epochs_per_decay=20.1', '--end_learning_rate=1e-5',
    '--replica_averaging_steps=10', '--max_number_of_steps=%d' % STEPS,
    '--log_every_n_steps=100', '--save_interval_secs=600']

EVAL_LINE = re.compile(r'accuracy ([\d.]+)% on (\d+) examples')


def _run(argv, env):
  result = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
  if result.returncode:
    sys.exit('%s exited %d:\n%s' % (' '.join(argv[:4]), result.returncode,
                                    result.stdout[-3000:]))
  return result.stdout


def accuracy(digits_dir, work_dir, seed, onednn, train_flags=TRAIN_FLAGS,
             label=''):
  """Trains the job of `train_flags` (the averaging job) once on 2
  all-reduce workers; returns its test accuracy (%)."""
  env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn,
             TF_CPP_MIN_LOG_LEVEL='2')
  env.pop('TF_CONFIG', None)
  train_dir = os.path.join(work_dir, '%sonednn%s_seed%d' % (label, onednn,
                                                            seed))
  _run([sys.executable, '-m', 'clusters.launch', '--num_ps', '0',
        '--num_workers', '2', '--', 'train_image_classifier.py'] +
       list(train_flags) + ['--dataset_dir=%s' % digits_dir,
                      '--shuffle_seed=%d' % seed, '--random_seed=%d' % seed,
                      '--train_dir=%s' % train_dir], env)
  output = _run([sys.executable, 'eval_image_classifier.py',
                 '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
                 '--dataset_split_name=test', '--model_name=lenet',
                 '--checkpoint_path=%s' % train_dir,
                 '--eval_dir=%s' % os.path.join(train_dir, 'eval')], env)
  return float(EVAL_LINE.search(output).group(1))


def convert_digits(work_dir):
  """The embedded digits dataset, converted under `work_dir`."""
  digits_dir = os.path.join(work_dir, 'digits')
  _run([sys.executable, 'download_and_convert_data.py',
        '--dataset_name=digits', '--dataset_dir=%s' % digits_dir],
       dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  return digits_dir


def _has_avx512():
  try:
    with open('/proc/cpuinfo') as cpuinfo:
      return ' avx512f' in cpuinfo.read()
  except OSError:
    return False


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--seeds', default='1,2,3',
                      help='comma-separated --shuffle_seed/--random_seed')
  args = parser.parse_args()
  seeds = [int(s) for s in args.seeds.split(',')]
  with tempfile.TemporaryDirectory() as work_dir:
    digits_dir = convert_digits(work_dir)
    rows = []
    for onednn in ('1', '0'):
      for seed in seeds:
        value = accuracy(digits_dir, work_dir, seed, onednn)
        print('oneDNN %s, seed %d: %.2f%%' % (onednn, seed, value),
              flush=True)
        rows.append((onednn, seed, value))
  lowest = min(value for _, _, value in rows)
  lines = ['- AVX-512 on this CPU: %s' % ('yes' if _has_avx512() else 'no'),
           '',
           '2 all-reduce workers averaging every 10 steps, LeNet on digits, '
           '%d steps of 2 x 32 (the job of tests/test_all_reduce_cluster.py'
           '::test_averaging_every_ten_steps_reaches_96_percent_on_digits).'
           % STEPS, '',
           '| TF_ENABLE_ONEDNN_OPTS | seed | test accuracy |',
           '|---|---:|---:|']
  lines += ['| %s | %d | %.2f%% |' % row for row in rows]
  lines += ['', 'Lowest: %.2f%%; the test asserts >= 96%%.' % lowest]
  print('\n'.join(lines))
  print(results.write_result('averaging_accuracy',
                             'Periodic averaging: accuracy across seeds and '
                             'CPU kernels', lines))


if __name__ == '__main__':
  main()
