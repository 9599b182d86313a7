"""Measures the digits LeNet on the test split: a TF 1.x Slim program.

    PYTHONPATH=tests/tf1_program/models python -m tf2_compat.run_slim --tf1 \\
        tests/tf1_program/eval_digits.py --dataset_dir=/tmp/digits \\
        --checkpoint_dir=/tmp/digits_tf1

prints `accuracy: 0.9722 on 360 test digits`: 9 batches of 40, each test
digit once, through slim.evaluation.evaluate_once.
"""

import math

import tensorflow as tf

from nets.digits import lenet

import digits_data

slim = tf.contrib.slim

tf.app.flags.DEFINE_string('checkpoint_dir', '/tmp/digits_train',
                           'Directory of the checkpoints to evaluate.')
tf.app.flags.DEFINE_string('eval_dir', None, 'Event logs; a temporary '
                           'folder under --checkpoint_dir by default.')
tf.app.flags.DEFINE_string('dataset_dir', None, 'Where the TFRecords are.')
tf.app.flags.DEFINE_integer('batch_size', 40, 'Test digits per batch.')

FLAGS = tf.app.flags.FLAGS


def main(_):
  dataset = digits_data.get_split('test', FLAGS.dataset_dir)
  provider = slim.dataset_data_provider.DatasetDataProvider(
      dataset, shuffle=False, common_queue_capacity=2 * FLAGS.batch_size,
      common_queue_min=FLAGS.batch_size)
  image, label = provider.get(['image', 'label'])
  images, labels = tf.train.batch(
      [digits_data.preprocess(image), label], batch_size=FLAGS.batch_size,
      num_threads=1, capacity=2 * FLAGS.batch_size)
  slim.get_or_create_global_step()
  logits, _ = lenet.lenet(images, dataset.num_classes, is_training=False)

  accuracy, update_accuracy = slim.metrics.streaming_accuracy(
      tf.argmax(logits, 1), labels)
  tf.summary.scalar('eval/accuracy', accuracy)
  num_batches = int(math.ceil(dataset.num_samples / float(FLAGS.batch_size)))
  checkpoint = tf.train.latest_checkpoint(FLAGS.checkpoint_dir)
  value = slim.evaluation.evaluate_once(
      '', checkpoint, FLAGS.eval_dir or FLAGS.checkpoint_dir + '/eval',
      num_evals=num_batches, eval_op=update_accuracy, final_op=accuracy)
  print('accuracy: %.4f on %d test digits' % (
      value, num_batches * FLAGS.batch_size))


if __name__ == '__main__':
  tf.app.run()
