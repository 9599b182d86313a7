"""training.run_config: the flags and the cluster, validated once."""

import dataclasses
import json
import os
import tempfile

from absl.testing import flagsaver
import pytest

from deployment import update
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import fine_tune
from training import inputs
from training import optimizers
from training import run_config
from training import schedule
from training.errors import UsageError
from training.flags import FLAGS

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


NO_ENV = {}
# Never created: configurations are only validated here.
UNUSED_TRAIN_DIR = os.path.join(tempfile.gettempdir(), 'run_config_train')


def parse(*argv):
  """The FlagSnapshot of a command line, FLAGS left as it was."""
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py'] + list(argv))
    return run_config.FlagSnapshot.of(FLAGS)


def digits(digits_dir, *argv):
  return parse('--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
               '--model_name=lenet', '--train_dir=%s' % UNUSED_TRAIN_DIR, *argv)


def tf_config(ps, workers, job, index):
  return {'TF_CONFIG': json.dumps({
      'cluster': {'ps': ps, 'worker': workers},
      'task': {'type': job, 'index': index}})}


PS = ['127.0.0.1:2220']
WORKERS = ['127.0.0.1:2221', '127.0.0.1:2222']


def test_single_machine_run(digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--num_clones=2', '--clone_on_cpu',
             '--batch_size=16'), NO_ENV)
  assert config.task is None and not config.is_ps
  assert config.is_chief and config.master == '' and config.num_workers == 1
  assert config.deployment.num_clones == 2
  assert config.deployment.clone_device(1) == '/device:CPU:0'
  assert config.plan.global_batch_size == 32
  assert config.plan.num_samples == 1437
  assert config.inputs.image_size == 28
  assert config.model.num_classes == 10
  assert config.fine_tune.checkpoint is None
  assert config.sync_optimizer_replicas is None


def test_every_bad_flag_is_reported_at_once(digits_dir):
  with pytest.raises(UsageError) as error:
    run_config.from_flags(
        digits(digits_dir, '--batch_size=0', '--optimizer=adamw',
               '--learning_rate_decay_type=cosine', '--quantize_delay=-2',
               '--max_number_of_steps=0', '--model_name=lenet5'), NO_ENV)
  lines = error.value.lines
  assert lines[:5] == (
      '--batch_size must be >= 1 (examples per clone), got 0',
      '--max_number_of_steps must be >= 1, got 0',
      '--optimizer=adamw is not known; use one of adadelta, adagrad, adam, '
      'ftrl, momentum, rmsprop, sgd',
      '--learning_rate_decay_type=cosine is not known; use one of '
      'exponential, fixed, polynomial',
      '--quantize_delay=-2: give -1 (no quantization) or the step from '
      'which to quantize, >= 0',
  )
  assert len(lines) == 6
  assert lines[5].startswith("--model_name: unknown network name 'lenet5'")
  assert error.value.exit_code == 2


@pytest.mark.parametrize('argv,line', [
    (['--num_clones=0'], '--num_clones must be >= 1, got 0'),
    (['--num_epochs_per_decay=0'], '--num_epochs_per_decay must be > 0, '
     'got 0.0'),
    (['--warmup_epochs=-1'], '--warmup_epochs must be >= 0, got -1.0'),
    (['--moving_average_decay=1.5'], '--moving_average_decay must be in '
     '(0, 1), got 1.5'),
    (['--label_smoothing=1'], '--label_smoothing must be in [0, 1), got 1.0'),
    (['--learning_rate=0'], '--learning_rate must be > 0, got 0.0'),
    (['--save_interval_secs=-5'], '--save_interval_secs must be >= 0 (0: '
     'checkpoint only at the end), got -5'),
    (['--ps_strategy=random'], '--ps_strategy=random is not known; use one '
     'of round_robin, by_size'),
    (['--train_dir_lock=fcntl'], '--train_dir_lock=fcntl is not known; use '
     'one of flock, none'),
    (['--train_dir='], '--train_dir is required'),
    (['--worker_replicas=2', '--sync_replicas', '--replicas_to_aggregate=3',
      '--num_ps_tasks=1'],
     '--replicas_to_aggregate=3 is more than the 2 worker(s) of '
     '--worker_replicas: a global step would never complete; use at most 2'),
    (['--replica_averaging_steps=10'], '--replica_averaging_steps=10 is for '
     'all-reduce workers: a cluster of several workers and no ps tasks; '
     'drop it'),
    (['--gradient_compression=fp16'], '--gradient_compression=fp16 '
     'compresses the all-reduce between workers: it needs a cluster of '
     'several workers and no ps tasks; drop it'),
    (['--all_reduce_buffer_bytes=1048576'], '--all_reduce_buffer_bytes='
     '1048576 sizes the all-reduce between workers: it needs a cluster of '
     'several workers and no ps tasks; drop it'),
    (['--worker_hosts=127.0.0.1:2222,127.0.0.1:2223', '--job_name=worker',
      '--all_reduce_buffer_bytes=0'], '--all_reduce_buffer_bytes must be '
     '>= 1, got 0'),
    (['--worker_hosts=127.0.0.1:2222,127.0.0.1:2223', '--job_name=worker',
      '--replica_averaging_steps=0'], '--replica_averaging_steps must be >= 1 '
     '(unset: average the gradients every step), got 0'),
    (['--worker_replicas=2'], '--worker_replicas=2 with --num_ps_tasks=0 '
     'all-reduces between worker tasks, which needs the cluster: give '
     '--worker_hosts, --job_name and --task or TF_CONFIG (python -m '
     'clusters.launch --num_ps 0 --num_workers 2 -- '
     'train_image_classifier.py ... starts one on this machine)'),
    (['--worker_hosts=127.0.0.1:2222,127.0.0.1:2223', '--job_name=worker',
      '--task=1', '--sync_replicas'],
     '--sync_replicas with the 2 workers and no ps tasks of the cluster '
     'from --ps_hosts/--worker_hosts/--job_name/--task: they all-reduce '
     'their gradients every step, which is synchronous already; drop '
     '--sync_replicas (SyncReplicasOptimizer needs ps tasks)'),
    (['--checkpoint_path=/nowhere/model.ckpt-5'], '--checkpoint_path='
     '/nowhere/model.ckpt-5 does not exist; give an existing checkpoint '
     'prefix (e.g. .../model.ckpt-1000) or directory'),
])
def test_bad_value_is_named_with_its_fix(digits_dir, argv, line):
  with pytest.raises(UsageError) as error:
    run_config.from_flags(digits(digits_dir, *argv), NO_ENV)
  assert error.value.lines == (line,)


def test_sync_replicas_plan_counts_the_aggregated_replicas(digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--batch_size=8', '--sync_replicas',
             '--replicas_to_aggregate=2', '--worker_replicas=2',
             '--num_ps_tasks=1'), NO_ENV)
  assert config.plan.global_batch_size == 16
  assert config.sync_optimizer_replicas == (2, 2)


def test_worker_of_a_cluster_takes_counts_from_the_cluster(digits_dir):
  snapshot = digits(digits_dir, '--clone_on_cpu')
  config = run_config.from_flags(snapshot,
                                 tf_config(PS, WORKERS, 'worker', 1))
  assert config.task.task_index == 1 and config.task.source == 'TF_CONFIG'
  assert not config.is_chief and config.num_workers == 2
  assert config.master == ''
  assert not config.srun_step  # Only --slurm: see tests/test_slurm.py.
  assert config.deployment.replica_id == 1
  assert config.deployment.num_ps_tasks == 1
  assert config.deployment.clone_device(0) == (
      '/job:worker/task:1/device:CPU:0')
  # The cluster's counts are in the config; the flags keep their defaults.
  assert FLAGS['worker_replicas'].default == 1
  assert snapshot.worker_replicas == 1


def test_all_reduce_workers_take_the_gradient_compression(digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--clone_on_cpu', '--gradient_compression=bf16'),
      tf_config([], WORKERS, 'worker', 0))
  assert config.update == update.UpdateOptions(gradient_compression='bf16')
  assert config.update.wire_dtype == tf.bfloat16


def test_all_reduce_workers_take_the_buffer_size(digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--clone_on_cpu', '--all_reduce_buffer_bytes=65536'),
      tf_config([], WORKERS, 'worker', 0))
  assert config.update == update.UpdateOptions(all_reduce_buffer_bytes=65536)


def test_ps_task_needs_no_dataset():
  config = run_config.from_flags(parse('--train_dir=%s' % UNUSED_TRAIN_DIR),
                                 tf_config(PS, WORKERS, 'ps', 0))
  assert config.is_ps and not config.is_chief and not config.srun_step
  assert config.model is None and config.deployment is None
  assert config.loop is None and config.plan is None


@pytest.mark.parametrize('argv,line', [
    (['--worker_replicas=3'], '--worker_replicas=3 but the cluster from '
     'TF_CONFIG has 2; drop --worker_replicas'),
    (['--num_ps_tasks=2'], '--num_ps_tasks=2 but the cluster from TF_CONFIG '
     'has 1; drop --num_ps_tasks'),
    (['--master=grpc://127.0.0.1:2299'], '--master=grpc://127.0.0.1:2299: a '
     'task of a cluster (from TF_CONFIG) trains against its own server; drop '
     '--master'),
    (['--sync_replicas', '--replicas_to_aggregate=3'],
     '--replicas_to_aggregate=3 is more than the 2 worker(s) of the cluster '
     'from TF_CONFIG: a global step would never complete; use at most 2'),
    (['--task=1'], '--task=1 but TF_CONFIG says task index 0; drop --task'),
])
def test_flags_that_contradict_the_cluster(digits_dir, argv, line):
  with pytest.raises(UsageError) as error:
    run_config.from_flags(digits(digits_dir, *argv),
                          tf_config(PS, WORKERS, 'worker', 0))
  assert error.value.lines == (line,)


def test_flag_snapshot_is_read_only(digits_dir):
  snapshot = digits(digits_dir, '--batch_size=7')
  with pytest.raises(AttributeError, match='read-only'):
    snapshot.batch_size = 8
  assert snapshot.batch_size == 7
  assert snapshot.given('batch_size') and not snapshot.given('num_clones')


def test_flags_that_repeat_the_cluster_are_accepted(digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--worker_replicas=2', '--num_ps_tasks=1',
             '--sync_replicas', '--replicas_to_aggregate=2', '--task=1'),
      tf_config(PS, WORKERS, 'worker', 1))
  assert (config.task.job_name, config.task.task_index) == ('worker', 1)
  assert config.num_workers == 2 and config.plan.global_batch_size == 64


def test_no_cluster_without_host_flags_or_tf_config(digits_dir):
  config = run_config.from_flags(digits(digits_dir), {'TF_CONFIG': ''})
  assert config.task is None and config.is_chief


def test_accumulation_steps_reach_update_and_plan_from_one_source(
    digits_dir):
  config = run_config.from_flags(
      digits(digits_dir, '--batch_size=8', '--num_clones=2',
             '--accumulation_steps=4'), NO_ENV)
  assert config.update.accumulation_steps == 4
  assert config.plan.accumulation_steps == 4
  assert config.plan.global_batch_size == 64
  assert config.plan.describe()[0] == (
      'global batch per step: 8 per clone x 2 clones x 4 micro-steps = 64 '
      'examples')
  # The plan follows the update options, not a flag of its own.
  halved = schedule.plan_for(
      config.inputs.batch_size, config.model.dataset.num_samples,
      config.deployment,
      dataclasses.replace(config.update, accumulation_steps=2),
      config.optimizer)
  assert halved.global_batch_size == 32


def test_accumulation_steps_reach_the_graph(digits_dir, tmp_path):
  config = run_config.from_flags(
      digits(digits_dir, '--clone_on_cpu', '--accumulation_steps=4',
             '--train_dir=%s' % tmp_path), NO_ENV)
  with tf.Graph().as_default() as graph:
    train_image_classifier.build_training_graph(config)
    is_apply_step = graph.get_operation_by_name('accumulation/is_apply_step')
    modulo = is_apply_step.inputs[0].op
    accumulators = [v.op.name for v in tf.local_variables()
                    if v.op.name.endswith('_accumulator')]
  assert modulo.type == 'FloorMod'
  assert tf.get_static_value(modulo.inputs[1]) == 4
  assert len(accumulators) == 8  # LeNet's weights and biases


def test_update_options_reach_the_step_unchanged(digits_dir, tmp_path,
                                                 monkeypatch):
  config = run_config.from_flags(
      digits(digits_dir, '--clone_on_cpu', '--num_clones=2',
             '--accumulation_steps=2', '--precision=mixed_bfloat16',
             '--train_dir=%s' % tmp_path), NO_ENV)
  given = []
  train_step = update.train_step

  def recording_train_step(*args, **kwargs):
    given.append(args[4:6])  # update, precision
    return train_step(*args, **kwargs)

  monkeypatch.setattr(update, 'train_step', recording_train_step)
  with tf.Graph().as_default() as graph:
    train_image_classifier.build_training_graph(config)
    weight_casts = sorted(op.get_attr('DstT').name
                          for op in graph.get_operations()
                          if op.type == 'Cast'
                          and op.name.startswith('weights_cast'))
  [(options, precision)] = given
  assert options is config.update
  assert precision == config.precision == 'mixed_bfloat16'
  # Each clone reads the float32 weights of LeNet's 4 layers in bfloat16.
  assert weight_casts == ['bfloat16'] * 8


def test_parts_hold_the_flags(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  config = run_config.from_flags(
      digits(digits_dir, '--clone_on_cpu', '--num_clones=2',
             '--optimizer=momentum', '--momentum=0.8',
             '--learning_rate=0.05', '--learning_rate_decay_type=polynomial',
             '--end_learning_rate=0.001', '--sync_replicas',
             '--worker_replicas=2', '--num_ps_tasks=1',
             '--replicas_to_aggregate=2', '--moving_average_decay=0.99',
             '--clip_gradient_norm=5', '--precision=mixed_bfloat16',
             '--sync_batch_norm', '--shuffle_seed=7', '--num_readers=2',
             '--train_image_size=32', '--preprocessing_name=cifarnet',
             '--train_dir_lock=none',
             '--trainable_scopes=LeNet/fc3, LeNet/fc4',
             '--checkpoint_exclude_scopes=LeNet/fc4',
             '--max_number_of_steps=50', '--save_interval_secs=0',
             '--log_every_n_steps=5', '--label_smoothing=0.1',
             '--random_seed=3', '--train_dir=%s' % train_dir), NO_ENV)
  assert config.optimizer == optimizers.OptimizerConfig(
      name='momentum', momentum=0.8, learning_rate=0.05,
      learning_rate_decay_type='polynomial', end_learning_rate=0.001,
      sync_replicas=True, replicas_to_aggregate=2, moving_average_decay=0.99)
  assert config.update == update.UpdateOptions(clip_gradient_norm=5.0)
  assert (config.precision, config.sync_batch_norm) == ('mixed_bfloat16',
                                                        True)
  assert config.deployment.separate_cpu_devices  # for sync batch norm
  assert config.deployment.clone_devices(1) == [
      '/job:worker/task:0/device:CPU:1']
  assert config.sync_optimizer_replicas == (2, 2)
  assert config.inputs == inputs.InputConfig(
      dataset_name='digits', dataset_split_name='train',
      dataset_dir=digits_dir, labels_offset=0, preprocessing_name='cifarnet',
      batch_size=32, image_size=32, num_readers=2,
      num_preprocessing_threads=4, shuffle_seed=7)
  assert config.loop == run_config.LoopConfig(
      train_dir=train_dir, max_number_of_steps=50, save_interval_secs=0,
      save_summaries_secs=600, log_every_n_steps=5, non_chief_wait_secs=30,
      train_dir_lock='none')
  assert config.fine_tune == fine_tune.FineTuneConfig(
      checkpoint_exclude_scopes=('LeNet/fc4',),
      trainable_scopes=('LeNet/fc3', 'LeNet/fc4'))
  assert (config.label_smoothing, config.random_seed) == (0.1, 3)
  assert config.choices == ('lenet', 'digits', 0)


def test_default_flags_give_the_default_optimizer_config(digits_dir):
  config = run_config.from_flags(digits(digits_dir), NO_ENV)
  assert config.optimizer == optimizers.OptimizerConfig()
  assert config.update == update.UpdateOptions()


def test_fine_tune_checkpoint_is_resolved_from_a_directory(digits_dir,
                                                           tmp_path):
  with tf.Graph().as_default():
    variable = tf.Variable(1.0, name='v')
    with tf.Session() as session:
      session.run(variable.initializer)
      tf.train.Saver([variable]).save(session, str(tmp_path / 'model.ckpt'),
                                      global_step=3)
  config = run_config.from_flags(
      digits(digits_dir, '--checkpoint_path=%s' % tmp_path,
             '--ignore_missing_vars'), NO_ENV)
  assert config.fine_tune.checkpoint_path == str(tmp_path)
  assert config.fine_tune.checkpoint == str(tmp_path / 'model.ckpt-3')
  assert config.fine_tune.ignore_missing_vars


def test_run_config_and_its_parts_are_read_only(digits_dir):
  config = run_config.from_flags(digits(digits_dir), NO_ENV)
  for obj, name in ((config, 'master'), (config.optimizer, 'learning_rate'),
                    (config.inputs, 'batch_size'), (config.loop, 'train_dir'),
                    (config.fine_tune, 'trainable_scopes')):
    with pytest.raises(dataclasses.FrozenInstanceError):
      setattr(obj, name, None)


@pytest.mark.parametrize('argv,line', [
    (['--accumulation_steps=0'], '--accumulation_steps must be >= 1 (1: no '
     'accumulation), got 0'),
    (['--clip_gradient_norm=-1'], '--clip_gradient_norm must be > 0 and at '
     'most 3.402823e+38, float32\'s largest (leave it unset for no '
     'clipping), got -1.0'),
    # Finite in float64, inf in the float32 graph: every weight NaN.
    (['--clip_gradient_norm=1e39'], '--clip_gradient_norm must be > 0 and at '
     'most 3.402823e+38, float32\'s largest (leave it unset for no '
     'clipping), got 1e+39'),
])
def test_bad_accumulation_and_clipping_flags(digits_dir, argv, line):
  with pytest.raises(UsageError) as error:
    run_config.from_flags(digits(digits_dir, *argv), NO_ENV)
  assert error.value.lines == (line,)


def test_train_dir_that_cannot_be_created_is_named(digits_dir, tmp_path):
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  with pytest.raises(UsageError) as error:
    run_config.from_flags(digits(digits_dir, '--train_dir=%s/train'
                                 % blocker), NO_ENV)
  assert error.value.lines == (
      '--train_dir=%s/train cannot be created: %s is a file, not a '
      'directory; give a directory path' % (blocker, blocker),)
