"""Trains a Slim image classifier on clones and replicas.

One machine, 2 CPU clones, the embedded digits dataset:

  python download_and_convert_data.py --dataset_name=digits \
      --dataset_dir=data/digits
  python train_image_classifier.py --dataset_name=digits \
      --dataset_dir=data/digits --model_name=lenet --num_clones=2 \
      --clone_on_cpu --batch_size=32 --optimizer=adam --learning_rate=0.002 \
      --max_number_of_steps=1000 --train_dir=train_dir/lenet

`--batch_size` is per clone. The start-up log prints the global batch per
step (batch_size x num_clones, x accumulation_steps, x
replicas_to_aggregate with sync replicas), the steps per epoch and, when
the learning rate decays, the decay steps that follow from it. NASNet and
PNASNet schedule drop path over the run's --max_number_of_steps (the log
says over how many steps).

Training resumes from the latest checkpoint in --train_dir; while there is
none, --checkpoint_path (minus --checkpoint_exclude_scopes) initialises the
model. Several machines: see clusters/cluster.py and docs/clusters.md.

The script is a client of deployment.model_deploy.deploy(), which builds
the clones, sums their gradients and returns the train op; this file reads
the flags into a validated training.run_config.RunConfig, builds the input
pipeline, the optimizer and the hooks, and runs the loop.
"""

import collections
import contextlib
import functools

from clusters import peers
from clusters import replica_session
from clusters import servers
from clusters import slurm
from datasets import tfrecord_check
from deployment import collectives
from deployment import model_deploy
from deployment import precision
from nets import quantize
from tf2_compat.slim_compat import tf
from training import cli
from training import divergence
from training import fine_tune
from training import hooks
from training import input_position
from training import last_step
from training import inputs
from training import lookup
from training import model_size
from training import optimizers
from training import preemption
from training import resume_check
from training import run_config
from training import schedule
from training import train_dir_lock
from training import watchdog as watchdog_lib
from training.errors import LastingFailure
from training.errors import ScriptError
from training.errors import TrainingDiverged
from training.errors import UsageError
from training.flags import FLAGS


def main(unused_argv):
  cli.run_main(lambda: run(run_config.from_flags(FLAGS)))


def run(config):
  """Trains, or serves as a ps task, as the RunConfig says."""
  server = None
  if config.task is not None:
    try:
      server = servers.start_server(
          config.task, config.deployment and model_deploy.session_config(
              config.deployment))
    except servers.PortUnavailable as e:
      raise UsageError(str(e)) from None
    tf.logging.info('started %s (cluster from %s)', config.task,
                    config.task.source)
    if config.is_ps:
      if config.srun_step:
        slurm.serve_until_the_workers_end(server, config.task)
      else:
        servers.serve_until_stopped(server)
      tf.logging.info('ps task %d stopped', config.task.task_index)
      return
  # One SignalStop from here to the end: before the first step a SIGTERM
  # ends the process at once (nothing to save), after it the step finishes
  # and the chief saves.
  checkpoint_dir = config.loop.train_dir if config.is_chief else None
  with preemption.SignalStop(
      checkpoint_dir=checkpoint_dir,
      second_stops_at_once=not config.srun_step) as stop:
    if server is None:
      # Without a cluster, --master may still name a server the user
      # started; --task then says which replica this is (upstream
      # behaviour).
      train(config, config.master, stop)
      return
    peers.wait_for(peers.needed_by(config.task))
    if config.deployment.all_reduce_replicas:
      with naming_collective_failures(config):
        try:
          replica_session.check_same_cluster(
              config.task, config.deployment, server.target,
              config.deployment.collective_timeout_secs)
        except replica_session.ClusterMismatch as e:
          raise UsageError(str(e)) from None
    report = replica_session.PlacementReportHook(
        config.task.num_ps_tasks, config.deployment.ps_strategy)
    train(config, server.target, stop, extra_hooks=[report])


def train(config, master, stop, extra_hooks=()):
  """Builds the graph and runs the training loop to --max_number_of_steps.

  Args:
    config: the RunConfig.
    master: the session target.
    stop: the entered preemption.SignalStop of the process.
    extra_hooks: more session hooks of every worker.

  Raises:
    UsageError: a flag that only the built graph shows to be wrong,
      train_dir in use by another run, or its checkpoints unreadable or of
      another model.
    TrainingDiverged: the loss or the weights became NaN.
  """
  with tf.Graph().as_default(), holding_train_dir(config):
    graph = build_training_graph(config)
    loop = config.loop
    if config.is_chief:  # Refuses another model before anything is written.
      resumed = resume_check.prepare_train_dir(
          loop.train_dir, tf.global_variables(), config.choices)
    else:
      resumed = tf.train.latest_checkpoint(loop.train_dir)
    if resume_check.nothing_left_to_train(resumed, loop.max_number_of_steps,
                                          loop.train_dir):
      return
    log_batch_arithmetic(config)
    warn_if_no_gpu(config.deployment)
    with tfrecord_check.naming_corrupt_files(
        config.model.dataset.data_sources), \
        lookup.reporting_bad_records(config.model.dataset, config.inputs), \
        stopping_on_divergence(config), \
        naming_collective_failures(config), \
        step_watchdog(config) as watchdog, \
        contextlib.ExitStack() as session_scope:
      # The session's start waits for the ps tasks too (the chief
      # initialises or restores the variables there and saves step 0).
      with watchdog.watching('the start of the session (initialising or '
                             'restoring the model, the first checkpoint)',
                             counts_as_step=False):
        session = session_scope.enter_context(training_session(
            config, graph, master,
            list(extra_hooks) + [watchdog.closing_hook()]))
      stop.training_started()
      steps = 0
      while not session.should_stop() and not stop.requested:
        steps += 1
        # The first step warms up (graph optimisation, the input): its
        # time is no measure of the next ones.
        with watchdog.watching('training step %d of this worker' % steps,
                               counts_as_step=steps > 1):
          session.run(graph.train_op)
      # The final checkpoint and the session's close, in the exit of the
      # blocks inside the watchdog's.
      watchdog.watch_until_exit('the end of training (the final checkpoint '
                                'and the session close)')
    if stop.requested:
      saved = tf.train.latest_checkpoint(config.loop.train_dir)
      tf.logging.info('%s: stopped; %s', stop.requested,
                      'saved %s' % saved if config.is_chief and saved
                      else 'the chief saves the checkpoints')


# init_fn restores --checkpoint_path (None without it); sync_optimizer is the
# SyncReplicasOptimizer or None; batches the PositionedBatches.
TrainingGraph = collections.namedtuple('TrainingGraph', [
    'train_op', 'learning_rate', 'total_loss', 'summary_op', 'init_fn',
    'sync_optimizer', 'batches'])


def build_training_graph(config):
  """Builds the training graph in the default graph; returns TrainingGraph."""
  deployment = config.deployment
  if config.random_seed is not None:
    tf.set_random_seed(config.random_seed)
  with tf.device(deployment.variables_device()):
    global_step = tf.train.get_or_create_global_step()
  batches = input_batches(config)
  network_kwargs, drop_path_line = schedule.drop_path_span(
      config.model.network_fn, config.loop.max_number_of_steps)
  if drop_path_line:
    tf.logging.info(drop_path_line)

  def clone_fn():
    with tf.device(deployment.inputs_device()):
      images, labels = batches.next_batch()
    logits, end_points = config.model.network_fn(
        tf.cast(images, precision.compute_dtype(config.precision)),
        **network_kwargs)
    add_losses(logits, end_points, labels, config.model.num_classes,
               config.label_smoothing)
    return end_points

  with tf.device(deployment.optimizer_device()):
    learning_rate = config.optimizer.scheduled_learning_rate(config.plan,
                                                             global_step)
    optimizer = optimizers.make_optimizer(config.optimizer, learning_rate)
    if config.sync_optimizer_replicas:
      replicas_to_aggregate, total_replicas = config.sync_optimizer_replicas
      optimizer = tf.train.SyncReplicasOptimizer(
          optimizer, replicas_to_aggregate=replicas_to_aggregate,
          total_num_replicas=total_replicas)
    elif config.async_workers and config.loop.max_number_of_steps:
      optimizer = last_step.StopsAtLastStep(optimizer,
                                            config.loop.max_number_of_steps)
  variable_averages = None
  if config.optimizer.moving_average_decay:
    with tf.device(deployment.variables_device()):
      variable_averages = tf.train.ExponentialMovingAverage(
          config.optimizer.moving_average_decay, global_step)

  model = model_deploy.deploy(
      deployment, clone_fn, optimizer=optimizer,
      var_list=lambda: fine_tune.variables_to_train(
          config.fine_tune.trainable_scopes),
      variable_averages=variable_averages,
      summaries=[model_deploy.scalar_summary('learning_rate',
                                             learning_rate)],
      sync_batch_norm=config.sync_batch_norm, precision=config.precision,
      update=config.update,
      replica_mean_variables=functools.partial(replica_statistics,
                                               config.sync_batch_norm))
  model_size.check(
      tf.global_variables(), '--train_image_size=%d' % config.inputs.image_size,
      config.model.model_name, config.model.network_fn.default_image_size,
      local_variables=not deployment.num_ps_tasks)
  sync_optimizer = (optimizer if config.sync_optimizer_replicas else None)
  return TrainingGraph(model.train_op, learning_rate, model.total_loss,
                       model.summary_op,
                       fine_tune.restoring_init_fn(config.fine_tune),
                       sync_optimizer, batches)


def replica_statistics(sync_batch_norm):
  """The variables all-reduce replicas set from their own batches, not
  from the gradient, for deploy()'s replica_mean_variables: the
  quantization ranges and, unless sync batch norm already pools the
  batches, every other model variable that is not trained (batch norm's
  moving mean and variance). deploy() averages them over the replicas
  after every step, so the chief's checkpoint holds statistics of every
  replica's batches, as Keras's batch normalization averages its moving
  statistics over the replicas when they are read.

  Call it once the model is built.
  """
  chosen = tf.get_collection(quantize.RANGES)
  if not sync_batch_norm:
    known = {v.name for v in chosen + tf.trainable_variables()}
    chosen += [v for v in tf.model_variables() if v.name not in known]
  return chosen


def input_batches(config):
  """This replica's shard of training batches; its position is saved in
  checkpoints (see training/input_position.py)."""
  shard = config.deployment.replica_id
  with tf.device(config.deployment.inputs_device()):
    return input_position.PositionedBatches(
        inputs.make_dataset(config.inputs, config.model, is_training=True,
                            num_shards=config.num_workers,
                            shard_index=shard),
        input_position.layout(config.inputs, config.num_workers, shard),
        input_position.files_read(config.model.dataset.data_sources))


def add_losses(logits, end_points, labels, num_classes, label_smoothing):
  """Cross-entropy on the logits (and 0.4 x on Inception's aux logits), in
  float32 whatever the layers computed in."""
  one_hot = tf.one_hot(labels, num_classes)
  if 'AuxLogits' in end_points:
    tf.losses.softmax_cross_entropy(
        one_hot, tf.cast(end_points['AuxLogits'], tf.float32),
        label_smoothing=label_smoothing, weights=0.4, scope='aux_loss')
  tf.losses.softmax_cross_entropy(one_hot, tf.cast(logits, tf.float32),
                                  label_smoothing=label_smoothing)


def holding_train_dir(config):
  """The chief writes the checkpoints: it holds train_dir's lock for the
  run as --train_dir_lock says (training/train_dir_lock.py); other workers
  hold nothing."""
  if config.is_chief:
    return train_dir_lock.held(config.loop.train_dir,
                               config.loop.train_dir_lock)
  return contextlib.nullcontext()


def step_watchdog(config):
  """The watchdog that names a task a step waits for in vain."""
  return watchdog_lib.StepWatchdog(
      peers.needed_at_each_step(config.task,
                                config.sync_optimizer_replicas is not None),
      final_peers=peers.needed_by(config.task) if config.task else [],
      timeout_secs=config.loop.step_timeout_secs)


def log_batch_arithmetic(config):
  """The start-up lines of how the batch flags combine."""
  for line in config.plan.describe():
    tf.logging.info(line)
  if config.sync_batch_norm:
    members = model_deploy.sync_batch_norm_group_size(config.deployment)
    batch_size = config.inputs.batch_size
    tf.logging.info('sync batch norm: each layer normalises over %d clones '
                    'x %d = %d examples', members, batch_size,
                    members * batch_size)


def warn_if_no_gpu(deployment):
  if deployment.clone_on_cpu:
    return
  if not tf.config.list_physical_devices('GPU'):
    tf.logging.warning(
        'no GPU found: the %d clone(s) placed on GPU:0..%d run on the CPU '
        '(allow_soft_placement). Pass --clone_on_cpu to ask for this '
        'explicitly.', deployment.num_clones, deployment.num_clones - 1)


def training_session(config, graph, master, extra_hooks):
  """The MonitoredSession: checkpoints, summaries, progress, stop step."""
  loop = config.loop
  all_reduce = config.deployment.all_reduce_replicas
  saver, scaffold, snapshot = saver_and_scaffold(config, graph)
  chief_hooks, history = chief_only_hooks(config, saver, scaffold, snapshot)
  session_hooks = hooks.session_hooks(
      graph.total_loss, config.is_chief, chief_hooks,
      every_worker_hooks(config, graph, master) + list(extra_hooks), history)
  if all_reduce:
    # Before the chief's first checkpoint: a replica that cannot join
    # fails the start with nothing written.
    session_hooks.insert(0, model_deploy.BroadcastVariablesHook(
        config.deployment))
  device_filters = config.task.device_filters if config.task else []
  return replica_session.monitored_training_session(
      non_chief_wait_secs=loop.non_chief_wait_secs, master=master,
      recover=not all_reduce,
      # All-reduce replicas hold their own variables: each initialises
      # them, only the chief restores (the broadcast gives the others its
      # values).
      is_chief=config.is_chief or all_reduce,
      checkpoint_dir=loop.train_dir if config.is_chief else None,
      scaffold=scaffold, hooks=session_hooks,
      save_checkpoint_secs=None, save_checkpoint_steps=None,
      save_summaries_steps=None, save_summaries_secs=None,
      log_step_count_steps=None,
      config=model_deploy.session_config(
          config.deployment, allow_soft_placement=True,
          device_filters=device_filters),
      stop_grace_period_secs=5)


def saver_and_scaffold(config, graph):
  """The Saver of the checkpoints, the Scaffold whose saver restores (the
  chief's skips the input position of another input layout), and the
  StepSnapshot the Saver saves as the global step (None but for the chief
  of asynchronous workers)."""
  snapshot = None
  if config.is_chief and config.async_workers:
    snapshot = last_step.StepSnapshot(tf.train.get_global_step())
  # Relative paths: a copied train_dir names its own checkpoints.
  saver = graph.batches.saver(
      saved_instead=snapshot and snapshot.saved_names(), max_to_keep=5,
      save_relative_paths=True)
  restoring_saver = None
  if config.is_chief:
    restoring_saver = graph.batches.restoring_saver(config.loop.train_dir)
    if restoring_saver is None and snapshot is not None:
      # The checkpoint's global step restores into the global step.
      restoring_saver = graph.batches.saver(max_to_keep=None)
  scaffold = tf.train.Scaffold(init_fn=graph.init_fn,
                               summary_op=graph.summary_op,
                               saver=restoring_saver or saver)
  return saver, scaffold, snapshot


def every_worker_hooks(config, graph, master):
  """The hooks every worker runs: progress, the stop step, sync replicas'
  and the log of a re-created session."""
  loop = config.loop
  worker_hooks = [hooks.ProgressLogHook(
      graph.total_loss, graph.learning_rate, config.plan.global_batch_size,
      loop.log_every_n_steps, loop.max_number_of_steps)]
  if loop.max_number_of_steps:
    worker_hooks.append(tf.train.StopAtStepHook(
        last_step=loop.max_number_of_steps))
  if graph.sync_optimizer is not None:
    worker_hooks.extend(replica_session.sync_replicas_hooks(
        graph.sync_optimizer, config.is_chief, config.num_workers))
  # A remote session is re-created when a ps task restarts; all-reduce
  # workers do not recover (see training_session).
  if master and not config.deployment.all_reduce_replicas:
    worker_hooks.append(hooks.SessionRecoveryLogHook())
  return worker_hooks


def chief_only_hooks(config, saver, scaffold, snapshot=None):
  """The chief's checkpoint and summary hooks, and the CheckpointHistory
  judged when training diverges; ([], None) on other workers. With a
  StepSnapshot, each checkpoint is named after the snapshot it saves."""
  if not config.is_chief:  # Building the saver hook on a worker would log it.
    return [], None
  loop = config.loop
  history = divergence.CheckpointHistory(tf.trainable_variables())
  saver_hook = (functools.partial(last_step.SnapshotCheckpointSaverHook,
                                  snapshot) if snapshot
                else hooks.CheckpointSaverHook)
  chief_hooks = [
      saver_hook(
          loop.train_dir, save_secs=loop.save_interval_secs or None,
          save_steps=None if loop.save_interval_secs else 10 ** 12,
          saver=saver,
          listeners=[hooks.FiniteWeightsGuard(tf.global_variables(),
                                              history)]),
      tf.train.SummarySaverHook(save_secs=loop.save_summaries_secs,
                                output_dir=loop.train_dir, scaffold=scaffold),
  ]
  return chief_hooks, history


@contextlib.contextmanager
def stopping_on_divergence(config):
  """Turns a NaN loss or NaN weights into TrainingDiverged (exit 3), once
  the chief has made the newest checkpoint that had not diverged the
  latest (training/divergence.py); a failed checkpoint write into a
  LastingFailure (exit 2) when a restart would meet it again (a full or
  read-only disk), else a ScriptError (exit 1)."""
  try:
    yield
  except (hooks.NanLossError, hooks.NonFiniteWeightsError) as e:
    checkpoint_path = config.fine_tune.checkpoint_path
    raise TrainingDiverged(divergence.report(
        e, config.loop.train_dir, config.optimizer.learning_rate,
        'step 0 (initialised from --checkpoint_path=%s)' % checkpoint_path
        if checkpoint_path else 'step 0')) from None
  except hooks.CheckpointWriteError as e:
    raise (LastingFailure if e.lasting else ScriptError)(str(e)) from None


@contextlib.contextmanager
def naming_collective_failures(config):
  """Turns a failed collective op into a ScriptError saying what it means:
  a clone or replica it waits for stopped (named when it is a worker whose
  address no longer answers) or never started."""
  try:
    yield
  except collectives.COLLECTIVE_ERRORS as e:
    if e.op is None or not e.op.type.startswith('Collective'):
      raise
    who = 'a clone or replica it waits for'
    timeout = config.deployment.collective_timeout_secs
    if config.deployment.all_reduce_replicas:
      missing = peers.unreachable_workers(config.task)
      if missing:
        who = ', '.join('worker task %d (%s)' % m for m in missing)
      message = (
          'the all-reduce between the %d workers failed (collective op %s, '
          '--collective_timeout_secs=%g): %s stopped or never started. '
          "Restart the whole cluster (the launcher's --max_restarts does "
          'so by itself): every worker resumes from the latest checkpoint '
          'in %s'
          % (config.num_workers, e.op.name, timeout, who,
             config.loop.train_dir))
    else:
      message = (
          'collective op %s did not complete within --collective_timeout_secs'
          '=%g: %s stopped or never started' % (e.op.name, timeout, who))
    raise ScriptError(message) from None


if __name__ == '__main__':
  cli.run_app(main)
