"""Test accuracy with the all-reduce's gradients sent as 16-bit floats.

Trains LeNet on digits with 2 all-reduce workers that average their
gradients every step, with --gradient_compression=none, fp16 and bf16,
for the same seeds (same start, same batches), and records each run's
test accuracy and its difference to the uncompressed run of its seed. The
target: compression moves the accuracy by at most 0.5 point.

Each run: `python -m clusters.launch --num_ps 0 --num_workers 2 --
train_image_classifier.py ...` (averaging_accuracy.py's job without the
periodic averaging, --max_number_of_steps STEPS), then
eval_image_classifier.py on the 360 test digits. Written to
benchmarks/results/compression_accuracy.md.

Usage (from the repository root; about 2 minutes a run on 2 idle cores):

  .venv/bin/python benchmarks/compression_accuracy.py
  .venv/bin/python benchmarks/compression_accuracy.py --seeds 1,2,3
"""

import argparse
import statistics
import tempfile

import averaging_accuracy  # next to this script
import results  # next to this script

COMPRESSIONS = ('none', 'fp16', 'bf16')
TRAIN_FLAGS = [flag for flag in averaging_accuracy.TRAIN_FLAGS
               if not flag.startswith('--replica_averaging_steps')]
TARGET_POINTS = 0.5


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--seeds', default='1,2',
                      help='comma-separated --shuffle_seed/--random_seed')
  args = parser.parse_args()
  seeds = [int(s) for s in args.seeds.split(',')]
  accuracies = {}
  with tempfile.TemporaryDirectory() as work_dir:
    digits_dir = averaging_accuracy.convert_digits(work_dir)
    for seed in seeds:
      for compression in COMPRESSIONS:
        accuracies[compression, seed] = averaging_accuracy.accuracy(
            digits_dir, work_dir, seed, '1', TRAIN_FLAGS + [
                '--gradient_compression=%s' % compression],
            label=compression)
        print('%s, seed %d: %.2f%%' % (compression, seed,
                                       accuracies[compression, seed]),
              flush=True)
  lines = ['2 all-reduce workers, LeNet on digits, %d steps of 2 x 32, '
           'gradients averaged every step.' % averaging_accuracy.STEPS, '',
           '| --gradient_compression | seed | test accuracy | '
           'minus uncompressed (points) |', '|---|---:|---:|---:|']
  for seed in seeds:
    for compression in COMPRESSIONS:
      value = accuracies[compression, seed]
      lines.append('| %s | %d | %.2f%% | %+.2f |' % (
          compression, seed, value, value - accuracies['none', seed]))
  lines.append('')
  for compression in COMPRESSIONS[1:]:
    gaps = [accuracies[compression, s] - accuracies['none', s]
            for s in seeds]
    lines.append('- %s: median difference %+.2f points, largest %.2f '
                 '(target: within %.1f)' % (
                     compression, statistics.median(gaps),
                     max(abs(g) for g in gaps), TARGET_POINTS))
  print('\n'.join(lines))
  print(results.write_result('compression_accuracy',
                             'Gradient compression: test accuracy', lines))


if __name__ == '__main__':
  main()
