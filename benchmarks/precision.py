"""Step time of each precision against float32, on this machine's CPU.

LeNet (the make run network) trains on random 28x28x1 images held in a
variable, batch 64, one clone, with deploy(precision=...): float32,
mixed_float16 (with dynamic loss scaling) and mixed_bfloat16, timed in
interleaved rounds in one process.

  .venv/bin/python benchmarks/precision.py
  .venv/bin/python benchmarks/precision.py --rounds 2 --steps 3

Writes benchmarks/results/precision.md. Low precision pays on GPUs with
float16 or bfloat16 units; on a CPU without them the kernels emulate the
type and can be slower than float32; the table says which.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from deployment import model_deploy  # pylint: disable=g-import-not-at-top,wrong-import-position
from deployment import precision  # pylint: disable=g-import-not-at-top,wrong-import-position
from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from nets import nets_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from other_load import disturbance_note  # pylint: disable=g-import-not-at-top,wrong-import-position
import results  # pylint: disable=g-import-not-at-top,wrong-import-position
import step_timing  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCH = 64


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=10,
                      help='timed steps per precision per round')
  parser.add_argument('--results_dir', default=None,
                      help='where the result file goes (default: '
                      'benchmarks/results)')
  return parser.parse_args(argv)


def build_fn(name):
  def build():
    network_fn = nets_factory.get_network_fn('lenet', 10, is_training=True)
    rng = np.random.RandomState(0)
    images = tf.Variable(rng.rand(BATCH, 28, 28, 1).astype(np.float32),
                         trainable=False)
    labels = tf.constant(rng.randint(0, 10, BATCH))

    def model_fn():
      logits, _ = network_fn(tf.cast(images, precision.compute_dtype(name)))
      tf.losses.sparse_softmax_cross_entropy(labels,
                                             tf.cast(logits, tf.float32))

    model = model_deploy.deploy(
        model_deploy.DeploymentConfig(clone_on_cpu=True), model_fn,
        optimizer=tf.train.AdamOptimizer(0.001), precision=name)
    return model.train_op, None
  return build


def table(timed):
  baseline = timed['float32'].median
  lines = ['| precision | median s/step | examples/sec | vs float32 |',
           '|---|---:|---:|---:|']
  for name in precision.PRECISIONS:
    median = timed[name].median
    lines.append('| %s | %.4f | %.0f | %.2fx |' % (
        name, median, BATCH / median, median / baseline))
  return lines


def main(argv=None):
  args = parse_args(argv)
  timed = {name: step_timing.TimedGraph(build_fn(name))
           for name in precision.PRECISIONS}
  load = step_timing.time_interleaved(list(timed.values()), args.rounds,
                                      args.steps)
  lines = ['## Step time: LeNet, batch %d, one CPU clone, Adam' % BATCH, '',
           '%d rounds x %d steps per precision, interleaved. "vs float32" '
           'is the step time ratio (above 1: slower).' % (
               args.rounds, args.steps), ''] + table(timed) + [
                   '', disturbance_note(load)]
  print('\n'.join(lines))
  path = results.write_result('precision', 'Mixed precision: step time on '
                              'this CPU', lines, argv=argv,
                              directory=args.results_dir)
  print('wrote %s' % path)


if __name__ == '__main__':
  main()
