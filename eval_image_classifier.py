"""Evaluates a checkpoint: accuracy and top-5 recall on one dataset split.

  python eval_image_classifier.py --dataset_name=digits \
      --dataset_dir=data/digits --dataset_split_name=test \
      --model_name=lenet --checkpoint_path=train_dir/lenet

--checkpoint_path is a checkpoint prefix or a directory (its newest
readable checkpoint). Every example of the split is counted exactly once,
the last partial batch included. With --num_clones N (and --clone_on_cpu) each clone
evaluates its own batch of --batch_size per run and the counts add up. The figures are printed and written as summaries
`eval/Accuracy` and `eval/Recall_5` to --eval_dir.
"""

import collections
import math

from absl import flags
import numpy as np

from datasets import input_pipeline
from datasets import tfrecord_check
from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf
from training import checkpoint_fit
from training import cli
from training import common_flags  # pylint: disable=unused-import
from training import eval_input
from training import lookup
from training import resume_check
from training import run_config
from training import slurm_eval
from training.errors import Problems
from training.errors import UsageError
from training.errors import call_for_flag

flags.DEFINE_integer('batch_size', 100, 'The number of samples in each batch.')
flags.DEFINE_integer('max_num_batches', None,
                     'Max number of batches to evaluate; None: all.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'Checkpoint prefix, or a directory: its newest readable '
                    'checkpoint.')
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/',
                    'Directory where the summaries are written.')
flags.DEFINE_string('dataset_split_name', 'test', 'The split to evaluate.')
flags.DEFINE_integer('eval_image_size', None,
                     'Eval image size; None: the network default.')
flags.DEFINE_bool('quantize', False,
                  'Unsupported: needed tf.contrib.quantize.')

FLAGS = flags.FLAGS


def main(unused_argv):
  def body():
    if slurm_eval.this_task_evaluates(FLAGS.slurm):
      evaluate_and_report(eval_config(FLAGS))
  cli.run_main(body)


# What one evaluation reads and builds, validated; flags is the FlagSnapshot.
EvalConfig = collections.namedtuple(
    'EvalConfig', ['flags', 'checkpoint', 'model', 'image_size'])

_RANGES = (
    ('batch_size', lambda v: v >= 1, '>= 1 (examples per clone)'),
    ('num_clones', lambda v: v >= 1, '>= 1'),
    ('max_num_batches', lambda v: v >= 1, '>= 1 (unset: the whole split)'),
    ('eval_image_size', lambda v: v >= 1, '>= 1 (pixels)'),
    ('labels_offset', lambda v: v >= 0, '>= 0'),
    ('num_preprocessing_threads', lambda v: v >= 1, '>= 1'),
)


def eval_config(flag_values):
  """Validates the flags; returns an EvalConfig.

  Raises:
    UsageError: with one line per problem found.
  """
  f = run_config.FlagSnapshot.of(flag_values)
  problems = Problems()
  run_config.check_finite(f, problems)
  run_config.check_ranges(f, _RANGES, problems)
  problems.check(not f.quantize, '--quantize relied on tf.contrib.quantize, '
                 'which TF 2.x removed; drop the flag')
  checkpoint = problems.attempt(resume_check.readable_checkpoint,
                                f.checkpoint_path)
  model = problems.attempt(lookup.model_and_data, f, is_training=False)
  problems.raise_if_any()
  return EvalConfig(f, checkpoint, model,
                    f.eval_image_size or model.network_fn.default_image_size)


def evaluate_and_report(config):
  accuracy, recall, examples, step = evaluate(config)
  write_summaries(config.flags.eval_dir, accuracy, recall, step)
  print('eval/Accuracy[%.4f]' % accuracy)
  print('eval/Recall_5[%.4f]' % recall)
  print('%s %s: accuracy %.2f%% on %d examples (checkpoint step %d)' % (
      config.flags.dataset_name, config.flags.dataset_split_name,
      100 * accuracy, examples, step))


def evaluate(config):
  """Returns (accuracy, recall_at_5, num_examples, global_step)."""
  f = config.flags
  with tf.Graph().as_default():
    counts = build_eval_graph(config)
    restore = variables_to_restore(f.moving_average_decay)
    checkpoint_fit.check_eval(config.checkpoint, restore, f)
    saver = tf.train.Saver(restore)
    totals = np.zeros(3, np.int64)
    # Each run evaluates one batch per clone.
    max_runs = (math.ceil(f.max_num_batches / f.num_clones)
                if f.max_num_batches else math.inf)
    session_config = tf.ConfigProto(allow_soft_placement=True)
    with tfrecord_check.naming_corrupt_files(
        config.model.dataset.data_sources), lookup.reporting_bad_labels(
            f, config.model.dataset), tf.Session(
                f.master, config=session_config) as session:
      saver.restore(session, config.checkpoint)
      step = int(session.run(tf.train.get_global_step()))
      runs = 0
      while runs < max_runs:
        run_totals = session.run(counts)
        if run_totals[2] == 0:  # Only padding left: the split is done.
          break
        totals += run_totals
        runs += 1
  if totals[2] == 0:
    raise UsageError('split %s of %s is empty' % (f.dataset_split_name,
                                                  f.dataset_name))
  return totals[0] / totals[2], totals[1] / totals[2], int(totals[2]), step


def build_eval_graph(config):
  """The counts of one run over all clones: [correct, in top 5, examples]."""
  f = config.flags
  tf.train.get_or_create_global_step()
  batches = call_for_flag(
      '--dataset_dir=%s' % f.dataset_dir, input_pipeline.make_dataset,
      config.model.dataset, config.model.preprocess_fn, f.batch_size,
      config.image_size, is_training=False, num_readers=1,
      num_preprocessing_threads=f.num_preprocessing_threads,
      labels_offset=f.labels_offset, num_epochs=1, check_labels=True,
      record_counts=config.model.record_counts)
  deployment = model_deploy.DeploymentConfig(num_clones=f.num_clones,
                                             clone_on_cpu=f.clone_on_cpu)
  with tf.device(deployment.inputs_device()):
    iterator = tf.data.make_one_shot_iterator(
        eval_input.padded_batches(batches, f.batch_size))
  k = min(5, config.model.num_classes)

  def clone_counts():
    with tf.device(deployment.inputs_device()):
      images, labels, is_real = iterator.get_next()
    logits, _ = config.model.network_fn(images)
    correct = tf.cast(tf.equal(tf.argmax(logits, 1),
                               tf.cast(labels, tf.int64)), tf.int64)
    in_top_k = tf.cast(tf.nn.in_top_k(logits, tf.cast(labels, tf.int32), k),
                       tf.int64)
    return tf.stack([tf.reduce_sum(correct * is_real),
                     tf.reduce_sum(in_top_k * is_real),
                     tf.reduce_sum(is_real)])

  clones = model_deploy.create_clones(deployment, clone_counts)
  return tf.add_n([clone.outputs for clone in clones])


def variables_to_restore(moving_average_decay):
  """The weights, or their moving averages when training kept them."""
  if not moving_average_decay:
    return slim.get_variables_to_restore()
  global_step = tf.train.get_global_step()
  averages = tf.train.ExponentialMovingAverage(moving_average_decay,
                                               global_step)
  to_restore = averages.variables_to_restore(slim.get_model_variables())
  to_restore[global_step.op.name] = global_step
  return to_restore


def write_summaries(eval_dir, accuracy, recall, step):
  summary = tf.Summary(value=[
      tf.Summary.Value(tag='eval/Accuracy', simple_value=accuracy),
      tf.Summary.Value(tag='eval/Recall_5', simple_value=recall),
  ])
  with tf.Graph().as_default():
    writer = tf.summary.FileWriter(eval_dir)
    writer.add_summary(summary, step)
    writer.close()


if __name__ == '__main__':
  cli.run_app(main)
