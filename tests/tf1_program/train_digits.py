"""Trains the digits LeNet: a Slim program written for TensorFlow 1.x.

It is written as TF 1.x programs built on Slim's model_deploy were, and
runs unchanged on TF 2.21 through

    PYTHONPATH=tests/tf1_program/models python -m tf2_compat.run_slim --tf1 \\
        tests/tf1_program/train_digits.py --dataset_dir=/tmp/digits \\
        --train_dir=/tmp/digits_tf1

(tests/test_tf1_program.py runs it): `import tensorflow as tf`,
`slim = tf.contrib.slim`, tf.app.flags, a graph built in the default
graph, its own `nets` package from PYTHONPATH, tf.summary.scalar and
tf.summary.merge, 2 clones on the CPU.
"""

import tensorflow as tf

from deployment import model_deploy
from nets.digits import lenet

import digits_data

slim = tf.contrib.slim

tf.app.flags.DEFINE_string('train_dir', '/tmp/digits_train',
                           'Directory for checkpoints and event logs.')
tf.app.flags.DEFINE_string('dataset_dir', None, 'Where the TFRecords are.')
tf.app.flags.DEFINE_integer('num_clones', 2, 'Number of model clones.')
tf.app.flags.DEFINE_boolean('clone_on_cpu', True, 'Clones on the CPU.')
tf.app.flags.DEFINE_integer('batch_size', 32, 'Batch size of each clone.')
tf.app.flags.DEFINE_float('learning_rate', 0.003, 'Adam learning rate.')
tf.app.flags.DEFINE_integer('max_number_of_steps', 300, 'Steps to train.')
tf.app.flags.DEFINE_integer('log_every_n_steps', 100, 'Steps between logs.')
tf.app.flags.DEFINE_integer('save_summaries_secs', 10,
                            'Seconds between summaries.')

FLAGS = tf.app.flags.FLAGS


def main(_):
  if not FLAGS.dataset_dir:
    raise ValueError('You must supply the dataset directory with '
                     '--dataset_dir')
  tf.logging.set_verbosity(tf.logging.INFO)

  config = model_deploy.DeploymentConfig(num_clones=FLAGS.num_clones,
                                         clone_on_cpu=FLAGS.clone_on_cpu)
  with tf.device(config.variables_device()):
    global_step = slim.create_global_step()

  dataset = digits_data.get_split('train', FLAGS.dataset_dir)
  with tf.device(config.inputs_device()):
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, num_readers=1, common_queue_capacity=20 * FLAGS.batch_size,
        common_queue_min=10 * FLAGS.batch_size, seed=7)
    image, label = provider.get(['image', 'label'])
    images, labels = tf.train.batch(
        [digits_data.preprocess(image), label], batch_size=FLAGS.batch_size,
        num_threads=1, capacity=4 * FLAGS.batch_size)
    labels = slim.one_hot_encoding(labels, dataset.num_classes)
    batch_queue = slim.prefetch_queue.prefetch_queue(
        [images, labels], capacity=2 * config.num_clones)

  def clone_fn(batch_queue):
    images, labels = batch_queue.dequeue()
    logits, end_points = lenet.lenet(images, dataset.num_classes)
    slim.losses.softmax_cross_entropy(logits, labels)
    accuracy = tf.reduce_mean(tf.to_float(
        tf.equal(tf.argmax(logits, 1), tf.argmax(labels, 1))))
    tf.summary.scalar('batch_accuracy', accuracy)
    return end_points

  clones = model_deploy.create_clones(config, clone_fn, [batch_queue])
  with tf.device(config.optimizer_device()):
    optimizer = tf.train.AdamOptimizer(FLAGS.learning_rate)
  total_loss, gradients = model_deploy.optimize_clones(clones, optimizer)
  summaries = tf.get_collection(tf.GraphKeys.SUMMARIES,
                                config.clone_scope(0))
  summaries.append(tf.summary.scalar('total_loss', total_loss))
  with tf.control_dependencies([optimizer.apply_gradients(
      gradients, global_step=global_step)]):
    train_op = tf.identity(total_loss, name='train_op')

  slim.learning.train(
      train_op,
      logdir=FLAGS.train_dir,
      summary_op=tf.summary.merge(summaries),
      number_of_steps=FLAGS.max_number_of_steps,
      log_every_n_steps=FLAGS.log_every_n_steps,
      save_summaries_secs=FLAGS.save_summaries_secs,
      save_interval_secs=600)


if __name__ == '__main__':
  tf.app.run()
