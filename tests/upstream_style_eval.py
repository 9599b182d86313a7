"""An existing-style Slim evaluation program, the twin of upstream_style_train.

It evaluates a checkpoint the way programs built on upstream TF-Slim's
eval_image_classifier.py do: a `DatasetDataProvider` without shuffling,
`tf.train.batch`, streaming metrics gathered by
`slim.metrics.aggregate_metric_map`, and `slim.evaluation.evaluate_once`
over `ceil(num_samples / batch_size)` batches. It prints one line per
metric, `eval/Accuracy = 0.9750`, and writes them as summaries to
--eval_dir.

    python -m tf2_compat.run_slim tests/upstream_style_eval.py \\
        --dataset_name=digits --dataset_dir=/tmp/digits \\
        --dataset_split_name=test --model_name=lenet --batch_size=40 \\
        --checkpoint_path=/tmp/digits_train --eval_dir=/tmp/digits_eval

With a batch size that divides the split (360 test digits: 40), every
example is counted exactly once.
"""

import math

import tensorflow.compat.v1 as tf
import tf_slim as slim

from datasets import dataset_factory
from nets import nets_factory
from preprocessing import preprocessing_factory

flags = tf.app.flags

flags.DEFINE_string('master', '', 'The address of the TensorFlow master.')
flags.DEFINE_integer('batch_size', 100, 'Examples per batch.')
flags.DEFINE_integer('max_num_batches', None,
                     'Batches to evaluate; by default the whole split.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'A checkpoint, or a folder of them (the latest is used).')
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/', 'Where summaries go.')
flags.DEFINE_integer('num_preprocessing_threads', 1,
                     'Threads of the batching queue.')
flags.DEFINE_string('dataset_name', 'digits', 'The dataset to evaluate on.')
flags.DEFINE_string('dataset_split_name', 'test', 'The split to evaluate.')
flags.DEFINE_string('dataset_dir', None, 'Where the dataset files are.')
flags.DEFINE_string('model_name', 'lenet', 'The network to evaluate.')
flags.DEFINE_string('preprocessing_name', None,
                    'The preprocessing; by default the network\'s own.')

FLAGS = flags.FLAGS


def main(_):
  if not FLAGS.dataset_dir:
    raise ValueError('You must supply the dataset directory with '
                     '--dataset_dir')

  tf.logging.set_verbosity(tf.logging.INFO)
  with tf.Graph().as_default():
    tf_global_step = slim.get_or_create_global_step()

    dataset = dataset_factory.get_dataset(
        FLAGS.dataset_name, FLAGS.dataset_split_name, FLAGS.dataset_dir)
    network_fn = nets_factory.get_network_fn(
        FLAGS.model_name, num_classes=dataset.num_classes, is_training=False)
    image_preprocessing_fn = preprocessing_factory.get_preprocessing(
        FLAGS.preprocessing_name or FLAGS.model_name, is_training=False)

    # One reader, no shuffling: the batches go through the split in order.
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, shuffle=False,
        common_queue_capacity=2 * FLAGS.batch_size,
        common_queue_min=FLAGS.batch_size)
    image, label = provider.get(['image', 'label'])
    eval_image_size = network_fn.default_image_size
    image = image_preprocessing_fn(image, eval_image_size, eval_image_size)
    images, labels = tf.train.batch(
        [image, label],
        batch_size=FLAGS.batch_size,
        num_threads=FLAGS.num_preprocessing_threads,
        capacity=5 * FLAGS.batch_size)

    logits, _ = network_fn(images)
    predictions = tf.argmax(logits, 1)
    labels = tf.squeeze(labels)

    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        'Accuracy': tf.metrics.accuracy(labels, predictions),
        'Recall_5': slim.metrics.streaming_sparse_recall_at_k(
            logits, tf.reshape(labels, [-1, 1]), 5),
    })
    for name, value in names_to_values.items():
      tf.summary.scalar('eval/%s' % name, value)

    if FLAGS.max_num_batches:
      num_batches = FLAGS.max_num_batches
    else:
      num_batches = int(math.ceil(dataset.num_samples /
                                  float(FLAGS.batch_size)))

    checkpoint_path = FLAGS.checkpoint_path
    if tf.gfile.IsDirectory(checkpoint_path):
      checkpoint_path = tf.train.latest_checkpoint(checkpoint_path)
    tf.logging.info('Evaluating %s', checkpoint_path)

    results = slim.evaluation.evaluate_once(
        master=FLAGS.master,
        checkpoint_path=checkpoint_path,
        logdir=FLAGS.eval_dir,
        num_evals=num_batches,
        eval_op=list(names_to_updates.values()),
        final_op=names_to_values,
        variables_to_restore=slim.get_variables_to_restore())
    print('evaluated %d examples of %s at step %d' % (
        num_batches * FLAGS.batch_size, checkpoint_path,
        tf.train.load_variable(checkpoint_path,
                               tf_global_step.op.name)))
    for name in sorted(results):
      print('eval/%s = %.4f' % (name, results[name]))


if __name__ == '__main__':
  tf.app.run()
