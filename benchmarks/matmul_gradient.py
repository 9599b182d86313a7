"""What the CPU clones' MatMul gradient (deployment/matmul_gradient.py)
saves: the product alone, and LeNet's training step.

Two tables, every variant timed in --rounds interleaved rounds
(step_timing.time_interleaved), medians:

  product   x @ transpose(w) for x of [batch, 1024] and w of [3136, 1024]
            (the input's gradient in LeNet's fc3) as TensorFlow's gradient
            computes it, one MatMul with transpose_b, and as the clones'
            gradient does, transpose(w @ transpose(x)).
  step      session.run of the training op of train_image_classifier.py's
            graph (LeNet on digits, one CPU clone, SGD), built with
            TensorFlow's MatMul gradient (matmul_gradient.default_gradient)
            and with the clones' one.

One process, TF_NUM_INTRAOP_THREADS=1 and TF_NUM_INTEROP_THREADS=2 unless
set, as the cluster benchmarks' tasks. Writes
benchmarks/results/matmul_gradient.md (--results_dir to write elsewhere).

  .venv/bin/python benchmarks/matmul_gradient.py
  .venv/bin/python benchmarks/matmul_gradient.py --batches 4 --rounds 1
"""

import argparse
import contextlib
import os
import statistics
import sys
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '1')
os.environ.setdefault('TF_NUM_INTEROP_THREADS', '2')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
  sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

import cluster_runs  # next to this script
from deployment import matmul_gradient
from other_load import disturbance_note  # next to this script
import results  # next to this script
import step_timing  # next to this script
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import run_config
from training.flags import FLAGS
# pylint: enable=g-import-not-at-top,wrong-import-position

NAME = 'matmul_gradient'
TITLE = "The CPU clones' MatMul gradient against TensorFlow's"
FC3_SHAPE = (3136, 1024)  # LeNet's fc3 weights
VARIANTS = ("TensorFlow's gradient", "the clones' gradient")


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--batches', default='4,32',
                      help='comma-separated batch sizes')
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps', type=int, default=20,
                      help='timed runs of each variant per round')
  parser.add_argument('--warmup', type=int, default=5,
                      help='untimed runs of each variant first')
  parser.add_argument('--dataset_dir', default=None,
                      help='digits TFRecords; default: converted into a '
                      'temporary folder')
  parser.add_argument('--results_dir', default=None,
                      help='folder of the result file; default: '
                      'benchmarks/results')
  args = parser.parse_args(argv)
  args.batches = [int(b) for b in args.batches.split(',')]
  if min(args.batches + [args.rounds, args.steps]) < 1:
    parser.error('--batches, --rounds and --steps must be >= 1')
  return args


def product_graph(batch, variant):
  """A build_fn for step_timing.TimedGraph: the product for `batch` rows,
  as `variant` computes it."""
  def build():
    rng = np.random.default_rng(0)
    # Variables, which grappler cannot fold away as it would constants.
    x = tf.Variable(rng.standard_normal((batch, FC3_SHAPE[1]), np.float32))
    w = tf.Variable(rng.standard_normal(FC3_SHAPE, np.float32))
    if variant == VARIANTS[0]:
      product = tf.matmul(x, w, transpose_b=True)
    else:
      product = matmul_gradient.times_transposed(x, w)
    # A sum, so that the run does not copy the product out.
    return (tf.reduce_sum(product),
            tf.ConfigProto(intra_op_parallelism_threads=1))
  return build


def step_graph(batch, variant, dataset_dir, train_dir):
  """A build_fn for step_timing.TimedGraph: the train op of LeNet, `batch`,
  with `variant`'s MatMul gradient."""
  def build():
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % dataset_dir, '--model_name=lenet',
           '--clone_on_cpu', '--batch_size=%d' % batch, '--optimizer=sgd',
           '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
           '--num_readers=1', '--num_preprocessing_threads=1',
           '--train_dir=%s' % train_dir])
    config = run_config.from_flags(FLAGS)
    with (matmul_gradient.default_gradient() if variant == VARIANTS[0]
          else contextlib.nullcontext()):
      return train_image_classifier.build_training_graph(config).train_op, None
  return build


def round_means(graph, steps):
  """Seconds per run of a TimedGraph, one mean per round of `steps`."""
  seconds = graph.step_seconds
  return [statistics.mean(seconds[i:i + steps])
          for i in range(0, len(seconds), steps)]


def table(measured):
  """Markdown rows: per batch, both variants' medians and their ratio.

  `measured`: {batch: {variant: [seconds per run, one per round]}}.
  """
  lines = ['| batch | %s ms | %s ms | ratio | ms per round |' % VARIANTS,
           '|---:|---:|---:|---:|---|']
  for batch, seconds in measured.items():
    medians = [statistics.median(seconds[v]) for v in VARIANTS]
    lines.append('| %d | %.2f | %.2f | %.2fx | %s |' % (
        batch, medians[0] * 1e3, medians[1] * 1e3, medians[0] / medians[1],
        '; '.join('%.1f / %.1f' % (a * 1e3, b * 1e3)
                  for a, b in zip(*(seconds[v] for v in VARIANTS)))))
  return lines


def main(argv=None):
  args = parse_args(argv)
  with cluster_runs.digits_dataset(args.dataset_dir) as dataset_dir, \
      tempfile.TemporaryDirectory() as train_dir:
    timed = {
        (kind, batch, variant): step_timing.TimedGraph(
            product_graph(batch, variant) if kind == 'product' else
            step_graph(batch, variant, dataset_dir, os.path.join(
                train_dir, '%d_%d' % (batch, VARIANTS.index(variant)))),
            warmup_steps=args.warmup)
        for kind in ('product', 'step') for batch in args.batches
        for variant in VARIANTS}
    load = step_timing.time_interleaved(list(timed.values()), args.rounds,
                                        args.steps)
  products, steps = (
      {batch: {variant: round_means(timed[(kind, batch, variant)],
                                    args.steps) for variant in VARIANTS}
       for batch in args.batches} for kind in ('product', 'step'))
  lines = (
      ['## The product x @ transpose(w), w of %d x %d' % FC3_SHAPE, ''] +
      table(products) +
      ['', '## A LeNet training step (session.run of the train op)', ''] +
      table(steps) + [
          '',
          'Median over %d round(s) of %d runs each after %d untimed, the '
          'variants interleaved (benchmarks/step_timing.py); ratio: '
          "TensorFlow's time over the clones'; per round: TensorFlow's / the "
          "clones'. One process, intra-op threads %s, inter-op threads %s." % (
              args.rounds, args.steps, args.warmup,
              os.environ['TF_NUM_INTRAOP_THREADS'],
              os.environ['TF_NUM_INTEROP_THREADS']),
          '', '## Load', '', disturbance_note(load)])
  return results.publish(NAME, TITLE, lines, argv=argv,
                         directory=args.results_dir)


if __name__ == '__main__':
  main()
