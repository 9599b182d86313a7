"""Trains a Slim image classifier on clones and replicas.

One machine, 2 CPU clones, the embedded digits dataset:

  python download_and_convert_data.py --dataset_name=digits \
      --dataset_dir=data/digits
  python train_image_classifier.py --dataset_name=digits \
      --dataset_dir=data/digits --model_name=lenet --num_clones=2 \
      --clone_on_cpu --batch_size=32 --optimizer=adam --learning_rate=0.002 \
      --max_number_of_steps=1000 --train_dir=train_dir/lenet

`--batch_size` is per clone. The start-up log prints the global batch per
step (batch_size x num_clones, x replicas_to_aggregate with sync replicas),
the steps per epoch and the decay steps that follow from it.

Training resumes from the latest checkpoint in --train_dir; while there is
none, --checkpoint_path (minus --checkpoint_exclude_scopes) initialises the
model. Several machines: see deployment/cluster.py and the README.
"""

import collections
import logging
import sys

from absl import app

from datasets import input_pipeline
from datasets import tfrecord_check
from deployment import cluster
from deployment import model_deploy
from deployment.slim_compat import slim, tf
from training import fine_tune
from training import hooks
from training import lookup
from training import optimizers
from training import replica_session
from training import schedule
from training.errors import UsageError
from training.errors import call_for_flag
from training.flags import FLAGS


def check_flags():
  """Flag checks that need no graph; raise UsageError."""
  if FLAGS.quantize_delay >= 0:
    raise UsageError('--quantize_delay=%d: quantization-aware training relied '
                     'on tf.contrib.quantize, which TF 2.x removed; leave the '
                     'flag at -1' % FLAGS.quantize_delay)
  if not FLAGS.train_dir:
    raise UsageError('--train_dir is required')
  optimizers.check_optimizer(FLAGS.optimizer)
  schedule.check_decay_type(FLAGS.learning_rate_decay_type)
  if FLAGS.max_number_of_steps is not None and FLAGS.max_number_of_steps < 1:
    raise UsageError('--max_number_of_steps must be >= 1, got %d'
                     % FLAGS.max_number_of_steps)
  if FLAGS.sync_replicas and FLAGS.replicas_to_aggregate > FLAGS.worker_replicas:
    raise UsageError(
        '--replicas_to_aggregate=%d is more than the %d worker replicas: '
        'a global step would never complete; use at most --worker_replicas'
        % (FLAGS.replicas_to_aggregate, FLAGS.worker_replicas))


def make_config(task=None):
  try:
    return model_deploy.DeploymentConfig(
        num_clones=FLAGS.num_clones, clone_on_cpu=FLAGS.clone_on_cpu,
        replica_id=FLAGS.task if task is None else task,
        num_replicas=FLAGS.worker_replicas, num_ps_tasks=FLAGS.num_ps_tasks,
        ps_strategy=FLAGS.ps_strategy)
  except (ValueError, TypeError) as e:
    raise UsageError(str(e)) from None


def _add_losses(logits, end_points, labels, num_classes):
  one_hot = tf.one_hot(labels, num_classes)
  if 'AuxLogits' in end_points:
    tf.losses.softmax_cross_entropy(
        one_hot, end_points['AuxLogits'],
        label_smoothing=FLAGS.label_smoothing, weights=0.4, scope='aux_loss')
  tf.losses.softmax_cross_entropy(one_hot, logits,
                                  label_smoothing=FLAGS.label_smoothing)


# init_fn restores --checkpoint_path (None without it); sync_optimizer is the
# SyncReplicasOptimizer or None; data_sources are the dataset's files.
TrainingGraph = collections.namedtuple('TrainingGraph', [
    'train_op', 'plan', 'learning_rate', 'total_loss', 'summary_op',
    'init_fn', 'sync_optimizer', 'data_sources'])


def build(config, num_workers=1):
  """Builds the training graph in the default graph; returns TrainingGraph.

  Raises:
    UsageError: for a bad flag or input file, before anything is written.
  """
  dataset, num_classes, network_fn, preprocess_fn = lookup.model_and_data(
      FLAGS, is_training=True, weight_decay=FLAGS.weight_decay)
  plan = schedule.make_batch_plan(
      FLAGS.batch_size, FLAGS.num_clones, dataset.num_samples,
      FLAGS.num_epochs_per_decay, FLAGS.sync_replicas,
      FLAGS.replicas_to_aggregate, FLAGS.warmup_epochs)
  checkpoint = None
  if FLAGS.checkpoint_path:
    checkpoint = fine_tune.resolve_checkpoint(FLAGS.checkpoint_path)
  image_size = FLAGS.train_image_size or network_fn.default_image_size

  with tf.device(config.variables_device()):
    global_step = tf.train.get_or_create_global_step()

  with tf.device(config.inputs_device()):
    batches = input_pipeline.BatchQueue(call_for_flag(
        '--dataset_dir=%s' % FLAGS.dataset_dir, input_pipeline.make_dataset,
        dataset, preprocess_fn, FLAGS.batch_size, image_size,
        is_training=True, num_readers=FLAGS.num_readers,
        num_preprocessing_threads=FLAGS.num_preprocessing_threads,
        labels_offset=FLAGS.labels_offset, num_shards=num_workers,
        shard_index=config.replica_id, seed=FLAGS.shuffle_seed))

  def clone_fn():
    with tf.device(config.inputs_device()):
      images, labels = batches.next_batch()
    logits, end_points = network_fn(images)
    _add_losses(logits, end_points, labels, num_classes)
    return end_points

  clones = model_deploy.create_clones(config, clone_fn)
  first_scope = clones[0].scope
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_scope)
  summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES, first_scope))

  variable_averages = None
  if FLAGS.moving_average_decay:
    with tf.device(config.variables_device()):
      variable_averages = tf.train.ExponentialMovingAverage(
          FLAGS.moving_average_decay, global_step)

  with tf.device(config.optimizer_device()):
    learning_rate = schedule.learning_rate(
        plan, global_step, FLAGS.learning_rate_decay_type, FLAGS.learning_rate,
        FLAGS.end_learning_rate, FLAGS.learning_rate_decay_factor)
    optimizer = optimizers.make_optimizer(FLAGS.optimizer, learning_rate,
                                          FLAGS)
    sync_optimizer = None
    if FLAGS.sync_replicas:
      sync_optimizer = optimizer = tf.train.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=FLAGS.replicas_to_aggregate,
          total_num_replicas=FLAGS.worker_replicas,
          variable_averages=variable_averages,
          variables_to_average=(slim.get_model_variables()
                                if variable_averages else None))
    elif variable_averages is not None:
      update_ops.append(variable_averages.apply(slim.get_model_variables()))

    trainable = fine_tune.variables_to_train(
        fine_tune.split_scopes(FLAGS.trainable_scopes))
    total_loss, grads_and_vars = model_deploy.optimize_clones(
        clones, optimizer, var_list=trainable)
    apply_op = optimizer.apply_gradients(grads_and_vars,
                                         global_step=global_step)
    with tf.control_dependencies([apply_op] + update_ops):
      train_op = tf.identity(total_loss, name='train_op')

    summaries.add(tf.summary.scalar('learning_rate', learning_rate))
    summaries.add(tf.summary.scalar('total_loss', total_loss))
    for loss in tf.get_collection(tf.GraphKeys.LOSSES, first_scope):
      summaries.add(tf.summary.scalar('losses/%s' % loss.op.name, loss))
    summary_op = tf.summary.merge(sorted(summaries, key=lambda s: s.name),
                                  name='summary_op')

  init_fn = None
  if checkpoint is not None:
    restore = fine_tune.variables_to_restore(
        checkpoint, fine_tune.split_scopes(FLAGS.checkpoint_exclude_scopes),
        FLAGS.ignore_missing_vars)
    saver = tf.train.Saver(restore)

    def init_fn(unused_scaffold, session):
      tf.logging.info('fine-tuning from %s (%d variables)', checkpoint,
                      len(restore))
      saver.restore(session, checkpoint)

  return TrainingGraph(train_op, plan, learning_rate, total_loss, summary_op,
                       init_fn, sync_optimizer, dataset.data_sources)


def warn_if_no_gpu(config):
  if config.clone_on_cpu:
    return
  if not tf.config.list_physical_devices('GPU'):
    tf.logging.warning(
        'no GPU found: the %d clone(s) placed on GPU:0..%d run on the CPU '
        '(allow_soft_placement). Pass --clone_on_cpu to ask for this '
        'explicitly.', config.num_clones, config.num_clones - 1)


def session_config(device_filters=None):
  return tf.ConfigProto(allow_soft_placement=True,
                        device_filters=device_filters or [])


def train(config, master='', is_chief=True, num_workers=1,
          device_filters=None, non_chief_wait_secs=None, extra_hooks=()):
  """Builds the graph and runs the training loop to max_number_of_steps.

  A non-chief worker checks every `non_chief_wait_secs` (None: TensorFlow's
  30 s) whether the chief has initialised the model; `extra_hooks` run on
  every worker.
  """
  with tf.Graph().as_default():
    graph = build(config, num_workers)
    for line in graph.plan.describe():
      tf.logging.info(line)
    warn_if_no_gpu(config)

    saver = tf.train.Saver(max_to_keep=5)
    scaffold = tf.train.Scaffold(init_fn=graph.init_fn,
                                 summary_op=graph.summary_op, saver=saver)
    run_hooks = [
        # First, so that no later hook runs on a step with a NaN loss.
        tf.train.NanTensorHook(graph.total_loss, fail_on_nan_loss=True),
        hooks.ProgressLogHook(
            graph.total_loss, graph.learning_rate,
            FLAGS.batch_size * FLAGS.num_clones, FLAGS.log_every_n_steps,
            FLAGS.max_number_of_steps),
    ]
    if FLAGS.max_number_of_steps:
      run_hooks.append(tf.train.StopAtStepHook(
          last_step=FLAGS.max_number_of_steps))
    if graph.sync_optimizer is not None:
      run_hooks.extend(replica_session.sync_replicas_hooks(
          graph.sync_optimizer, is_chief, num_workers))
    run_hooks.extend(extra_hooks)
    chief_hooks = [
        tf.train.CheckpointSaverHook(
            FLAGS.train_dir, save_secs=FLAGS.save_interval_secs or None,
            save_steps=None if FLAGS.save_interval_secs else 10 ** 12,
            scaffold=scaffold,
            listeners=[hooks.FiniteWeightsGuard(tf.global_variables())]),
        tf.train.SummarySaverHook(
            save_secs=max(1, FLAGS.save_summaries_secs),
            output_dir=FLAGS.train_dir, scaffold=scaffold),
    ]
    with tfrecord_check.naming_corrupt_files(graph.data_sources), \
        replica_session.monitored_training_session(
        non_chief_wait_secs=non_chief_wait_secs,
        master=master, is_chief=is_chief, checkpoint_dir=FLAGS.train_dir,
        scaffold=scaffold, hooks=run_hooks, chief_only_hooks=chief_hooks,
        save_checkpoint_secs=None, save_checkpoint_steps=None,
        save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None, config=session_config(device_filters),
        stop_grace_period_secs=5) as session:
      while not session.should_stop():
        session.run(graph.train_op)


def cluster_task():
  """This process's task from --ps_hosts/... or TF_CONFIG; None: no cluster.

  The cluster decides --worker_replicas and --num_ps_tasks; giving them
  with other values is an error rather than silently overridden.
  """
  try:
    task = cluster.from_flags_and_env(
        FLAGS.ps_hosts, FLAGS.worker_hosts, FLAGS.job_name,
        FLAGS.task if FLAGS['task'].present else None)
  except ValueError as e:
    raise UsageError(str(e)) from None
  if task is None:
    return None
  if FLAGS.master:
    raise UsageError('--master=%s: a task of a cluster (from %s) trains '
                     'against its own server; drop --master'
                     % (FLAGS.master, task.source))
  for flag, value in (('worker_replicas', task.num_workers),
                      ('num_ps_tasks', task.num_ps_tasks)):
    if FLAGS[flag].present and FLAGS[flag].value != value:
      raise UsageError('--%s=%d but the cluster from %s has %d; drop --%s'
                       % (flag, FLAGS[flag].value, task.source, value, flag))
  if FLAGS.sync_replicas and FLAGS.replicas_to_aggregate > task.num_workers:
    raise UsageError(
        '--replicas_to_aggregate=%d is more than the %d workers of the '
        'cluster from %s: a global step would never complete; use at most %d'
        % (FLAGS.replicas_to_aggregate, task.num_workers, task.source,
           task.num_workers))
  return task


def run_cluster_task(task):
  """Serves as a ps task, or trains as a worker against its own server."""
  FLAGS.worker_replicas = task.num_workers
  FLAGS.num_ps_tasks = task.num_ps_tasks
  check_flags()
  config = None if task.is_ps else make_config(task.task_index)
  try:
    server = cluster.start_server(task)
  except RuntimeError as e:
    raise UsageError(str(e)) from None
  tf.logging.info('started %s (cluster from %s)', task, task.source)
  if task.is_ps:
    cluster.serve_until_stopped(server)
    tf.logging.info('ps task %d stopped', task.task_index)
    return
  report = replica_session.PlacementReportHook(task.num_ps_tasks,
                                               FLAGS.ps_strategy)
  train(config, master=server.target, is_chief=task.is_chief,
        num_workers=task.num_workers, device_filters=task.device_filters,
        non_chief_wait_secs=FLAGS.non_chief_wait_secs, extra_hooks=[report])


def run():
  task = cluster_task()
  if task is not None:
    run_cluster_task(task)
    return
  check_flags()
  # Without a cluster definition, --master may still name a server the user
  # started; --task then says which replica this is (upstream behaviour).
  train(make_config(), master=FLAGS.master, is_chief=FLAGS.task == 0,
        num_workers=FLAGS.worker_replicas)


def main(unused_argv):
  tf.logging.set_verbosity(tf.logging.INFO)
  # absl's handler already prints TensorFlow's records once.
  logging.getLogger('tensorflow').propagate = False
  try:
    run()
  except UsageError as e:
    print('error: %s' % e, file=sys.stderr)
    sys.exit(2)
  except tf.errors.DataLossError as e:
    print('error: %s' % e.message, file=sys.stderr)
    sys.exit(2)
  except (tf.train.NanLossDuringTrainingError,
          hooks.NonFiniteWeightsError) as e:
    print('error: training stopped: %s. The last good checkpoint in %s is '
          'kept; lower --learning_rate and resume.' % (
              str(e).strip() or 'NaN loss', FLAGS.train_dir), file=sys.stderr)
    sys.exit(3)


if __name__ == '__main__':
  app.run(main)
