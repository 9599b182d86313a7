"""What the CPU clones' gradients (deployment/cpu_gradients.py) save: the
MatMul product alone, and LeNet's training step in each precision.

Two tables, every variant timed in --rounds interleaved rounds
(step_timing.time_interleaved), medians:

  product   x @ transpose(w) for x of [batch, 1024] and w of [3136, 1024]
            (the input's gradient in LeNet's fc3) as TensorFlow's gradient
            computes it, one MatMul with transpose_b, and as the clones'
            gradient does, transpose(w @ transpose(x)).
  step      session.run of the training op of train_image_classifier.py's
            graph (LeNet on digits, one CPU clone, SGD) in each of
            --precisions, built with TensorFlow's gradients
            (cpu_gradients.default_gradient) and with the clones' ones:
            in float32 only the MatMul gradient differs, in the 16-bit
            precisions the convolutions' too.

One process, TF_NUM_INTRAOP_THREADS=1 and TF_NUM_INTEROP_THREADS=2 unless
set, as the cluster benchmarks' tasks. Writes
benchmarks/results/cpu_gradients.md (--results_dir to write elsewhere).

  .venv/bin/python benchmarks/cpu_gradients.py
  .venv/bin/python benchmarks/cpu_gradients.py --batches 4 --rounds 1 \
      --precisions mixed_bfloat16
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
from deployment import cpu_gradients
from deployment import precision
from other_load import disturbance_note  # next to this script
import results  # next to this script
import step_timing  # next to this script
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import run_config
from training.flags import FLAGS
# pylint: enable=g-import-not-at-top,wrong-import-position

NAME = 'cpu_gradients'
TITLE = "The CPU clones' gradients against TensorFlow's"
FC3_SHAPE = (3136, 1024)  # LeNet's fc3 weights
VARIANTS = ("TensorFlow's gradient", "the clones' gradient")


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--batches', default='4,32',
                      help='comma-separated batch sizes')
  parser.add_argument('--precisions',
                      default='float32,mixed_float16,mixed_bfloat16',
                      help='comma-separated --precision values of the '
                      'training steps')
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
  args.precisions = args.precisions.split(',')
  unknown = sorted(set(args.precisions) - set(precision.PRECISIONS))
  if unknown:
    parser.error('--precisions: %s not one of %s' % (
        ', '.join(unknown), ', '.join(precision.PRECISIONS)))
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
      product = cpu_gradients.times_transposed(x, w)
    # A sum, so that the run does not copy the product out.
    return (tf.reduce_sum(product),
            tf.ConfigProto(intra_op_parallelism_threads=1))
  return build


def step_graph(batch, variant, dataset_dir, train_dir,
               precision_name='float32'):
  """A build_fn for step_timing.TimedGraph: the train op of LeNet, `batch`,
  in `precision_name`, with `variant`'s gradients."""
  def build():
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--precision=%s' % precision_name,
           '--dataset_dir=%s' % dataset_dir, '--model_name=lenet',
           '--clone_on_cpu', '--batch_size=%d' % batch, '--optimizer=sgd',
           '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
           '--num_readers=1', '--num_preprocessing_threads=1',
           '--train_dir=%s' % train_dir])
    config = run_config.from_flags(FLAGS)
    with (cpu_gradients.default_gradient() if variant == VARIANTS[0]
          else contextlib.nullcontext()):
      return train_image_classifier.build_training_graph(config).train_op, None
  return build


def round_means(graph, steps):
  """Seconds per run of a TimedGraph, one mean per round of `steps`."""
  seconds = graph.step_seconds
  return [statistics.mean(seconds[i:i + steps])
          for i in range(0, len(seconds), steps)]


def table(measured, first_column='batch'):
  """Markdown rows: per row, both variants' medians and their ratio.

  `measured`: {row: {variant: [seconds per run, one per round]}}; a row is
  a batch, or a tuple of the first columns' values.
  """
  columns = first_column.split(', ')
  lines = ['| %s | %s ms | %s ms | ratio | ms per round |' % (
      ' | '.join(columns), *VARIANTS),
           '|%s---:|---:|---:|---|' % ('---|' * len(columns))]
  for row, seconds in measured.items():
    medians = [statistics.median(seconds[v]) for v in VARIANTS]
    lines.append('| %s | %.2f | %.2f | %.2fx | %s |' % (
        ' | '.join(str(v) for v in (row if isinstance(row, tuple) else
                                    (row,))),
        medians[0] * 1e3, medians[1] * 1e3, medians[0] / medians[1],
        '; '.join('%.1f / %.1f' % (a * 1e3, b * 1e3)
                  for a, b in zip(*(seconds[v] for v in VARIANTS)))))
  return lines


def main(argv=None):
  args = parse_args(argv)
  products = [('product', None, batch) for batch in args.batches]
  steps = [('step', name, batch) for name in args.precisions
           for batch in args.batches]
  with cluster_runs.digits_dataset(args.dataset_dir) as dataset_dir, \
      tempfile.TemporaryDirectory() as train_dir:
    timed = {
        (kind, name, batch, variant): step_timing.TimedGraph(
            product_graph(batch, variant) if kind == 'product' else
            step_graph(batch, variant, dataset_dir, os.path.join(
                train_dir, '%s_%d_%d' % (name, batch,
                                         VARIANTS.index(variant))), name),
            warmup_steps=args.warmup)
        for kind, name, batch in products + steps for variant in VARIANTS}
    load = step_timing.time_interleaved(list(timed.values()), args.rounds,
                                        args.steps)

  def measured(rows, key):
    return {key(kind, name, batch): {
        variant: round_means(timed[(kind, name, batch, variant)], args.steps)
        for variant in VARIANTS} for kind, name, batch in rows}

  lines = (
      ['## The product x @ transpose(w), w of %d x %d' % FC3_SHAPE, ''] +
      table(measured(products, lambda kind, name, batch: batch)) +
      ['', '## A LeNet training step (session.run of the train op)', ''] +
      table(measured(steps, lambda kind, name, batch: (name, batch)),
            'precision, batch') + [
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
