"""One validated, read-only configuration of a training run.

`from_flags` reads the parsed flags and the cluster (the host flags or
TF_CONFIG) once, checks all of them, and either returns a frozen RunConfig
or raises one UsageError listing every problem, each with its value and its
fix. The RunConfig is made of typed parts, each built once from the flags;
nothing downstream reads a flag (tests/test_flag_reads.py checks that) or
validates again, and nothing writes to FLAGS:

  deployment  DeploymentConfig: clones, replicas, ps tasks, devices.
  precision, sync_batch_norm
              how the clones are built: deploy()'s arguments of those names.
  update      deployment.update.UpdateOptions: accumulation, clipping,
              replica averaging; given to deploy(update=...) as it is.
  optimizer   optimizers.OptimizerConfig: the optimizer, the learning-rate
              schedule, sync replicas, moving averages.
  plan        schedule.BatchPlan: the global batch and the epochs, derived
              from the three above (accumulation_steps from `update` only).
  inputs      inputs.InputConfig: the split, batch, image size, readers.
  model       lookup.ModelAndData: the dataset, network, preprocessing.
  loop        LoopConfig: train_dir, the last step, how often to
              checkpoint, summarise and log.
  fine_tune   fine_tune.FineTuneConfig: --checkpoint_path and its scopes.

Two checks need the built graph and stay where the graph is built, still
before anything is written: that --trainable_scopes match a variable, and
that the variables fit --checkpoint_path.
"""

import dataclasses
import os
import typing

from clusters import cluster
from clusters import slurm
from deployment import deployment_config
from deployment import device_placement
from deployment import model_deploy
from deployment import precision
from deployment import sync_batch_norm as sync_batch_norm_lib
from deployment import update as deploy_update
from training import checkpoint_fit
from training import checkpoint_state
from training import fine_tune as fine_tune_lib
from training import flag_checks
from training import inputs as inputs_lib
from training import lookup
from training import optimizers
from training import resume_check
from training import schedule
from training import train_dir_lock
from training.errors import Problems
from training.errors import UsageError

# (flag, the known values).
_CHOICES = (
    ('optimizer', tuple(sorted(optimizers.OPTIMIZERS))),
    ('learning_rate_decay_type', schedule.DECAY_TYPES),
    ('ps_strategy', device_placement.PS_STRATEGIES),
    ('precision', precision.PRECISIONS),
    ('train_dir_lock', train_dir_lock.MODES),
)


class FlagSnapshot:
  """A read-only copy of parsed flag values: `snapshot.batch_size`.

  Args:
    values: {flag name: value}.
    given: names of the flags given on the command line.
  """

  def __init__(self, values, given=()):
    object.__setattr__(self, '_values', dict(values))
    object.__setattr__(self, '_given', frozenset(given))

  @classmethod
  def of(cls, flag_values):
    """The snapshot of an absl FlagValues (e.g. FLAGS), after parsing."""
    names = list(flag_values)
    return cls({name: flag_values[name].value for name in names},
               [name for name in names if flag_values[name].present])

  @classmethod
  def read(cls, flag_values):
    """`flag_values` as a snapshot: itself if it is one, else its `of`."""
    if isinstance(flag_values, cls):
      return flag_values
    return cls.of(flag_values)

  def __getattr__(self, name):
    try:
      return self._values[name]
    except KeyError:
      raise AttributeError('no flag named %r' % name) from None

  def __setattr__(self, name, value):
    raise AttributeError('flags are read-only after parsing; cannot set %s'
                         % name)

  def given(self, name):
    """Whether --name was on the command line (not just its default)."""
    return name in self._given

  def names(self):
    """The names of all flags, sorted."""
    return sorted(self._values)


@dataclasses.dataclass(frozen=True)
class LoopConfig:
  """The training loop, under upstream Slim's flag names.

  Attributes:
    train_dir: where checkpoints and summaries are written.
    max_number_of_steps: the global step training stops at; None: never.
    save_interval_secs: seconds between checkpoints; 0: only at the end.
    save_summaries_secs: seconds between summaries.
    log_every_n_steps: steps between progress lines.
    non_chief_wait_secs: how often a non-chief worker checks whether the
      chief has initialised the model.
    step_timeout_secs: the bound of a step before the tasks it needs are
      probed (training/watchdog.py); None: derived from the step times.
    train_dir_lock: how the chief keeps a second run off train_dir, one of
      train_dir_lock.MODES.
  """
  train_dir: str
  max_number_of_steps: typing.Optional[int]
  save_interval_secs: int
  save_summaries_secs: int
  log_every_n_steps: int
  non_chief_wait_secs: int
  step_timeout_secs: typing.Optional[float] = None
  train_dir_lock: str = train_dir_lock.FLOCK


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """What one process of a training run does, validated.

  A ps task has only the first four attributes; the parts are None there.

  Attributes:
    task: this process's ClusterTask, None without a cluster.
    master: the session target ('' for in-process; a cluster task trains
      against its own server, known only once the server starts).
    is_chief: whether this process initialises, checkpoints and summarises.
    num_workers: worker replicas in the run.
    deployment, precision, sync_batch_norm, update, optimizer, plan,
      inputs, model, loop, fine_tune: the parts the module docstring lists.
    label_smoothing: of the cross-entropy loss.
    random_seed: graph-level seed of the initialisers and dropout; None:
      random.
    srun_step: the tasks are those of a srun step (--slurm): a ps task
      ends by itself once every worker has ended (nothing else stops it),
      and a second SIGTERM does not stop a worker at once (Slurm repeats
      its SIGTERM; its SIGKILL is the hard stop).
  """
  task: typing.Optional[cluster.ClusterTask]
  master: str
  is_chief: bool
  num_workers: int
  deployment: typing.Optional[model_deploy.DeploymentConfig] = None
  precision: str = 'float32'
  sync_batch_norm: bool = False
  update: typing.Optional[deploy_update.UpdateOptions] = None
  optimizer: typing.Optional[optimizers.OptimizerConfig] = None
  plan: typing.Optional[schedule.BatchPlan] = None
  inputs: typing.Optional[inputs_lib.InputConfig] = None
  model: typing.Optional[lookup.ModelAndData] = None
  loop: typing.Optional[LoopConfig] = None
  fine_tune: typing.Optional[fine_tune_lib.FineTuneConfig] = None
  label_smoothing: float = 0.0
  random_seed: typing.Optional[int] = None
  srun_step: bool = False

  @property
  def is_ps(self):
    return self.task is not None and self.task.is_ps

  @property
  def sync_optimizer_replicas(self):
    """(replicas_to_aggregate, total replicas) with --sync_replicas, else
    None."""
    if not self.optimizer.sync_replicas:
      return None
    return self.optimizer.replicas_to_aggregate, self.num_workers

  @property
  def async_workers(self):
    """Whether several workers step asynchronously on shared ps tasks: each
    update claims its step up to the last, and the chief's checkpoints
    save a snapshot of the global step (training/last_step.py)."""
    return bool(self.deployment.num_ps_tasks and self.num_workers > 1 and
                not self.optimizer.sync_replicas)

  @property
  def choices(self):
    """The checkpoint_fit.Choices a refused checkpoint is compared with."""
    return checkpoint_fit.Choices(self.model.model_name,
                                  self.inputs.dataset_name,
                                  self.inputs.labels_offset)


def from_flags(flag_values, environ=None):
  """Validates the flags and the cluster; returns a RunConfig.

  Args:
    flag_values: the parsed absl FlagValues (FLAGS) or a FlagSnapshot.
    environ: where TF_CONFIG is read; os.environ by default.

  Raises:
    UsageError: with one line per problem found.
  """
  snapshot = FlagSnapshot.read(flag_values)
  problems = Problems()
  _check_values(snapshot, problems)
  task = problems.attempt(_cluster_task, snapshot,
                          os.environ if environ is None else environ)
  if task is not None:
    _check_against_cluster(snapshot, task, problems)
  num_workers = task.num_workers if task else snapshot.worker_replicas
  _check_all_reduce(snapshot, num_workers, task, problems)
  _check_sync_replicas(snapshot, num_workers, task, problems)
  if task is not None and task.is_ps:
    problems.raise_if_any()
    return RunConfig(task, '', False, num_workers,
                     srun_step=snapshot.slurm)

  deployment = None
  if not problems:
    deployment = problems.attempt(_deployment_config, snapshot, task)
  model = problems.attempt(
      lookup.model_and_data, snapshot, is_training=True,
      weight_decay=snapshot.weight_decay,
      batch_norm_decay=snapshot.batch_norm_decay,
      quantize_delay=(snapshot.quantize_delay
                      if snapshot.quantize_delay >= 0 else None))
  if model is not None:
    flag_checks.check_image_size('train_image_size',
                                 snapshot.train_image_size, model, problems)
  checkpoint = None
  if snapshot.checkpoint_path:
    checkpoint = problems.attempt(resume_check.readable_checkpoint,
                                  snapshot.checkpoint_path)
  problems.raise_if_any()
  return _worker_config(snapshot, task, deployment, model, checkpoint)


def _worker_config(f, task, deployment, model, checkpoint):
  """The RunConfig of a worker from its validated flags: each part built
  once, the plan from the other parts."""
  update = deploy_update.UpdateOptions(
      accumulation_steps=f.accumulation_steps,
      clip_gradient_norm=f.clip_gradient_norm,
      replica_averaging_steps=f.replica_averaging_steps,
      gradient_compression=f.gradient_compression,
      all_reduce_buffer_bytes=f.all_reduce_buffer_bytes)
  optimizer = _from_flags(optimizers.OptimizerConfig, f, name=f.optimizer)
  inputs = _from_flags(
      inputs_lib.InputConfig, f,
      preprocessing_name=f.preprocessing_name or f.model_name,
      image_size=f.train_image_size or model.network_fn.default_image_size)
  fine_tuning = _from_flags(
      fine_tune_lib.FineTuneConfig, f, checkpoint=checkpoint,
      checkpoint_exclude_scopes=tuple(
          fine_tune_lib.split_scopes(f.checkpoint_exclude_scopes)),
      trainable_scopes=tuple(fine_tune_lib.split_scopes(f.trainable_scopes)))
  return RunConfig(
      task=task, master=f.master if task is None else '',
      is_chief=deployment.is_chief, num_workers=deployment.num_replicas,
      deployment=deployment, precision=f.precision,
      sync_batch_norm=f.sync_batch_norm, update=update, optimizer=optimizer,
      plan=schedule.plan_for(inputs.batch_size, model.dataset.num_samples,
                             deployment, update, optimizer),
      inputs=inputs, model=model, loop=_from_flags(LoopConfig, f),
      fine_tune=fine_tuning, label_smoothing=f.label_smoothing,
      random_seed=f.random_seed, srun_step=f.slurm)


def _from_flags(part, f, **values):
  """The dataclass `part` with `values`; every other field is the flag of
  its name."""
  for field in dataclasses.fields(part):
    if field.name not in values:
      values[field.name] = getattr(f, field.name)
  return part(**values)


def _check_values(f, problems):
  flag_checks.check_numbers(f, flag_checks.TRAIN_RANGES, problems)
  for name, known in _CHOICES:
    value = getattr(f, name)
    problems.check(value in known, '--%s=%s is not known; use one of %s'
                   % (name, value, ', '.join(known)))
  _check_quantize_delay(f, problems)
  if problems.check(bool(f.train_dir), '--train_dir is required'):
    problems.attempt(_check_writable, f.train_dir)
    problems.attempt(checkpoint_state.check, f.train_dir)


def _check_quantize_delay(f, problems):
  """-1 (float training) or the step quantization-aware training starts,
  in float32 and with the batch norm of each clone."""
  if not problems.check(f.quantize_delay >= -1,
                        '--quantize_delay=%d: give -1 (no quantization) or '
                        'the step from which to quantize, >= 0'
                        % f.quantize_delay) or f.quantize_delay == -1:
    return
  problems.check(f.precision == 'float32',
                 '--quantize_delay=%d with --precision=%s: quantization-aware '
                 'training computes in float32; drop --precision'
                 % (f.quantize_delay, f.precision))
  problems.check(not f.sync_batch_norm,
                 '--quantize_delay=%d with --sync_batch_norm: the folded '
                 'batch norm takes each clone\'s own statistics; drop '
                 '--sync_batch_norm' % f.quantize_delay)


def _check_writable(train_dir):
  """train_dir is a writable directory, or can be created as one."""
  path = os.path.abspath(train_dir)
  existing = path
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise UsageError('--train_dir=%s cannot be created: %s is a file, not a '
                     'directory; give a directory path' % (train_dir,
                                                           existing))
  if not os.access(existing, os.W_OK | os.X_OK):
    raise UsageError('--train_dir=%s is not writable (%s does not let this '
                     'user write); give a writable directory'
                     % (train_dir, existing))


def _cluster_task(f, environ):
  given_task = f.task if f.given('task') else None
  try:
    task = cluster.from_flags_and_env(f.ps_hosts, f.worker_hosts, f.job_name,
                                      given_task, environ=environ)
    if f.slurm:  # Read by TensorFlow's resolver from os.environ.
      task = slurm.from_flags(
          f.num_ps_tasks, f.worker_replicas if f.given('worker_replicas')
          else None, f.slurm_port_base, given=task, given_task=given_task)
    return task
  except ValueError as e:
    raise UsageError(str(e)) from None


def _check_against_cluster(f, task, problems):
  """The cluster decides the worker and ps counts and the master."""
  problems.check(not f.master, '--master=%s: a task of a cluster (from %s) '
                 'trains against its own server; drop --master'
                 % (f.master, task.source))
  for name, value in (('worker_replicas', task.num_workers),
                      ('num_ps_tasks', task.num_ps_tasks)):
    problems.check(
        not f.given(name) or getattr(f, name) == value,
        '--%s=%s but the cluster from %s has %d; drop --%s'
        % (name, getattr(f, name), task.source, value, name))


_LAUNCH_EXAMPLE = ('python -m clusters.launch --num_ps 0 --num_workers 2 '
                   '-- train_image_classifier.py ...')


def _check_all_reduce(f, num_workers, task, problems):
  """Several workers without ps tasks all-reduce: that needs a cluster
  and is synchronous already."""
  problems.check(
      f.replica_averaging_steps is None or (task is not None
                                            and task.all_reduce),
      '--replica_averaging_steps=%s is for all-reduce workers: a cluster of '
      'several workers and no ps tasks; drop it' % f.replica_averaging_steps)
  problems.check(
      f.gradient_compression == 'none' or (task is not None
                                           and task.all_reduce),
      '--gradient_compression=%s compresses the all-reduce between workers: '
      'it needs a cluster of several workers and no ps tasks; drop it'
      % f.gradient_compression)
  problems.check(
      not f.given('all_reduce_buffer_bytes') or (task is not None
                                                 and task.all_reduce),
      '--all_reduce_buffer_bytes=%d sizes the all-reduce between workers: '
      'it needs a cluster of several workers and no ps tasks; drop it'
      % f.all_reduce_buffer_bytes)
  if task is None:
    problems.check(
        f.slurm or not deployment_config.uses_all_reduce(f.worker_replicas,
                                                         f.num_ps_tasks),
        '--worker_replicas=%d with --num_ps_tasks=0 all-reduces between '
        'worker tasks, which needs the cluster: give --worker_hosts, '
        '--job_name and --task or TF_CONFIG (%s starts one on this machine)'
        % (f.worker_replicas, _LAUNCH_EXAMPLE))
    return
  problems.check(
      not (task.all_reduce and f.sync_replicas),
      '--sync_replicas with the %d workers and no ps tasks of the cluster '
      'from %s: they all-reduce their gradients every step, which is '
      'synchronous already; drop --sync_replicas (SyncReplicasOptimizer '
      'needs ps tasks)' % (num_workers, task.source))


def _check_sync_replicas(f, num_workers, task, problems):
  if not f.sync_replicas or f.replicas_to_aggregate < 1:
    return
  where = ('the cluster from %s' % task.source if task
           else '--worker_replicas')
  problems.check(
      f.replicas_to_aggregate <= num_workers,
      '--replicas_to_aggregate=%d is more than the %d worker(s) of %s: a '
      'global step would never complete; use at most %d'
      % (f.replicas_to_aggregate, num_workers, where, num_workers))


def _deployment_config(f, task):
  """The DeploymentConfig of a worker: of its cluster task, or without a
  cluster of --task, --worker_replicas and --num_ps_tasks."""
  devices = dict(
      num_clones=f.num_clones, clone_on_cpu=f.clone_on_cpu,
      ps_strategy=f.ps_strategy, cache_variable_reads=f.cache_variable_reads,
      separate_cpu_devices=f.sync_batch_norm and (
          sync_batch_norm_lib.needs_separate_cpu_devices(f.num_clones,
                                                         f.clone_on_cpu)),
      collective_timeout_secs=f.collective_timeout_secs)
  try:
    if task is not None:
      return model_deploy.DeploymentConfig.for_task(task, **devices)
    return model_deploy.DeploymentConfig(
        replica_id=f.task, num_replicas=f.worker_replicas,
        num_ps_tasks=f.num_ps_tasks, **devices)
  except (ValueError, TypeError) as e:
    raise UsageError(str(e)) from None
