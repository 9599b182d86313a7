"""What the CPU clones' MatMul gradient (deployment/matmul_gradient.py)
saves: the product alone, and LeNet's training step.

Two tables, each variant measured in turn for --rounds rounds (the first
of a round rotates), medians:

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
import os
import statistics
import sys
import tempfile
import time

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
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
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


def product_runs(batch, session_config):
  """{variant: (its session, a function running the product once)} for
  `batch` rows."""
  runs = {}
  rng = np.random.default_rng(0)
  for variant in VARIANTS:
    graph = tf.Graph()
    with graph.as_default():
      # Variables, which grappler cannot fold away as it would constants.
      x = tf.Variable(rng.standard_normal((batch, FC3_SHAPE[1]), np.float32))
      w = tf.Variable(rng.standard_normal(FC3_SHAPE, np.float32))
      if variant == VARIANTS[0]:
        product = tf.matmul(x, w, transpose_b=True)
      else:
        product = matmul_gradient.times_transposed(x, w)
      # A sum, so that the run does not copy the product out.
      total = tf.reduce_sum(product)
      session = tf.Session(graph=graph, config=session_config)
      session.run(tf.global_variables_initializer())
    runs[variant] = (session, lambda s=session, t=total: s.run(t))
  return runs


def step_runs(batch, dataset_dir, train_dir):
  """{variant: (its session, a function running one training step)} of
  LeNet, `batch`."""
  runs = {}
  for variant in VARIANTS:
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % dataset_dir, '--model_name=lenet',
           '--clone_on_cpu', '--batch_size=%d' % batch, '--optimizer=sgd',
           '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
           '--num_readers=1', '--num_preprocessing_threads=1',
           '--train_dir=%s' % os.path.join(train_dir, str(len(runs)))])
    config = run_config.from_flags(FLAGS)
    graph = tf.Graph()
    with graph.as_default():
      if variant == VARIANTS[0]:
        with matmul_gradient.default_gradient():
          training_graph = train_image_classifier.build_training_graph(config)
      else:
        training_graph = train_image_classifier.build_training_graph(config)
      session = tf.Session()
      session.run([tf.global_variables_initializer(),
                   tf.local_variables_initializer()])
    runs[variant] = (
        session, lambda s=session, op=training_graph.train_op: s.run(op))
  return runs


def timed(run, steps):
  start = time.perf_counter()
  for _ in range(steps):
    run()
  return (time.perf_counter() - start) / steps


def measure(args, sessions_and_runs):
  """{variant: [seconds per run, one per round]}, variants interleaved;
  closes the sessions afterwards."""
  runs = {variant: run for variant, (_, run) in sessions_and_runs.items()}
  try:
    return _measure(args, runs)
  finally:
    for session, _ in sessions_and_runs.values():
      session.close()


def _measure(args, runs):
  for run in runs.values():
    timed(run, args.warmup)
  seconds = {variant: [] for variant in runs}
  for round_index in range(args.rounds):
    first = round_index % len(runs)
    order = list(runs)[first:] + list(runs)[:first]
    for variant in order:
      seconds[variant].append(timed(runs[variant], args.steps))
  return seconds


def table(measured):
  """Markdown rows: per batch, both variants' medians and their ratio."""
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
  session_config = tf.ConfigProto(intra_op_parallelism_threads=1)
  products, steps = {}, {}
  with OtherLoad() as load, \
      cluster_runs.digits_dataset(args.dataset_dir) as dataset_dir, \
      tempfile.TemporaryDirectory() as train_dir:
    for batch in args.batches:
      products[batch] = measure(args, product_runs(batch, session_config))
      steps[batch] = measure(args, step_runs(batch, dataset_dir, train_dir))
      print('batch %d: step %.1f / %.1f ms' % (
          batch, *(statistics.median(steps[batch][v]) * 1e3
                   for v in VARIANTS)), flush=True)
  lines = (
      ['## The product x @ transpose(w), w of %d x %d' % FC3_SHAPE, ''] +
      table(products) +
      ['', '## A LeNet training step (session.run of the train op)', ''] +
      table(steps) + [
          '',
          'Median over %d round(s) of %d runs each after %d untimed; ratio: '
          "TensorFlow's time over the clones'; per round: TensorFlow's / "
          "the clones'. One process, intra-op "
          'threads %s, inter-op threads %s.' % (
              args.rounds, args.steps, args.warmup,
              os.environ['TF_NUM_INTRAOP_THREADS'],
              os.environ['TF_NUM_INTEROP_THREADS']),
          '', '## Load', '', disturbance_note(load)])
  return results.publish(NAME, TITLE, lines, argv=argv,
                         directory=args.results_dir)


if __name__ == '__main__':
  main()
