"""Evaluates a checkpoint: accuracy and top-5 recall on one dataset split.

  python eval_image_classifier.py --dataset_name=digits \
      --dataset_dir=data/digits --dataset_split_name=test \
      --model_name=lenet --checkpoint_path=train_dir/lenet

--checkpoint_path is a checkpoint prefix or a directory (its latest
checkpoint). Every example of the split is seen exactly once (the last batch
may be smaller). The figures are printed and written as summaries
`eval/Accuracy` and `eval/Recall_5` to --eval_dir.
"""

import logging
import math
import sys

from absl import app
from absl import flags
import numpy as np

from datasets import input_pipeline
from deployment.slim_compat import slim, tf
from training import fine_tune
from training import lookup
from training.errors import UsageError
from training.errors import call_for_flag

flags.DEFINE_integer('batch_size', 100, 'The number of samples in each batch.')
flags.DEFINE_integer('max_num_batches', None,
                     'Max number of batches to evaluate; None: all.')
flags.DEFINE_string('master', '', 'The address of the TensorFlow master.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'Checkpoint prefix, or a directory: its latest checkpoint.')
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/',
                    'Directory where the summaries are written.')
flags.DEFINE_integer('num_preprocessing_threads', 4,
                     'Number of parallel decode/preprocess calls.')
flags.DEFINE_string('dataset_name', 'imagenet', 'The name of the dataset.')
flags.DEFINE_string('dataset_split_name', 'test', 'The split to evaluate.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the dataset files.')
flags.DEFINE_integer('labels_offset', 0,
                     'Subtracted from the labels (see training).')
flags.DEFINE_string('model_name', 'inception_v3', 'The network to evaluate.')
flags.DEFINE_string('preprocessing_name', None,
                    'Preprocessing; None: the one of --model_name.')
flags.DEFINE_float('moving_average_decay', None,
                   'Evaluate the moving averages of the weights (the decay '
                   'used in training); None: the weights themselves.')
flags.DEFINE_integer('eval_image_size', None,
                     'Eval image size; None: the network default.')
flags.DEFINE_bool('quantize', False,
                  'Unsupported: needed tf.contrib.quantize.')
flags.DEFINE_bool('use_grayscale', False,
                  'Convert images to grayscale before preprocessing.')

FLAGS = flags.FLAGS


def evaluate():
  """Returns (accuracy, recall_at_5, num_examples, global_step)."""
  if FLAGS.quantize:
    raise UsageError('--quantize relied on tf.contrib.quantize, which TF 2.x '
                     'removed; drop the flag')
  if FLAGS.batch_size < 1:
    raise UsageError('--batch_size must be >= 1, got %d' % FLAGS.batch_size)
  checkpoint = fine_tune.resolve_checkpoint(FLAGS.checkpoint_path)
  with tf.Graph().as_default():
    dataset, num_classes, network_fn, preprocess_fn = (
        lookup.model_and_data(FLAGS, is_training=False))
    image_size = FLAGS.eval_image_size or network_fn.default_image_size
    batches = input_pipeline.BatchQueue(call_for_flag(
        '--dataset_dir=%s' % FLAGS.dataset_dir, input_pipeline.make_dataset,
        dataset, preprocess_fn, FLAGS.batch_size, image_size,
        is_training=False, num_readers=1,
        num_preprocessing_threads=FLAGS.num_preprocessing_threads,
        labels_offset=FLAGS.labels_offset, num_epochs=1))
    images, labels = batches.next_batch()
    logits, _ = network_fn(images)
    k = min(5, num_classes)
    correct = tf.reduce_sum(tf.cast(
        tf.equal(tf.argmax(logits, 1), tf.cast(labels, tf.int64)), tf.int64))
    in_top_k = tf.reduce_sum(tf.cast(
        tf.nn.in_top_k(logits, tf.cast(labels, tf.int32), k), tf.int64))
    count = tf.size(labels, out_type=tf.int64)

    global_step = tf.train.get_or_create_global_step()
    if FLAGS.moving_average_decay:
      averages = tf.train.ExponentialMovingAverage(FLAGS.moving_average_decay,
                                                   global_step)
      to_restore = averages.variables_to_restore(slim.get_model_variables())
      to_restore[global_step.op.name] = global_step
    else:
      to_restore = slim.get_variables_to_restore()
    saver = tf.train.Saver(to_restore)

    totals = np.zeros(3, np.int64)
    max_batches = FLAGS.max_num_batches or math.inf
    with tf.Session(FLAGS.master) as session:
      saver.restore(session, checkpoint)
      step = int(session.run(global_step))
      batch_index = 0
      while batch_index < max_batches:
        try:
          totals += session.run([correct, in_top_k, count])
        except tf.errors.OutOfRangeError:
          break
        batch_index += 1
  if totals[2] == 0:
    raise UsageError('split %s of %s is empty' % (FLAGS.dataset_split_name,
                                                  FLAGS.dataset_name))
  return totals[0] / totals[2], totals[1] / totals[2], int(totals[2]), step


def write_summaries(accuracy, recall, step):
  summary = tf.Summary(value=[
      tf.Summary.Value(tag='eval/Accuracy', simple_value=accuracy),
      tf.Summary.Value(tag='eval/Recall_5', simple_value=recall),
  ])
  with tf.Graph().as_default():
    writer = tf.summary.FileWriter(FLAGS.eval_dir)
    writer.add_summary(summary, step)
    writer.close()


def main(unused_argv):
  tf.logging.set_verbosity(tf.logging.INFO)
  # absl's handler already prints TensorFlow's records once.
  logging.getLogger('tensorflow').propagate = False
  try:
    accuracy, recall, examples, step = evaluate()
  except UsageError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  write_summaries(accuracy, recall, step)
  print('eval/Accuracy[%.4f]' % accuracy)
  print('eval/Recall_5[%.4f]' % recall)
  print('%s %s: accuracy %.2f%% on %d examples (checkpoint step %d)' % (
      FLAGS.dataset_name, FLAGS.dataset_split_name, 100 * accuracy, examples,
      step))


if __name__ == '__main__':
  app.run(main)
