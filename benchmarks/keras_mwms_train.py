"""Trains LeNet on digits with tf-keras's MultiWorkerMirroredStrategy: the
peer the cluster benchmarks measure beside the project's all-reduce.

Each worker of a cluster runs this program with the cluster in TF_CONFIG
(as clusters.launch.LocalCluster and netns_task.py give it); the strategy
reads it, and all-reduces the gradients with its collective ops under its
default communication options (nothing here tunes them). What it trains is
what cluster_runs.train_args makes train_image_classifier.py train:

  * the network of nets/lenet.py in Keras layers (same shapes, 3,274,634
    parameters, truncated-normal weights of stddev 0.1, ReLU, dropout 0.5
    in training), and its L2 weight decay (slim's scale x sum(w^2) / 2 is
    Keras's L2(scale / 2));
  * the digits TFRecords read by the project's own tf.data pipeline
    (datasets/input_pipeline.py, lenet's preprocessing): shuffled, each
    worker its shard of the records, --batch_size per worker, so a global
    step takes --batch_size x workers examples;
  * plain SGD at a fixed --learning_rate on the mean cross-entropy of the
    global batch plus the decay.

Every --log_every_n_steps global steps each worker prints the progress line
the launcher and the benchmarks read (clusters/script_contract.py), as
train_image_classifier.py does; its loss is the mean loss of the global
batches since the previous line (Keras reports a running mean per epoch,
which the strategy sums over the workers, so every worker prints the
same).
With --train_dir, each worker writes weights_<job><index>.json there at the
end: the parameter count and a SHA-256 of its weights, which are the same
on every worker when the all-reduce kept them in step.

Usage (one worker; TF_CONFIG names the cluster and this task):

  TF_CONFIG='{"cluster": {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]},
              "task": {"type": "worker", "index": 0}}' \\
  .venv/bin/python benchmarks/keras_mwms_train.py --dataset_dir=/tmp/digits
"""

import argparse
import hashlib
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
from tf2_compat import quiet
quiet.import_tensorflow()
import tensorflow as tf
import tf_keras

from clusters import script_contract
from datasets import dataset_factory
from datasets import input_pipeline
from preprocessing import preprocessing_factory
# pylint: enable=g-import-not-at-top,wrong-import-position

IMAGE_SIZE = 28  # nets/lenet.py's default_image_size.
NUM_CLASSES = 10


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--dataset_dir', required=True,
                      help='the digits TFRecords (datasets/convert_digits.py)')
  parser.add_argument('--batch_size', type=int, default=32,
                      help='examples per worker step')
  parser.add_argument('--learning_rate', type=float, default=0.01)
  parser.add_argument('--weight_decay', type=float, default=0.00004,
                      help='slim\'s scale of the L2 decay of the weights, as '
                      'train_image_classifier.py\'s --weight_decay')
  parser.add_argument('--max_number_of_steps', type=int, default=200,
                      help='global steps')
  parser.add_argument('--log_every_n_steps', type=int, default=10)
  parser.add_argument('--num_readers', type=int, default=1)
  parser.add_argument('--num_preprocessing_threads', type=int, default=1)
  parser.add_argument('--train_dir', default=None,
                      help='where each worker writes the checksum of its '
                      'weights at the end; none written without it')
  args = parser.parse_args(argv)
  for name in ('batch_size', 'max_number_of_steps', 'log_every_n_steps',
               'num_readers', 'num_preprocessing_threads'):
    if getattr(args, name) < 1:
      parser.error('--%s must be >= 1, got %d' % (name, getattr(args, name)))
  return args


def workers_only(tf_config):
  """TF_CONFIG without jobs that have no task.

  The launcher names an empty ps job in an all-reduce cluster's TF_CONFIG;
  the strategy would count it as a job to connect to.
  """
  config = json.loads(tf_config)
  config['cluster'] = {job: tasks for job, tasks in config['cluster'].items()
                       if tasks}
  return json.dumps(config)


def lenet(weight_decay):
  """nets/lenet.py's LeNet in tf-keras layers, named after its scopes.

  Same shapes as slim's: 5x5 convolutions padded SAME, 2x2 max pooling
  VALID, so 28x28 -> 14x14 -> 7x7x64 = 3136 features into fc3.
  """
  layers = tf_keras.layers

  def weighted(layer, *args, **kwargs):
    return layer(
        *args,
        kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.1),
        kernel_regularizer=tf_keras.regularizers.L2(weight_decay / 2),
        **kwargs)

  return tf_keras.Sequential([
      tf_keras.Input((IMAGE_SIZE, IMAGE_SIZE, 1)),
      weighted(layers.Conv2D, 32, 5, padding='same', activation='relu',
               name='conv1'),
      layers.MaxPool2D(2, 2, name='pool1'),
      weighted(layers.Conv2D, 64, 5, padding='same', activation='relu',
               name='conv2'),
      layers.MaxPool2D(2, 2, name='pool2'),
      layers.Flatten(name='Flatten'),
      weighted(layers.Dense, 1024, activation='relu', name='fc3'),
      layers.Dropout(0.5, name='dropout3'),
      weighted(layers.Dense, NUM_CLASSES, name='fc4'),
  ], name='LeNet')


def worker_batches(args):
  """fn(tf.distribute.InputContext) -> this worker's batches: the project's
  pipeline, sharded over the workers as train_image_classifier.py shards
  it. Each worker is one replica (its CPU), so its batch is --batch_size."""

  def batches(context):
    dataset = dataset_factory.get_dataset('digits', 'train', args.dataset_dir)
    return input_pipeline.make_dataset(
        dataset, preprocessing_factory.get_preprocessing('lenet',
                                                         is_training=True),
        args.batch_size, IMAGE_SIZE, is_training=True,
        num_readers=args.num_readers,
        num_preprocessing_threads=args.num_preprocessing_threads,
        num_shards=context.num_input_pipelines,
        shard_index=context.input_pipeline_id, check_labels=True)

  return batches


class ProgressLines(tf_keras.callbacks.Callback):
  """Prints script_contract's progress line every `every_n_steps` steps.

  Keras's logs carry the mean loss of the epoch so far; the line gives the
  mean of the steps since the previous line, taken from two such means.
  Training runs one epoch, so a batch's index + 1 is the global step.

  The logs stay tensors (`_supports_tf_logs`): otherwise Keras would copy
  them to NumPy after every step, waiting for it, where Keras without a
  batch callback would already dispatch the next. Only a printed line
  waits for its step.
  """

  def __init__(self, every_n_steps, global_batch_size, learning_rate,
               print_fn=print):
    super().__init__()
    self._supports_tf_logs = True
    self._every_n_steps = every_n_steps
    self._global_batch_size = global_batch_size
    self._learning_rate = learning_rate
    self._print = print_fn
    self._last = (0, 0.0, None)  # (step, loss summed to it, time).

  def on_train_begin(self, logs=None):
    self._last = (0, 0.0, time.monotonic())

  def on_train_batch_end(self, batch, logs=None):
    step = batch + 1
    if step % self._every_n_steps:
      return
    now = time.monotonic()
    last_step, last_sum, last_time = self._last
    loss_sum = float(logs['loss']) * step
    self._last = (step, loss_sum, now)
    examples_per_sec = ((step - last_step) * self._global_batch_size /
                        max(now - last_time, 1e-9))
    self._print('INFO:tensorflow:' + script_contract.progress_line(
        step, (loss_sum - last_sum) / (step - last_step),
        self._learning_rate, examples_per_sec), flush=True)


def weights_summary(model):
  """{'parameters': count, 'sha256': of the weights' bytes in order}."""
  digest = hashlib.sha256()
  for weight in model.get_weights():
    digest.update(weight.tobytes())
  return {'parameters': int(model.count_params()),
          'sha256': digest.hexdigest()}


def main(argv=None):
  args = parse_args(argv)
  os.environ['TF_CONFIG'] = workers_only(os.environ['TF_CONFIG'])
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  resolver = strategy.cluster_resolver
  global_batch_size = args.batch_size * strategy.num_replicas_in_sync
  print('INFO:tensorflow:%s%d: batch %d x %d workers = global batch %d'
        % (resolver.task_type, resolver.task_id, args.batch_size,
           strategy.num_replicas_in_sync, global_batch_size), flush=True)
  with strategy.scope():
    model = lenet(args.weight_decay)
    model.compile(
        optimizer=tf_keras.optimizers.SGD(args.learning_rate),
        loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  model.fit(
      strategy.distribute_datasets_from_function(worker_batches(args)),
      epochs=1, steps_per_epoch=args.max_number_of_steps, verbose=0,
      callbacks=[ProgressLines(args.log_every_n_steps, global_batch_size,
                               args.learning_rate)])
  if args.train_dir:
    os.makedirs(args.train_dir, exist_ok=True)
    path = os.path.join(args.train_dir, 'weights_%s%d.json' % (
        resolver.task_type, resolver.task_id))
    with open(path, 'w') as summary:
      json.dump(weights_summary(model), summary)


if __name__ == '__main__':
  main()
