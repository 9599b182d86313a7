"""One training step: `UpdateOptions`, and `train_step`, which builds it.

deploy() turns the clones' losses into one train step. How is a handful
of options (accumulation, clipping, the loss scale of mixed_float16, the
all-reduce between replicas, replica averaging), checked once, when an
UpdateOptions is made; deploy(update=...) hands the object on unchanged
to `train_step`, whose body is the step's stages in the order they run,
each a call to the module that owns it.

Example:

  options = update.UpdateOptions(accumulation_steps=4,
                                 clip_gradient_norm=5.0)
  model = model_deploy.deploy(config, model_fn, optimizer=optimizer,
                              update=options)
"""

import collections
import dataclasses
import typing

from deployment import accumulation
from deployment import argument_checks
from deployment import clone_losses
from deployment import collectives
from deployment import gradients
from deployment import precision as precision_lib
from deployment import variable_averages as variable_averages_lib
from tf2_compat.slim_compat import tf


@dataclasses.dataclass(frozen=True)
class UpdateOptions:
  """How the gradients of one step become an update; checked on creation.

  What shapes the clones (precision, sync batch norm) is not here: it is
  given to deploy() or create_clones() beside these options.

  Attributes:
    accumulation_steps: k >= 1; with k > 1 each run of the train op is a
      micro-step that accumulates the gradients, and every k-th run applies
      their mean: one update on batch x clones x k examples; the global
      step counts updates (see deployment/accumulation.py).
    clip_gradient_norm: if set (> 0), clip the gradients by their global
      norm, computed on the gradient that is applied: summed over the
      clones and averaged over the micro-steps (and replicas), never per
      clone.
    loss_scale: a precision.LossScale, for deploy(precision=
      'mixed_float16') only; None there makes one with its defaults
      (start at 2^15, double after 2000 finite steps; see
      precision.loss_scale_for). Gradients are unscaled before clipping
      and applying; a non-finite one skips the update and halves the
      scale.
    all_reduce_buffer_bytes: with all-reduce replicas (several replicas,
      no ps tasks; see DeploymentConfig), the gradients summed over this
      worker's clones are packed into buffers of at most this many bytes
      (a larger tensor is split over several) and averaged over the
      replicas, one collective per buffer, before the update; every
      replica applies the same update. Replica averaging
      packs the variables the same way.
    replica_averaging_steps: k, for all-reduce replicas only: instead of
      averaging the gradients every step, each replica applies its own and
      every k-th global step the replicas average the variables they train
      (the optimizer's slots stay each replica's own). Nothing crosses the
      network in between, except sync batch norm's statistics if asked
      for. With k = 1 (and SGD or momentum) the result is that of
      averaging the gradients. None: average the gradients every step.
    gradient_compression: 'none', 'fp16' or 'bf16', for all-reduce
      replicas only: what crosses the network in the all-reduce of the
      gradients (and of replica averaging's trained variables; the
      replica-mean variables always travel uncompressed). 'fp16' and 'bf16'
      send float32 values as 16-bit ones, halving the bytes, summed in 16
      bits and applied in 32 (see collectives.all_reduce_mean); values
      already 16-bit are sent as they are.

  Raises:
    ValueError: for a value out of range, naming it and the fix.
    TypeError: for a value of the wrong kind (clip_gradient_norm='5', a
      loss_scale that is not a precision.LossScale), naming it.
  """
  accumulation_steps: int = 1
  clip_gradient_norm: typing.Optional[float] = None
  loss_scale: typing.Any = None
  all_reduce_buffer_bytes: int = collectives.DEFAULT_BUFFER_BYTES
  replica_averaging_steps: typing.Optional[int] = None
  gradient_compression: str = 'none'

  def __post_init__(self):
    argument_checks.check_count('accumulation_steps',
                                self.accumulation_steps)
    # The norm is computed in float32: a bound beyond its range is inf
    # there, and inf / inf makes every weight NaN.
    argument_checks.check_float32_bound(
        'clip_gradient_norm', self.clip_gradient_norm, 'no clipping')
    if self.loss_scale is not None and not isinstance(
        self.loss_scale, precision_lib.LossScale):
      raise TypeError(
          'loss_scale must be a deployment.precision.LossScale (e.g. '
          'LossScale(initial_scale=2.0 ** 15)) or None (its defaults), got '
          '%s' % argument_checks.described(self.loss_scale))
    argument_checks.check_count('replica_averaging_steps',
                                self.replica_averaging_steps,
                                allow_none=True)
    argument_checks.check_count('all_reduce_buffer_bytes',
                                self.all_reduce_buffer_bytes)
    if (not isinstance(self.gradient_compression, str) or
        self.gradient_compression not in collectives.WIRE_DTYPES):
      raise ValueError('gradient_compression must be one of %s, got %r'
                       % (', '.join(map(repr, collectives.WIRE_DTYPES)),
                          self.gradient_compression))

  def check_deployment(self, config):
    """Raises ValueError if these options do not fit the DeploymentConfig."""
    if self.replica_averaging_steps is not None and (
        not config.all_reduce_replicas):
      raise ValueError(
          'replica_averaging_steps=%r needs all-reduce replicas (several '
          'replicas and no ps tasks), got %r'
          % (self.replica_averaging_steps, config))
    if self.gradient_compression != 'none' and not (
        config.all_reduce_replicas):
      raise ValueError(
          'gradient_compression=%r compresses the all-reduce between '
          'replicas, and %r has none (it needs several replicas and no ps '
          "tasks); use gradient_compression='none'"
          % (self.gradient_compression, config))

  @property
  def wire_dtype(self):
    """The dtype the all-reduce sends float32 values as, or None."""
    return collectives.WIRE_DTYPES[self.gradient_compression]


def replica_group(config, group_key):
  """A CollectiveGroup of the replicas (one member per worker)."""
  return collectives.CollectiveGroup(
      config.num_replicas, group_key=group_key,
      timeout_seconds=config.collective_timeout_secs)


# `op` runs one step; `total_loss` is the op 'total_loss'; `losses` the
# clones' clone_losses.GatheredLosses; `summaries` those of the gradients
# and of the loss scale.
TrainStep = collections.namedtuple(
    'TrainStep', ['op', 'total_loss', 'losses', 'summaries'])


def train_step(config, clones, optimizer, global_step, update,
               precision='float32', var_list=None, variable_averages=None,
               variables_to_average=None, summarize_gradients=False,
               update_ops=(), replica_mean_variables=()):
  """Builds one training step of `clones`, its stages in the order they run.

  The order, and why:

    1. the loss scaled (mixed_float16), each clone's gradients computed on
       its device and summed over the clones, then unscaled: everything
       after sees true gradients.
    2. accumulation (k > 1): the k micro-steps' mean goes on, every k-th
       run only; on the others nothing after it runs. So the network
       carries one gradient per update, and the finiteness check judges
       the mean, once per update.
    3. the all-reduce (all-reduce replicas without replica averaging):
       the gradients averaged over the replicas, so that all replicas
       check the same gradient below and take the same branch (a replica
       that skipped would leave the others waiting).
    4. the finiteness check (loss scale): a non-finite gradient skips the
       rest; the scale is updated either way.
    5. clipping, by the global norm of the gradient that is applied: after
       everything that sums or averages it.
    6. the optimizer's apply, which advances the global step; then the
       moving averages of the updated weights.
    7. replica averaging: every k-th global step, after the apply whose
       global step it reads, the variables averaged over the replicas
       (with the replica-mean variables, once the update ops set them,
       never compressed).
    8. the replica-mean variables (all-reduce replicas without replica
       averaging): once the update ops set them from this replica's batch,
       their mean over the replicas, every run, in one collective of their
       own, uncompressed: every replica then holds the same values. For a
       moving average of the batches' statistics (batch norm's, the
       quantization ranges) that is the moving average of the replicas'
       mean statistic.

  Call under the optimizer's device, once the clones exist.

  Args:
    config: the DeploymentConfig.
    clones: the Clones of model_deploy.create_clones.
    optimizer: a tf.compat.v1.train.Optimizer.
    global_step: the global step variable.
    update: an UpdateOptions (checked against `config` by the caller).
    precision: the clones' precision; mixed_float16 scales the loss (see
      precision.loss_scale_for).
    var_list: the variables to train; None: every trainable one.
    variable_averages, variables_to_average: see
      variable_averages.after_apply.
    summarize_gradients: add a histogram and a norm summary per gradient.
    update_ops: the ops that set `replica_mean_variables` (the first
      clone's UPDATE_OPS); with replica-mean variables, they run first.
    replica_mean_variables: variables each replica sets from its own batch
      rather than from the gradient (nets/quantize.py's ranges), kept
      identical over all-reduce replicas by stage 7 or 8; ignored without
      all-reduce replicas.

  Returns:
    A TrainStep.
  """
  # First: a SyncReplicasOptimizer must hold the averages before its
  # apply is built.
  average_weights = variable_averages_lib.after_apply(
      optimizer, variable_averages, variables_to_average)
  compute_kwargs = {} if var_list is None else {'var_list': var_list}

  # 1. Scaled, differentiated on each clone, summed, unscaled.
  loss_scale = precision_lib.loss_scale_for(precision, update.loss_scale)

  def gradients_of_scaled_loss(clone_loss):
    if loss_scale is not None:
      clone_loss = loss_scale.scaled(clone_loss)
    return optimizer.compute_gradients(clone_loss, **compute_kwargs)

  gathered, grads_and_vars = gradients.clone_gradients(
      clones, gradients_of_scaled_loss)
  total_loss = clone_losses.total_of(gathered.losses)
  if loss_scale is not None:
    grads_and_vars = loss_scale.unscaled(grads_and_vars)
  summaries = []
  if summarize_gradients:
    summaries += clone_losses.gradient_summaries(grads_and_vars)
  if loss_scale is not None:
    summaries.append(clone_losses.scalar_summary('loss_scale',
                                                 loss_scale.scale))
  averaging_replicas = update.replica_averaging_steps is not None

  def apply_update(grads_and_vars):
    """Stages 3 to 6, on the gradients accumulation passes on."""
    # 3. The all-reduce.
    if config.all_reduce_replicas and not averaging_replicas:
      grads_and_vars = collectives.all_reduce_mean_gradients(
          grads_and_vars,
          replica_group(config, collectives.REPLICA_GRADIENTS_GROUP_KEY),
          member=0, buffer_bytes=update.all_reduce_buffer_bytes,
          wire_dtype=update.wire_dtype)
    # 4. The finiteness check, around 5 and 6.
    if loss_scale is None:
      return clip_then_apply(grads_and_vars)
    return loss_scale.apply_if_finite(clip_then_apply)(grads_and_vars)

  def clip_then_apply(grads_and_vars):
    # 5. Clipping.
    if update.clip_gradient_norm:
      grads_and_vars = _clipped(grads_and_vars, update.clip_gradient_norm)
    # 6. The apply, then the moving averages.
    return average_weights(optimizer.apply_gradients(
        grads_and_vars, global_step=global_step))

  # 2. Accumulation, around 3 to 6.
  if update.accumulation_steps > 1:
    step_op = accumulation.accumulate_then_apply(
        grads_and_vars, update.accumulation_steps, apply_update)
  else:
    step_op = apply_update(grads_and_vars)
  statistics = (list(replica_mean_variables)
                if config.all_reduce_replicas else [])
  if statistics:  # 7 and 8 read the values this run's update ops set.
    step_op = tf.group(step_op, *update_ops)
  # 7. Replica averaging.
  if averaging_replicas:
    step_op = collectives.average_every(
        step_op, [v for _, v in grads_and_vars], global_step,
        update.replica_averaging_steps,
        replica_group(config, collectives.REPLICA_AVERAGING_GROUP_KEY), 0,
        update.all_reduce_buffer_bytes, update.wire_dtype,
        exact_variables=statistics)
  # 8. The replica-mean variables.
  elif statistics:
    with tf.control_dependencies([step_op]):
      step_op = collectives.assign_means(
          statistics,
          replica_group(config, collectives.REPLICA_STATISTICS_GROUP_KEY),
          0, 'replica_statistics', update.all_reduce_buffer_bytes)
  return TrainStep(step_op, total_loss, gathered, summaries)


def _clipped(grads_and_vars, clip_norm):
  grads, variables = zip(*grads_and_vars)
  clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm)
  return list(zip(clipped, variables))
