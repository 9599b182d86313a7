"""What sync batch norm costs: step time with and without it, per clone count.

A small batch-norm convnet (3 conv layers, each with slim.batch_norm, and
a logits layer; CIFAR-sized inputs held in a variable, global batch 64
split over the clones) trains on 1, 2 and 4 CPU clones, each clone on its
own logical CPU device, with plain and with sync batch norm. All
configurations are timed in interleaved rounds in one process, so a
disturbance hits them alike; the table gives the median seconds per step
and the ratio sync / plain at each clone count.

  .venv/bin/python benchmarks/sync_batch_norm.py             # full run
  .venv/bin/python benchmarks/sync_batch_norm.py --rounds 2 --steps 3

It writes benchmarks/results/sync_batch_norm.md (see results.py).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from deployment import model_deploy  # pylint: disable=g-import-not-at-top,wrong-import-position
from tf2_compat.slim_compat import slim, tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from other_load import disturbance_note  # pylint: disable=g-import-not-at-top,wrong-import-position
import results  # pylint: disable=g-import-not-at-top,wrong-import-position
import step_timing  # pylint: disable=g-import-not-at-top,wrong-import-position

GLOBAL_BATCH = 64
IMAGE_SIZE = 32


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--clones', default='1,2,4',
                      help='comma-separated clone counts')
  parser.add_argument('--rounds', type=int, default=5,
                      help='interleaved rounds over all configurations')
  parser.add_argument('--steps', type=int, default=10,
                      help='timed steps per configuration per round')
  parser.add_argument('--results_dir', default=None,
                      help='where the result file goes (default: '
                      'benchmarks/results)')
  return parser.parse_args(argv)


def batch_norm_convnet(images):
  with slim.arg_scope([slim.conv2d], normalizer_fn=slim.batch_norm,
                      normalizer_params={'is_training': True,
                                         'scale': True}):
    net = slim.conv2d(images, 32, [3, 3], scope='conv1')
    net = slim.max_pool2d(net, [2, 2], scope='pool1')
    net = slim.conv2d(net, 64, [3, 3], scope='conv2')
    net = slim.max_pool2d(net, [2, 2], scope='pool2')
    net = slim.conv2d(net, 64, [3, 3], scope='conv3')
  net = tf.reduce_mean(net, [1, 2])
  return slim.fully_connected(net, 10, activation_fn=None, scope='logits')


def build_fn(num_clones, sync):
  """The TimedGraph builder of one configuration."""

  def build():
    config = model_deploy.DeploymentConfig(
        num_clones=num_clones, clone_on_cpu=True, separate_cpu_devices=True)
    rng = np.random.RandomState(0)
    per_clone = GLOBAL_BATCH // num_clones
    images = tf.Variable(rng.rand(GLOBAL_BATCH, IMAGE_SIZE, IMAGE_SIZE,
                                  3).astype(np.float32), trainable=False)
    labels = tf.constant(rng.randint(0, 10, GLOBAL_BATCH))
    calls = []

    def model_fn():
      i = len(calls)
      calls.append(i)
      logits = batch_norm_convnet(images[i * per_clone:(i + 1) * per_clone])
      tf.losses.sparse_softmax_cross_entropy(
          labels[i * per_clone:(i + 1) * per_clone], logits)

    model = model_deploy.deploy(
        config, model_fn, optimizer=tf.train.MomentumOptimizer(0.01, 0.9),
        sync_batch_norm=sync)
    return model.train_op, model_deploy.session_config(config)

  return build


def table(timed):
  """Rows per clone count; `timed` maps (num_clones, sync) to TimedGraph."""
  lines = ['| clones | per-clone batch | plain s/step (median) | sync s/step '
           '(median) | sync / plain |', '|---:|---:|---:|---:|---:|']
  for num_clones in sorted({n for n, _ in timed}):
    plain, synced = timed[num_clones, False].median, timed[num_clones,
                                                           True].median
    lines.append('| %d | %d | %.4f | %.4f | %.3f |' % (
        num_clones, GLOBAL_BATCH // num_clones, plain, synced,
        synced / plain))
  return lines


def main(argv=None):
  args = parse_args(argv)
  counts = [int(c) for c in args.clones.split(',')]
  timed = {(n, sync): step_timing.TimedGraph(build_fn(n, sync))
           for n in counts for sync in (False, True)}
  load = step_timing.time_interleaved(list(timed.values()), args.rounds,
                                      args.steps)
  lines = ['## Step time: 3-conv batch-norm convnet, global batch %d, %dx%d '
           'images, CPU clones on separate logical devices' % (
               GLOBAL_BATCH, IMAGE_SIZE, IMAGE_SIZE), '',
           '%d rounds x %d steps per configuration, interleaved.' % (
               args.rounds, args.steps), ''] + table(timed) + [
                   '', disturbance_note(load)]
  print('\n'.join(lines))
  path = results.write_result(
      'sync_batch_norm', 'Sync batch norm: step time against plain batch '
      'norm', lines, argv=argv, directory=args.results_dir)
  print('wrote %s' % path)


if __name__ == '__main__':
  main()
