"""Measures what deploying a model as several CPU clones costs.

Two measurements, both through `deployment.model_deploy.deploy`:

  * Step time. A CIFAR-sized convnet (conv 5x5x64, pool, conv 5x5x64, pool,
    fc 384, fc 192, fc 10, batch norm after every hidden layer) trains on a
    global batch of 128 random images held in a non-trainable variable, so
    there is no input pipeline. With n clones each clone takes its own
    128/n-image slice of that variable: the work per step is the same for
    every n, and what changes is the overhead of running it as n copies. One
    graph and session is built per clone count (and thread setting); after
    a warm-up the configs take turns, a few steps each per round (the first
    config of a round rotates), until each has at least --steps timed
    steps. Interleaving spreads any load from other processes over all
    configs instead of letting it land on one.
  * Build time. Wall and CPU time of `deploy()` alone (graph construction,
    no session) for inception_v3 and resnet_v1_50 from `tf_slim.nets`, 1000
    classes, batch 1 per clone, `is_training=True`, a softmax loss and a
    momentum optimizer, each in a fresh graph. Cells are repeated round by
    round; a cell stops repeating once it has spent --build_budget seconds.

Thread settings: all sessions of one table use the same ConfigProto, by
default intra_op = inter_op = number of cores, TensorFlow's own default. It
is the fair setting for this comparison: one clone runs as fast with it as
with inter_op = 1 (its ops are large enough to keep every core busy through
intra-op threads alone), so the baseline is not handicapped, and n clones
may run their independent ops side by side, as clones on separate GPUs do.
With inter_op = 1 the clones' ops are serialised and each small op must
still be split over all cores, which charges the clone counts for a
session setting rather than for the deployment; `--inter_op 0,1` adds that
table for comparison. Each setting gets its own thread pools
(use_per_session_threads), since otherwise every session would share the
inter-op pool of the first one created.

The tables are printed and written, after the machine they were measured
on, to benchmarks/results/clone_overhead.md (--results_dir to write
elsewhere).

Usage (from the repository root):

  .venv/bin/python benchmarks/clone_overhead.py --inter_op 0,1
  .venv/bin/python benchmarks/clone_overhead.py
  .venv/bin/python benchmarks/clone_overhead.py --steps 30 --skip_build
  .venv/bin/python benchmarks/clone_overhead.py --skip_build --inter_op 0,1
  .venv/bin/python benchmarks/clone_overhead.py --skip_step --build_repeats 1
  .venv/bin/python benchmarks/clone_overhead.py --deployment_root /tmp/patched
"""

import argparse
import collections
import gc
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GLOBAL_BATCH = 128
CIFAR_IMAGE_SIZE = 32
CIFAR_CLASSES = 10
IMAGENET_CLASSES = 1000


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n')[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--steps', type=int, default=30,
                      help='timed steps per clone count, at least')
  parser.add_argument('--warmup_steps', type=int, default=5,
                      help='untimed steps per clone count before timing')
  parser.add_argument('--steps_per_round', type=int, default=3,
                      help='consecutive steps of one config within a round')
  parser.add_argument('--clones', default='1,2,4,8',
                      help='clone counts for the step-time table; must '
                      'divide %d' % GLOBAL_BATCH)
  parser.add_argument('--intra_op', type=int, default=0,
                      help='intra_op_parallelism_threads; 0 = cores')
  parser.add_argument('--inter_op', default='0',
                      help='inter_op_parallelism_threads, 0 = cores; a '
                      'comma-separated list measures each setting, '
                      'interleaved, with a table each')
  parser.add_argument('--build_clones', default='1,4,8',
                      help='clone counts for the build-time table')
  parser.add_argument('--networks', default='inception_v3,resnet_v1_50',
                      help='networks for the build-time table')
  parser.add_argument('--build_repeats', type=int, default=3,
                      help='most repetitions of one build-time cell')
  parser.add_argument('--build_budget', type=float, default=30.0,
                      help='a build-time cell is not repeated once it has '
                      'taken this many seconds in total')
  parser.add_argument('--skip_step', action='store_true',
                      help='do not measure step time')
  parser.add_argument('--skip_build', action='store_true',
                      help='do not measure build time')
  parser.add_argument('--deployment_root', default=REPO_ROOT,
                      help='directory holding the `deployment` package to '
                      'measure, e.g. a patched copy')
  parser.add_argument('--results_dir', default=None,
                      help='folder of the result file clone_overhead.md; '
                      'default: benchmarks/results')
  args = parser.parse_args(argv)
  args.clones = [int(n) for n in args.clones.split(',')]
  args.build_clones = [int(n) for n in args.build_clones.split(',')]
  args.networks = args.networks.split(',')
  for n in args.clones:
    if n < 1 or GLOBAL_BATCH % n:
      parser.error('--clones: %d does not divide the global batch of %d'
                   % (n, GLOBAL_BATCH))
  cores = len(os.sched_getaffinity(0))
  args.intra_op = args.intra_op or cores
  args.inter_op = [int(n) or cores for n in args.inter_op.split(',')]
  return args


if __name__ == '__main__':
  # Before the imports below: --deployment_root decides which `deployment`
  # package they load.
  sys.path.insert(0, parse_args().deployment_root)

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np
from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
from tf_slim.nets import inception
from tf_slim.nets import resnet_v1
# pylint: enable=g-import-not-at-top,wrong-import-position


def cifar_convnet(images, num_classes=CIFAR_CLASSES, is_training=True,
                  scope='CifarConvNet'):
  """Two conv and three fully connected layers, batch norm in the hidden ones.

  Returns:
    (logits, end_points) like the tf_slim nets.
  """
  with tf.variable_scope(scope, 'CifarConvNet', [images]):
    with slim.arg_scope([slim.batch_norm], is_training=is_training):
      net = slim.conv2d(images, 64, [5, 5], scope='conv1')
      net = slim.max_pool2d(net, [3, 3], 2, padding='SAME', scope='pool1')
      net = slim.conv2d(net, 64, [5, 5], scope='conv2')
      net = slim.max_pool2d(net, [3, 3], 2, padding='SAME', scope='pool2')
      net = slim.flatten(net, scope='flatten')
      net = slim.fully_connected(net, 384, scope='fc3')
      net = slim.fully_connected(net, 192, scope='fc4')
      logits = slim.fully_connected(net, num_classes, activation_fn=None,
                                    normalizer_fn=None, scope='logits')
  return logits, {'logits': logits}


cifar_convnet.default_image_size = CIFAR_IMAGE_SIZE


def cifar_convnet_arg_scope(weight_decay=0.004):
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      activation_fn=tf.nn.relu,
                      normalizer_fn=slim.batch_norm,
                      weights_regularizer=slim.l2_regularizer(weight_decay)):
    with slim.arg_scope([slim.batch_norm], decay=0.997, epsilon=1e-5,
                        scale=True) as scope:
      return scope


# name: (network function, arg scope function, image size, classes).
NETWORKS = {
    'cifar_convnet': (cifar_convnet, cifar_convnet_arg_scope,
                      cifar_convnet.default_image_size, CIFAR_CLASSES),
    'inception_v3': (inception.inception_v3, inception.inception_v3_arg_scope,
                     inception.inception_v3.default_image_size,
                     IMAGENET_CLASSES),
    'resnet_v1_50': (resnet_v1.resnet_v1_50, resnet_v1.resnet_arg_scope,
                     resnet_v1.resnet_v1.default_image_size,
                     IMAGENET_CLASSES),
}


# Graph construction is single-threaded Python: when other processes compete
# for the cores its wall seconds grow with their load, its CPU seconds only
# with their share of the caches, so CPU seconds are the steadier figure.
BuildTime = collections.namedtuple('BuildTime', ['wall', 'cpu'])


def build_training_graph(network_name, num_clones, global_batch):
  """Deploys `network_name` over CPU clones in the default graph.

  The global batch lives in non-trainable variables on the inputs device;
  the k-th call of model_fn (that is, clone k) reads rows
  [k * global_batch / num_clones, (k + 1) * global_batch / num_clones).

  Returns:
    (deployed model, BuildTime of the `model_deploy.deploy` call).
  """
  network_fn, arg_scope_fn, size, num_classes = NETWORKS[network_name]
  per_clone_batch = global_batch // num_clones
  assert per_clone_batch * num_clones == global_batch, (
      global_batch, num_clones)
  config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                         clone_on_cpu=True)
  with tf.device(config.inputs_device()):
    images = tf.get_variable(
        'global_batch/images', [global_batch, size, size, 3],
        initializer=tf.random_uniform_initializer(-1.0, 1.0), trainable=False)
    labels = tf.get_variable(
        'global_batch/labels', [global_batch], dtype=tf.int32,
        initializer=tf.random_uniform_initializer(0, num_classes,
                                                  dtype=tf.int32),
        trainable=False)
  clones_built = []

  def model_fn():
    start = len(clones_built) * per_clone_batch
    clones_built.append(start)
    with slim.arg_scope(arg_scope_fn()):
      logits, _ = network_fn(images[start:start + per_clone_batch],
                             num_classes=num_classes, is_training=True)
    if logits.shape.ndims == 4:  # resnet_v1 does not squeeze its logits.
      logits = tf.squeeze(logits, [1, 2])
    tf.losses.sparse_softmax_cross_entropy(
        labels[start:start + per_clone_batch], logits)

  optimizer = tf.train.MomentumOptimizer(learning_rate=0.001, momentum=0.9)
  start_wall, start_cpu = time.perf_counter(), time.process_time()
  model = model_deploy.deploy(config, model_fn, optimizer=optimizer)
  build_time = BuildTime(time.perf_counter() - start_wall,
                         time.process_time() - start_cpu)
  assert len(clones_built) == num_clones
  return model, build_time


class StepConfig:
  """One clone count's graph and session, ready to run training steps."""

  def __init__(self, num_clones, intra_op, inter_op):
    self.num_clones = num_clones
    self.inter_op = inter_op
    self.graph = tf.Graph()
    with self.graph.as_default():
      tf.set_random_seed(0)
      model, _ = build_training_graph('cifar_convnet', num_clones,
                                      GLOBAL_BATCH)
      self.train_op = model.train_op
      self.num_ops = len(self.graph.get_operations())
      init = tf.group(tf.global_variables_initializer(),
                      tf.local_variables_initializer())
    self.graph.finalize()
    session_config = tf.ConfigProto(intra_op_parallelism_threads=intra_op,
                                    inter_op_parallelism_threads=inter_op,
                                    use_per_session_threads=True)
    self.session = tf.Session(graph=self.graph, config=session_config)
    self.session.run(init)
    self.step_seconds = []
    self.last_loss = None

  def step(self):
    start = time.perf_counter()
    self.last_loss = self.session.run(self.train_op)
    return time.perf_counter() - start


def measure_step_times(args):
  """Returns the StepConfigs, their step_seconds filled, by inter_op then n."""
  configs = [StepConfig(n, args.intra_op, inter_op)
             for inter_op in args.inter_op for n in args.clones]
  for config in configs:
    for _ in range(args.warmup_steps):
      config.step()
  round_index = 0
  while min(len(c.step_seconds) for c in configs) < args.steps:
    first = round_index % len(configs)
    for config in configs[first:] + configs[:first]:
      for _ in range(args.steps_per_round):
        config.step_seconds.append(config.step())
    round_index += 1
  for config in configs:
    if not np.isfinite(config.last_loss):
      print('warning: %d clones (inter_op=%d) ended with loss %r' % (
          config.num_clones, config.inter_op, config.last_loss))
    config.session.close()
  return configs


def measure_build_times(args):
  """Returns {(network, clones): [BuildTime, ...]} in the order measured."""
  cells = [(net, n) for net in args.networks for n in args.build_clones]
  times = {cell: [] for cell in cells}

  def wants_more(cell):
    done = times[cell]
    return (len(done) < args.build_repeats
            and sum(t.wall for t in done) < args.build_budget)

  while any(wants_more(cell) for cell in cells):
    for cell in cells:
      if not wants_more(cell):
        continue
      gc.collect()  # Do not bill this build for freeing the previous graph.
      with tf.Graph().as_default():
        _, build_time = build_training_graph(cell[0], cell[1], cell[1])
      times[cell].append(build_time)
      print('  built %s x %d clones in %.2f s (%.2f s CPU)' % (
          cell[0], cell[1], build_time.wall, build_time.cpu), flush=True)
  return times


def settings(args):
  """What the result depends on beyond results.machine_context()."""
  return [
      '- deployment package: %s' % os.path.dirname(model_deploy.__file__),
      '- session threads: intra_op=%d, inter_op=%s (one table per inter_op '
      'setting)' % (args.intra_op, ' and '.join(map(str, args.inter_op))),
  ]


def step_table(configs):
  """Rows for configs of one thread setting; ratios are to the first one."""
  baseline = statistics.median(configs[0].step_seconds)
  lines = ['| clones | per-clone batch | graph ops | median s/step | '
           'p25-p75 s/step | ratio to %d clone%s |' % (
               configs[0].num_clones,
               '' if configs[0].num_clones == 1 else 's'),
           '|---:|---:|---:|---:|---:|---:|']
  for config in configs:
    times = sorted(config.step_seconds)
    median = statistics.median(times)
    p25, _, p75 = statistics.quantiles(times, n=4)
    lines.append('| %d | %d | %d | %.4f | %.4f-%.4f | %.3f |' % (
        config.num_clones, GLOBAL_BATCH // config.num_clones, config.num_ops,
        median, p25, p75, median / baseline))
  return lines


def build_table(times):
  lines = ['| network | clones | build seconds (median) | build CPU seconds '
           '(median) | repetitions |',
           '|---|---:|---:|---:|---:|']
  for (network, num_clones), cell_times in times.items():
    lines.append('| %s | %d | %.2f | %.2f | %d |' % (
        network, num_clones, statistics.median(t.wall for t in cell_times),
        statistics.median(t.cpu for t in cell_times), len(cell_times)))
  return lines


def main(argv=None):
  """Measures, prints the tables and writes the result file; returns its
  path."""
  args = parse_args(argv)
  # The tf-slim layers warn about their own deprecated internals on every
  # call.
  tf.logging.set_verbosity(tf.logging.ERROR)
  warnings.filterwarnings('ignore', category=UserWarning)
  output = ['## Settings', ''] + settings(args)
  if not args.skip_step:
    print('Timing steps for %s clones...' % args.clones, flush=True)
    with OtherLoad() as load:
      configs = measure_step_times(args)
    for inter_op in args.inter_op:
      output += ['', '## Step time: CIFAR convnet, global batch %d, CPU '
                 'clones, intra_op=%d, inter_op=%d' % (
                     GLOBAL_BATCH, args.intra_op, inter_op), '']
      output += step_table([c for c in configs if c.inter_op == inter_op])
    output += ['', disturbance_note(load)]
  if not args.skip_build:
    print('Timing deploy() builds...', flush=True)
    with OtherLoad() as load:
      times = measure_build_times(args)
    output += ['', '## deploy() build time, batch 1 per clone', '']
    output += build_table(times) + ['', disturbance_note(load)]
  print('\n' + '\n'.join(output))
  path = results.write_result(
      'clone_overhead', 'Clone overhead', output,
      argv=argv,
      directory=args.results_dir)
  print('written to %s' % path)
  return path


if __name__ == '__main__':
  main()
