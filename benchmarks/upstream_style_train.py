"""An upstream-style Slim training run: queues in, slim.learning.train loop.

The baseline of benchmarks/training_loop.py. It trains what
train_image_classifier.py trains, with the parts the upstream TF-Slim
training script used around the same graph:

  input  slim.dataset_data_provider.DatasetDataProvider (parallel readers,
         shuffling common queue) -> the network's preprocessing ->
         tf.train.batch -> slim.prefetch_queue, one dequeue per clone;
         queue capacities as upstream (20 and 10 batches for the common
         queue, 5 batches for the batch, 2 x clones for the prefetch).
  model  this project's model_deploy.deploy() over the clones, with the
         network, losses, optimizer and summaries the project's script
         builds, so only the input and the loop differ.
  loop   slim.learning.train: a Supervisor (checkpoint, summary and step
         counter threads, queue runners) and slim's train_step, which
         logs 'global step N: loss = L (T sec/step)'.

It takes the flags of make run's training command (same names and
meanings as train_image_classifier.py) and supports what that job needs:
the adam optimizer and a fixed learning rate.

tf-slim 1.1.0's Supervisor threads read the global step eagerly and fail
on TF 2.21 ("global_step:0 ... is out of scope") unless eager execution is
disabled first, so this script disables it before building anything.

Usage (from the repository root):

  .venv/bin/python benchmarks/upstream_style_train.py \
      --dataset_name=digits --dataset_dir=data/digits --model_name=lenet \
      --num_clones=2 --clone_on_cpu --batch_size=32 --optimizer=adam \
      --opt_epsilon=1e-8 --learning_rate=0.001 \
      --learning_rate_decay_type=fixed --max_number_of_steps=800 \
      --log_every_n_steps=100 --train_dir=/tmp/upstream_style
"""

import argparse
import collections
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
  sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
from datasets import dataset_factory
from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from nets import nets_factory
from preprocessing import preprocessing_factory
# pylint: enable=g-import-not-at-top,wrong-import-position

# What this baseline builds; other values of these flags are refused.
SUPPORTED = {'optimizer': 'adam', 'learning_rate_decay_type': 'fixed'}

# The graph of a baseline run; batch_queue is the slim.prefetch_queue the
# clones dequeue from.
UpstreamGraph = collections.namedtuple(
    'UpstreamGraph', ['train_op', 'summary_op', 'global_step', 'batch_queue'])


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  add = parser.add_argument
  add('--dataset_name', default='digits')
  add('--dataset_split_name', default='train')
  add('--dataset_dir', required=True)
  add('--model_name', default='lenet')
  add('--num_clones', type=int, default=1)
  add('--clone_on_cpu', action='store_true')
  add('--batch_size', type=int, default=32, help='per clone')
  add('--optimizer', default='adam')
  add('--adam_beta1', type=float, default=0.9)
  add('--adam_beta2', type=float, default=0.999)
  add('--opt_epsilon', type=float, default=1.0)
  add('--learning_rate', type=float, default=0.01)
  add('--learning_rate_decay_type', default='fixed')
  add('--weight_decay', type=float, default=0.00004)
  add('--max_number_of_steps', type=int, required=True)
  add('--log_every_n_steps', type=int, default=10)
  add('--num_readers', type=int, default=4)
  add('--num_preprocessing_threads', type=int, default=4)
  add('--save_interval_secs', type=int, default=600)
  add('--save_summaries_secs', type=int, default=600)
  add('--train_dir', required=True)
  args = parser.parse_args(argv)
  for name, supported in SUPPORTED.items():
    if getattr(args, name) != supported:
      parser.error('--%s=%s: this baseline builds only %s'
                   % (name, getattr(args, name), supported))
  return args


def queue_batches(args, dataset, preprocess_fn, image_size):
  """Upstream's queue input; returns the prefetch queue of (images, labels).

  Labels stay int64 class ids, as the project's tf.data pipeline gives
  them; the loss one-hot encodes them, as in the project's script.
  """
  provider = slim.dataset_data_provider.DatasetDataProvider(
      dataset, num_readers=args.num_readers,
      common_queue_capacity=20 * args.batch_size,
      common_queue_min=10 * args.batch_size)
  image, label = provider.get(['image', 'label'])
  image = preprocess_fn(image, image_size, image_size)
  images, labels = tf.train.batch(
      [image, label], batch_size=args.batch_size,
      num_threads=args.num_preprocessing_threads,
      capacity=5 * args.batch_size)
  return slim.prefetch_queue.prefetch_queue([images, labels],
                                            capacity=2 * args.num_clones)


def build_graph(args):
  """Builds the baseline's training graph in the default graph."""
  config = model_deploy.DeploymentConfig(num_clones=args.num_clones,
                                         clone_on_cpu=args.clone_on_cpu)
  dataset = dataset_factory.get_dataset(
      args.dataset_name, args.dataset_split_name, args.dataset_dir)
  network_fn = nets_factory.get_network_fn(
      args.model_name, num_classes=dataset.num_classes,
      weight_decay=args.weight_decay, is_training=True)
  preprocess_fn = preprocessing_factory.get_preprocessing(
      args.model_name, is_training=True)
  image_size = network_fn.default_image_size
  with tf.device(config.variables_device()):
    global_step = tf.train.get_or_create_global_step()
  with tf.device(config.inputs_device()):
    batch_queue = queue_batches(args, dataset, preprocess_fn, image_size)

  def clone_fn():
    with tf.device(config.inputs_device()):
      images, labels = batch_queue.dequeue()
    logits, _ = network_fn(images)
    tf.losses.softmax_cross_entropy(
        tf.one_hot(labels, dataset.num_classes), logits)

  with tf.device(config.optimizer_device()):
    learning_rate = tf.constant(args.learning_rate, name='fixed_learning_rate')
    optimizer = tf.train.AdamOptimizer(
        learning_rate, beta1=args.adam_beta1, beta2=args.adam_beta2,
        epsilon=args.opt_epsilon)
  model = model_deploy.deploy(
      config, clone_fn, optimizer=optimizer,
      summaries=[tf.summary.scalar('learning_rate', learning_rate,
                                   collections=[])])
  return UpstreamGraph(model.train_op, model.summary_op, global_step,
                       batch_queue)


def main(argv=None):
  args = parse_args(argv)
  tf.disable_eager_execution()
  tf.logging.set_verbosity(tf.logging.INFO)
  with tf.Graph().as_default():
    graph = build_graph(args)
    slim.learning.train(
        graph.train_op, logdir=args.train_dir, summary_op=graph.summary_op,
        global_step=graph.global_step,
        number_of_steps=args.max_number_of_steps,
        log_every_n_steps=args.log_every_n_steps,
        save_summaries_secs=args.save_summaries_secs,
        save_interval_secs=args.save_interval_secs)


if __name__ == '__main__':
  main()
