"""The update as data: `UpdateOptions`, and `build_update`, which composes it.

deploy() turns the clones' summed gradients into one train step. How it
does so is a handful of options (accumulation, clipping, precision and the
loss scale, the all-reduce between replicas, replica averaging, sync batch
norm), checked here once, when an UpdateOptions is made; `build_update`
then wraps the optimizer's apply in one stage per option, in the order
its docstring gives and defends.

Example:

  options = update.UpdateOptions(accumulation_steps=4,
                                 clip_gradient_norm=5.0)
  model = model_deploy.deploy(config, model_fn, optimizer=optimizer,
                              **options.deploy_kwargs())
"""

import dataclasses
import typing

from deployment import accumulation
from deployment import argument_checks
from deployment import collectives
from deployment import precision as precision_lib
from tf2_compat.slim_compat import tf


@dataclasses.dataclass(frozen=True)
class UpdateOptions:
  """How the gradients of one step become an update; checked on creation.

  Attributes:
    accumulation_steps: k >= 1; with k > 1 each run of the train op is a
      micro-step that accumulates the gradients, and every k-th run applies
      their mean: one update on batch x clones x k examples; the global
      step counts updates (see deployment/accumulation.py).
    clip_gradient_norm: if set (> 0), clip the gradients by their global
      norm, computed on the gradient that is applied: summed over the
      clones and averaged over the micro-steps (and replicas), never per
      clone.
    precision: 'float32', 'mixed_float16' or 'mixed_bfloat16' (see
      model_deploy.create_clones and deployment/precision.py); losses are
      float32.
    loss_scale: a precision.LossScale, for mixed_float16 only; None makes
      one with its defaults (start at 2^15, double after 2000 finite
      steps) when the update is built. Gradients are unscaled before
      clipping and applying; a non-finite one skips the update and halves
      the scale.
    all_reduce_buffer_bytes: with all-reduce replicas (several replicas,
      no ps tasks; see DeploymentConfig), the gradients summed over this
      worker's clones are packed into buffers of about this many bytes and
      averaged over the replicas, one collective per buffer, before the
      update; every replica applies the same update. Replica averaging
      packs the variables the same way.
    replica_averaging_steps: k, for all-reduce replicas only: instead of
      averaging the gradients every step, each replica applies its own and
      every k-th global step the replicas average the variables they train
      (the optimizer's slots stay each replica's own). Nothing crosses the
      network in between, except sync batch norm's statistics if asked
      for. With k = 1 (and SGD or momentum) the result is that of
      averaging the gradients. None: average the gradients every step.
    sync_batch_norm: normalise every slim.batch_norm in training with the
      statistics of all clones' batches together (see
      deployment/sync_batch_norm.py); needs a device per clone.

  Raises:
    ValueError: for a value out of range, naming it and the fix.
  """
  accumulation_steps: int = 1
  clip_gradient_norm: typing.Optional[float] = None
  precision: str = 'float32'
  loss_scale: typing.Any = None
  all_reduce_buffer_bytes: int = collectives.DEFAULT_BUFFER_BYTES
  replica_averaging_steps: typing.Optional[int] = None
  sync_batch_norm: bool = False

  def __post_init__(self):
    argument_checks.check_count('accumulation_steps',
                                self.accumulation_steps)
    if self.clip_gradient_norm is not None and not (
        self.clip_gradient_norm > 0):
      raise ValueError('clip_gradient_norm must be > 0 (or None: no '
                       'clipping), got %r' % (self.clip_gradient_norm,))
    precision_lib.check_precision(self.precision)
    argument_checks.check_count('replica_averaging_steps',
                                self.replica_averaging_steps,
                                allow_none=True)
    argument_checks.check_count('all_reduce_buffer_bytes',
                                self.all_reduce_buffer_bytes)
    if self.loss_scale is not None and self.precision != 'mixed_float16':
      raise ValueError('loss_scale is for precision=\'mixed_float16\', got '
                       'precision=%r' % (self.precision,))

  def check_deployment(self, config):
    """Raises ValueError if these options do not fit the DeploymentConfig."""
    if self.replica_averaging_steps is not None and (
        not config.all_reduce_replicas):
      raise ValueError(
          'replica_averaging_steps=%r needs all-reduce replicas (several '
          'replicas and no ps tasks), got %r'
          % (self.replica_averaging_steps, config))

  def deploy_kwargs(self):
    """These options as model_deploy.deploy()'s keyword arguments."""
    # Not dataclasses.asdict, which would deep-copy the loss scale.
    return {field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)}

  def new_loss_scale(self):
    """The loss scale the update uses: the given one, a default one for
    mixed_float16, or None. Call under the optimizer's device."""
    if self.loss_scale is None and self.precision == 'mixed_float16':
      return precision_lib.LossScale()
    return self.loss_scale


def replica_group(config, group_key):
  """A CollectiveGroup of the replicas (one member per worker)."""
  return collectives.CollectiveGroup(
      config.num_replicas, group_key=group_key,
      timeout_seconds=config.collective_timeout_secs)


def build_update(config, options, grads_and_vars, apply_fn, global_step,
                 loss_scale=None):
  """The op of one train step: `apply_fn` wrapped in the stages `options`
  ask for.

  Each stage wraps fn(grads_and_vars) -> op. From the inside out:

    1. clipping: by the global norm of the gradient that is applied, so
       after everything that sums or averages it (clones, micro-steps,
       replicas) and after unscaling.
    2. the finiteness check (loss scale, mixed_float16): skips the apply
       of a non-finite gradient. It sits inside the all-reduce so that all
       replicas check the same averaged gradient and take the same branch
       (a replica that skipped would leave the others waiting), and inside
       accumulation so that it judges the k-step mean, once per update.
    3. the all-reduce (all-reduce replicas without replica averaging):
       averages the gradients over the replicas. Inside accumulation, so
       that the network carries one gradient per update, not per
       micro-step.
    4. accumulation (k > 1): sums k micro-steps and passes the mean on
       every k-th run only; on the others nothing inside runs.
    5. replica averaging: after the step, every k-th global step, averages
       the variables over the replicas. Outermost because it follows the
       apply and reads the global step it advanced.

  Args:
    config: the DeploymentConfig.
    options: an UpdateOptions (checked against `config` by the caller).
    grads_and_vars: the clones' summed (unscaled) gradients.
    apply_fn: fn(grads_and_vars) -> the op that applies them (the
      optimizer, the moving averages).
    global_step: the global step variable.
    loss_scale: the precision.LossScale of mixed_float16, or None.

  Returns:
    The op of one step.
  """
  step = apply_fn
  for wrap in _stages(config, options, global_step, loss_scale):
    if wrap is not None:
      step = wrap(step)
  return step(grads_and_vars)


def _stages(config, options, global_step, loss_scale):
  """build_update's wrappers, innermost first; None for a stage not used."""
  averaging_replicas = options.replica_averaging_steps is not None
  return (
      _clipping(options.clip_gradient_norm),
      loss_scale.apply_if_finite if loss_scale is not None else None,
      (_averaging_gradients(config, options.all_reduce_buffer_bytes)
       if config.all_reduce_replicas and not averaging_replicas else None),
      (_accumulating(options.accumulation_steps)
       if options.accumulation_steps > 1 else None),
      (_averaging_replicas(config, global_step,
                           options.replica_averaging_steps,
                           options.all_reduce_buffer_bytes)
       if averaging_replicas else None),
  )


def _clipping(clip_norm):
  if not clip_norm:
    return None

  def wrap(apply_fn):
    def clipped_then_apply(grads_and_vars):
      grads, variables = zip(*grads_and_vars)
      clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm)
      return apply_fn(list(zip(clipped, variables)))
    return clipped_then_apply

  return wrap


def _averaging_gradients(config, buffer_bytes):
  def wrap(apply_fn):
    group = replica_group(config, collectives.REPLICA_GRADIENTS_GROUP_KEY)

    def averaged_then_apply(grads_and_vars):
      return apply_fn(collectives.all_reduce_mean_gradients(
          grads_and_vars, group, member=0, buffer_bytes=buffer_bytes))
    return averaged_then_apply

  return wrap


def _accumulating(steps):
  def wrap(apply_fn):
    def accumulated(grads_and_vars):
      return accumulation.accumulate_then_apply(grads_and_vars, steps,
                                                apply_fn)
    return accumulated

  return wrap


def _averaging_replicas(config, global_step, every, buffer_bytes):
  """After the step, when the global step reaches a multiple of `every`,
  the trained variables averaged over the replicas (all take that branch
  together: their global steps are equal)."""

  def wrap(step_fn):
    def step_then_average(grads_and_vars):
      step_op = step_fn(grads_and_vars)
      variables = [v for _, v in grads_and_vars]
      group = replica_group(config, collectives.REPLICA_AVERAGING_GROUP_KEY)
      with tf.control_dependencies([step_op]):
        due = tf.equal(tf.math.floormod(global_step.read_value(),
                                        tf.cast(every, global_step.dtype)), 0)

      def average():
        means = collectives.all_reduce_mean(
            [v.read_value() for v in variables], group, 0, 'replica_average',
            buffer_bytes)
        return tf.group(*[v.assign(mean, read_value=False)
                          for v, mean in zip(variables, means)])

      return tf.cond(due, average, tf.no_op, name='average_replicas')
    return step_then_average

  return wrap
