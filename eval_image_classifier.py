"""Evaluates a checkpoint: accuracy and top-5 recall on one dataset split.

  python eval_image_classifier.py --dataset_name=digits \
      --dataset_dir=data/digits --dataset_split_name=test \
      --model_name=lenet --checkpoint_path=train_dir/lenet

--checkpoint_path is a checkpoint prefix or a directory (its newest
readable checkpoint). With --exported_model=PATH (a frozen GraphDef, a
SavedModel folder or a .tflite file from export_inference_graph.py) the
artifact is evaluated instead, and its accuracy printed beside the
checkpoint's with the share of images both give the same top-1 class (no
summaries are written then). Every example of the split is counted exactly once,
the last partial batch included. With --num_clones N (and --clone_on_cpu) each clone
evaluates its own batch of --batch_size per run and the counts add up. The figures are printed and written as summaries
`eval/Accuracy` and `eval/Recall_5` to --eval_dir. --quantize builds the
network quantization-aware, for a checkpoint trained with --quantize_delay
(docs/training.md).
"""

import dataclasses
import math
import typing

from absl import flags
import numpy as np

from datasets import tfrecord_check
from deployment import model_deploy
from exporting import verify
from tf2_compat.slim_compat import slim, tf
from training import checkpoint_fit
from training import cli
from training import common_flags
from training import eval_input
from training import flag_checks
from training import inputs as inputs_lib
from training import lookup
from training import resume_check
from training import run_config
from training import slurm_eval
from training.errors import Problems
from training.errors import UsageError

common_flags.define_split_and_batch('test', 100)
flags.DEFINE_integer('max_num_batches', None,
                     'Max number of batches to evaluate; None: all.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/',
                    'Checkpoint prefix, or a directory: its newest readable '
                    'checkpoint.')
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/',
                    'Directory where the summaries are written.')
flag_checks.DEFINE_whole_number(
    'eval_image_size', None, 'Eval image size; None: the network default.',
    flag_checks.EVAL_RANGES)
flags.DEFINE_string('exported_model', None,
                    'Evaluate this exported model (frozen GraphDef, '
                    'SavedModel folder or .tflite file) beside '
                    '--checkpoint_path.')
flags.DEFINE_bool('quantize', False,
                  'Evaluate the network quantization-aware (fake-quantized, '
                  'batch norm folded), as trained with --quantize_delay; '
                  'the checkpoint must hold its ranges.')

FLAGS = flags.FLAGS


def main(unused_argv):
  def body():
    if slurm_eval.this_task_evaluates(FLAGS.slurm):
      evaluate_and_report(eval_config(FLAGS))
  cli.run_main(body)


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """What one evaluation reads and builds, validated.

  Attributes:
    checkpoint_path: --checkpoint_path as given, for messages.
    checkpoint: the readable checkpoint prefix it names.
    model: the lookup.ModelAndData (dataset, network, preprocessing).
    inputs: the inputs.InputConfig: one reader, no shuffling.
    deployment: the DeploymentConfig of --num_clones and --clone_on_cpu.
    master: the session target.
    max_num_batches: batches to evaluate, over all clones; None: all.
    eval_dir: where the summaries are written.
    moving_average_decay: restore the moving averages of the weights kept
      with this decay; None: the weights.
    exported_model: the exported model to evaluate beside the checkpoint;
      None: the checkpoint alone.
  """
  checkpoint_path: str
  checkpoint: str
  model: lookup.ModelAndData
  inputs: inputs_lib.InputConfig
  deployment: model_deploy.DeploymentConfig
  master: str
  max_num_batches: typing.Optional[int]
  eval_dir: str
  moving_average_decay: typing.Optional[float]
  exported_model: typing.Optional[str] = None

  @property
  def choices(self):
    """The checkpoint_fit.Choices a refused checkpoint is compared with."""
    return checkpoint_fit.Choices(self.model.model_name,
                                  self.inputs.dataset_name,
                                  self.inputs.labels_offset)


def eval_config(flag_values):
  """Validates the flags; returns an EvalConfig.

  Args:
    flag_values: the parsed absl FlagValues (FLAGS) or a FlagSnapshot.

  Raises:
    UsageError: with one line per problem found.
  """
  f = run_config.FlagSnapshot.read(flag_values)
  problems = Problems()
  flag_checks.check_numbers(f, flag_checks.EVAL_RANGES, problems)
  checkpoint = problems.attempt(resume_check.readable_checkpoint,
                                f.checkpoint_path)
  model = problems.attempt(lookup.model_and_data, f, is_training=False,
                           quantize_delay=0 if f.quantize else None)
  if model is not None:
    flag_checks.check_image_size('eval_image_size', f.eval_image_size, model,
                                 problems)
  problems.raise_if_any()
  return EvalConfig(
      checkpoint_path=f.checkpoint_path, checkpoint=checkpoint, model=model,
      inputs=inputs_lib.InputConfig(
          dataset_name=f.dataset_name,
          dataset_split_name=f.dataset_split_name,
          dataset_dir=f.dataset_dir, labels_offset=f.labels_offset,
          preprocessing_name=f.preprocessing_name or f.model_name,
          batch_size=f.batch_size,
          image_size=(f.eval_image_size
                      or model.network_fn.default_image_size),
          num_readers=1,
          num_preprocessing_threads=f.num_preprocessing_threads,
          max_image_pixels=f.max_image_pixels),
      deployment=model_deploy.DeploymentConfig(num_clones=f.num_clones,
                                               clone_on_cpu=f.clone_on_cpu),
      master=f.master, max_num_batches=f.max_num_batches,
      eval_dir=f.eval_dir, moving_average_decay=f.moving_average_decay,
      exported_model=f.exported_model)


def evaluate_and_report(config):
  if config.exported_model:
    report_exported(config)
    return
  accuracy, recall, examples, step = evaluate(config)
  write_summaries(config.eval_dir, accuracy, recall, step)
  print('eval/Accuracy[%.4f]' % accuracy)
  print('eval/Recall_5[%.4f]' % recall)
  print('%s %s: accuracy %.2f%% on %d examples (checkpoint step %d)' % (
      config.inputs.dataset_name, config.inputs.dataset_split_name,
      100 * accuracy, examples, step))


def report_exported(config):
  """Prints the accuracy of config.exported_model beside its checkpoint's."""
  comparison = verify.compare(config, config.exported_model)
  print('%s %s: %s %s: accuracy %.2f%% on %d examples' % (
      config.inputs.dataset_name, config.inputs.dataset_split_name,
      comparison.kind, config.exported_model, 100 * comparison.accuracy,
      comparison.num_examples))
  print('%s %s: checkpoint %s: accuracy %.2f%%; top-1 agreement %.2f%%' % (
      config.inputs.dataset_name, config.inputs.dataset_split_name,
      config.checkpoint, 100 * comparison.checkpoint_accuracy,
      100 * comparison.agreement))


def evaluate(config):
  """Returns (accuracy, recall_at_5, num_examples, global_step)."""
  with tf.Graph().as_default():
    counts = build_eval_graph(config)
    restore = variables_to_restore(config.moving_average_decay)
    checkpoint_fit.check_eval(config.checkpoint_path, config.checkpoint,
                              restore, config.choices)
    saver = tf.train.Saver(restore)
    totals = np.zeros(3, np.int64)
    # Each run evaluates one batch per clone.
    max_runs = (math.ceil(config.max_num_batches /
                          config.deployment.num_clones)
                if config.max_num_batches else math.inf)
    session_config = tf.ConfigProto(allow_soft_placement=True)
    with tfrecord_check.naming_corrupt_files(
        config.model.dataset.data_sources), lookup.reporting_bad_records(
            config.model.dataset, config.inputs), tf.Session(
                config.master, config=session_config) as session:
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
    raise UsageError('split %s of %s is empty' % (
        config.inputs.dataset_split_name, config.inputs.dataset_name))
  return totals[0] / totals[2], totals[1] / totals[2], int(totals[2]), step


def build_eval_graph(config):
  """The counts of one run over all clones: [correct, in top 5, examples]."""
  tf.train.get_or_create_global_step()
  batches = inputs_lib.make_dataset(config.inputs, config.model,
                                    is_training=False, num_epochs=1)
  deployment = config.deployment
  with tf.device(deployment.inputs_device()):
    iterator = tf.data.make_one_shot_iterator(
        eval_input.padded_batches(batches, config.inputs.batch_size))
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
