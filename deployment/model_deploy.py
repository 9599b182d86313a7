"""Deploys a Slim model over several clones and replicas (TF 2.21, graph mode).

The public API is the one of upstream TF-Slim's `deployment/model_deploy.py`,
so existing training code keeps working:

  * `DeploymentConfig` decides where clones, inputs, variables and the
    optimizer live, on one machine or on a cluster of ps and worker tasks.
  * `create_clones` builds the model once per clone, sharing variables.
  * `optimize_clones` computes each clone's loss and gradients on the clone's
    device and sums the gradients per variable.
  * `deploy` does both and returns the train op.

Example:

  config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
  with tf.device(config.inputs_device()):
    images, labels = ...

  def model_fn(images, labels):
    logits, _ = network_fn(images)
    tf.losses.softmax_cross_entropy(labels, logits)

  model = model_deploy.deploy(config, model_fn, [images, labels],
                              optimizer=tf.train.GradientDescentOptimizer(0.1))
  sess.run(model.train_op)  # returns the total loss

Differences from upstream: variables are placed on ps tasks whatever op type
creates them (TF2 resource variables included), and through a variable
creator so that variables made with plain `tf.get_variable` are placed too;
worker devices name the replica's task when there are several replicas;
sparse gradients stay sparse when summed; summaries are placed on the CPU.
"""

import collections
import contextlib
import dataclasses
import typing

from deployment import accumulation
from deployment import argument_checks
from deployment import collectives
from deployment import device_placement
from deployment import gradients
from deployment import precision as precision_lib
from tf2_compat import slim_compat
from deployment import sync_batch_norm as sync_batch_norm_lib
from deployment.deployment_config import DeploymentConfig
from tf2_compat.slim_compat import tf

__all__ = [
    'BroadcastVariablesHook', 'Clone', 'DeployedModel', 'DeploymentConfig',
    'broadcast_variables', 'create_clones', 'deploy', 'optimize_clones',
    'scalar_summary', 'session_config',
]

# `outputs`: whatever model_fn returned; `scope`: the clone's name scope
# ('' or 'clone_<i>/'); `device`: the clone's device string.
Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device'])

# `train_op` runs one step and yields the total loss; `summary_op` merges the
# deployment's summaries (None when there are none).
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])


def _placing_variables_on(device, clone_scopes, read_device=None):
  """A variable creator that builds every new variable under `device`.

  With a `read_device`, a variable's value is read once per step onto it
  (the variable's caching device) and every use takes that copy.

  Variables whose name takes the graph's name scope (Keras layers, plain
  tf.Variable) would be named `clone_0/...` with several clones and
  without the prefix with one, so a checkpoint would depend on the number
  of clones. The creator builds them outside the clone's name scope.
  (tf.get_variable, and so slim, names variables by variable scope and is
  unaffected.)
  """

  def creator(next_creator, **kwargs):
    if read_device is not None and kwargs.get('caching_device') is None:
      kwargs['caching_device'] = read_device
    scope = tf.get_default_graph().get_name_scope()
    for clone_scope in clone_scopes:
      if scope == clone_scope or scope.startswith(clone_scope + '/'):
        outside = scope[len(clone_scope) + 1:]
        with tf.name_scope(outside + '/' if outside else None), \
            tf.device(device):
          return next_creator(**kwargs)
    with tf.device(device):
      return next_creator(**kwargs)

  return creator


def session_config(config, **kwargs):
  """A tf.ConfigProto with the devices `config` places clones on.

  With separate_cpu_devices, TensorFlow makes one logical CPU device per
  clone device (it makes a single CPU device otherwise). With all-reduce
  replicas, it names worker 0 as the leader of the collective groups; give
  the same config to the replica's server (tf.distribute.Server(...,
  config=...)).

  Args:
    config: a DeploymentConfig.
    **kwargs: more tf.ConfigProto fields (e.g. allow_soft_placement=True).
  """
  proto = tf.ConfigProto(**kwargs)
  if config.all_reduce_replicas:
    # The task that resolves the replicas' collective groups: worker 0.
    proto.experimental.collective_group_leader = (
        '%s/replica:0/task:0' % config.worker_device.rsplit('/task:', 1)[0])
  if config.separate_cpu_devices:
    proto.device_count['CPU'] = max(config.num_local_devices,
                                    proto.device_count.get('CPU', 1))
  return proto


def sync_batch_norm_group_size(config):
  """How many clones' batches sync batch norm normalises together.

  Every clone of every replica with all-reduce replicas (they step
  together); the worker's own clones otherwise, since ps workers do not
  step together and their batches are not one batch.
  """
  replicas = config.num_replicas if config.all_reduce_replicas else 1
  return config.num_clones * replicas


def _clone_group(config, sync_batch_norm):
  """The CollectiveGroup of sync batch norm, or None without it."""
  if not sync_batch_norm:
    return None
  if config.clones_share_a_device and config.num_clones > 1:
    raise ValueError(
        'sync_batch_norm with %d clones all on %s: collective ops between '
        'members on one device never complete. Give each clone its own '
        'device: DeploymentConfig(clone_on_cpu=True, '
        'separate_cpu_devices=True), with a session from '
        'model_deploy.session_config(config)'
        % (config.num_clones, config.clone_device(0)))
  # Between processes every collective is timed: a worker can die mid-step.
  return collectives.CollectiveGroup(
      sync_batch_norm_group_size(config),
      group_key=collectives.CLONES_GROUP_KEY,
      timeout_seconds=config.collective_timeout_secs,
      time_first_only=not config.all_reduce_replicas)


def _replica_group(config, group_key):
  """A CollectiveGroup of the replicas (one member per worker)."""
  return collectives.CollectiveGroup(
      config.num_replicas, group_key=group_key,
      timeout_seconds=config.collective_timeout_secs)


def create_clones(config, model_fn, args=None, kwargs=None,
                  sync_batch_norm=False, precision='float32'):
  """Calls `model_fn` once per clone, each under its name scope and device.

  Variables are created by the first clone on `config.variables_device()` and
  reused by the others, so their number and names do not depend on
  `num_clones`. Summaries and string constants inside a clone are placed on
  the worker's CPU.

  Args:
    config: a DeploymentConfig.
    model_fn: builds the model; adds its losses to tf.GraphKeys.LOSSES (for
      example through tf.losses.*).
    args: positional arguments for model_fn.
    kwargs: keyword arguments for model_fn.
    sync_batch_norm: new; normalise every slim.batch_norm of model_fn in
      training with the statistics of all clones' batches together (see
      deployment/sync_batch_norm.py). Needs a device per clone.
    precision: new; 'float32', 'mixed_float16' or 'mixed_bfloat16' (see
      deployment/precision.py): variables a layer asks for in the low
      dtype are float32 variables, cast. model_fn casts its inputs to
      precision.compute_dtype(precision).

  Returns:
    A list of Clone tuples, one per clone.

  Raises:
    TypeError: model_fn is not callable.
    ValueError: sync_batch_norm with several clones on one device.
  """
  argument_checks.check_model_fn(model_fn)
  return _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                        precision)


def _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                   precision):
  args = args or []
  kwargs = kwargs or {}
  precision_lib.check_precision(precision)
  getter = (None if precision == 'float32'
            else precision_lib.master_weights_getter)
  group = _clone_group(config, sync_batch_norm)
  clones = []
  variables_device = config.variables_device()
  host_ops = device_placement.host_ops_to(config.inputs_device())
  clone_scopes = [config.clone_scope(i) for i in range(config.num_clones)
                  if config.clone_scope(i)]
  with slim_compat.identity_equality(), tf.variable_creator_scope(
      _placing_variables_on(variables_device, clone_scopes,
                            config.variables_read_device())):
    for i in range(config.num_clones):
      with tf.name_scope(config.clone_scope(i)) as clone_scope:
        clone_device = config.clone_device(i)
        with tf.device(clone_device), tf.device(host_ops):
          with tf.variable_scope(tf.get_variable_scope(),
                                 reuse=True if i > 0 else None,
                                 custom_getter=getter), \
              _synchronized(group, i):
            outputs = model_fn(*args, **kwargs)
        clones.append(Clone(outputs, clone_scope, clone_device))
  return clones


def _synchronized(group, member):
  if group is None:
    return contextlib.nullcontext()
  return sync_batch_norm_lib.synchronized(group, member)


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """The loss of one clone, on the clone's device.

  Returns:
    (loss, own_loss, regularization_loss): `loss` is what the clone
    differentiates, its own (scaled) loss plus `regularization_loss`;
    each is None when absent (`loss` when the clone has neither).
  """
  with tf.device(clone.device):
    own_loss = None
    clone_losses = tf.get_collection(tf.GraphKeys.LOSSES, clone.scope)
    if clone_losses:
      # In float32 whatever the layers computed in (mixed precision).
      own_loss = tf.add_n([tf.cast(l, tf.float32) for l in clone_losses],
                          name='clone_loss')
      if num_clones > 1:
        own_loss = tf.math.divide(own_loss, 1.0 * num_clones,
                                  name='scaled_clone_loss')
    regularization_loss = None
    if regularization_losses:
      regularization_loss = tf.add_n(
          [tf.cast(l, tf.float32) for l in regularization_losses],
          name='regularization_loss')
    parts = [l for l in (own_loss, regularization_loss) if l is not None]
    if not parts:
      return None, None, None
    return tf.add_n(parts), own_loss, regularization_loss


# `losses`: per clone, what it differentiates (None without any loss);
# `own_losses`: per clone, its LOSSES alone, scaled; `regularization_loss`:
# the regularization added to the first clone, or None; `results`: what
# per_clone_fn returned for each clone with a loss.
GatheredLosses = collections.namedtuple(
    'GatheredLosses',
    ['losses', 'own_losses', 'regularization_loss', 'results'])


def _gather_losses(clones, regularization_losses, per_clone_fn=None):
  """Losses of all clones; regularization goes to the first clone only.

  Returns:
    A GatheredLosses.
  """
  if regularization_losses is None:
    regularization_losses = tf.get_collection(
        tf.GraphKeys.REGULARIZATION_LOSSES)
  gathered = GatheredLosses([], [], None, [])
  for clone in clones:
    with tf.name_scope(clone.scope):
      loss, own_loss, regularization = _gather_clone_loss(
          clone, len(clones), regularization_losses)
      if regularization is not None:
        gathered = gathered._replace(regularization_loss=regularization)
      if loss is not None and per_clone_fn is not None:
        gathered.results.append(per_clone_fn(clone, loss))
    gathered.losses.append(loss)
    gathered.own_losses.append(own_loss)
    regularization_losses = None
  return gathered


def _total_loss(clone_losses):
  present = [loss for loss in clone_losses if loss is not None]
  if not present:
    raise ValueError(
        'no losses found: model_fn must add its losses to the '
        'tf.GraphKeys.LOSSES collection (e.g. with tf.losses.*) or the graph '
        'must have regularization losses')
  return tf.add_n(present, name='total_loss')


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """Computes each clone's loss and gradients and sums them across clones.

  A clone's loss is the sum of the LOSSES under its scope, divided by the
  number of clones when there are several; the regularization losses are
  added to the first clone only. Gradients are computed on each clone's
  device and summed per variable; sparse gradients stay sparse.

  Args:
    clones: list of Clone from `create_clones`.
    optimizer: a tf.compat.v1.train.Optimizer.
    regularization_losses: tensors to add to the first clone's loss; None
      gathers tf.GraphKeys.REGULARIZATION_LOSSES, [] adds none.
    **kwargs: passed to `optimizer.compute_gradients` (e.g. var_list,
      colocate_gradients_with_ops).

  Returns:
    (total_loss, grads_and_vars): total_loss is the op named 'total_loss';
    grads_and_vars has one pair per variable with a gradient.

  Raises:
    TypeError: optimizer is not a tf.compat.v1.train.Optimizer.
    ValueError: when no clone has a loss.
  """
  argument_checks.check_optimizer(optimizer, 'optimize_clones')
  total_loss, grads_and_vars, _ = _optimize_clones(
      clones, optimizer, regularization_losses, **kwargs)
  return total_loss, grads_and_vars


def _optimize_clones(clones, optimizer, regularization_losses,
                     loss_scale=None, **kwargs):
  def compute(clone, clone_loss):
    with tf.device(clone.device):
      if loss_scale is not None:
        clone_loss = loss_scale.scaled(clone_loss)
      return optimizer.compute_gradients(clone_loss, **kwargs)

  gathered = _gather_losses(clones, regularization_losses, compute)
  total_loss = _total_loss(gathered.losses)
  grads_and_vars = gradients.sum_clones_gradients(gathered.results)
  if loss_scale is not None:
    grads_and_vars = loss_scale.unscaled(grads_and_vars)
  return total_loss, grads_and_vars, gathered


def scalar_summary(tag, value):
  """A scalar summary whose tag is exactly `tag`.

  tf.summary.scalar names the tag after its op, which the graph makes
  unique: next to an op named 'total_loss' the tag would be 'total_loss_1'.
  """
  summary = tf.raw_ops.ScalarSummary(tags=tag, values=value, name=tag)
  tf.add_to_collection(tf.GraphKeys.SUMMARIES, summary)
  return summary


def _loss_summaries(clones, gathered, total_loss):
  """A clone's own loss (as upstream: scaled, without regularization), the
  regularization loss and the total loss."""
  summaries = []
  for clone, own_loss in zip(clones, gathered.own_losses):
    if own_loss is not None:
      tag = '/'.join(p for p in ('Losses', clone.scope.rstrip('/'),
                                 'clone_loss') if p)
      summaries.append(scalar_summary(tag, own_loss))
  if gathered.regularization_loss is not None:
    summaries.append(scalar_summary('Losses/regularization_loss',
                                    gathered.regularization_loss))
  summaries.append(scalar_summary('total_loss', total_loss))
  return summaries


def _gradient_summaries(grads_and_vars):
  summaries = []
  for grad, var in grads_and_vars:
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    summaries.append(tf.summary.histogram(var.op.name + '/gradient', values))
    summaries.append(tf.summary.scalar(var.op.name + '/gradient_norm',
                                       tf.global_norm([values])))
  return summaries


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, var_list=None, update_ops=None,
           variable_averages=None, variables_to_average=None,
           summaries=None, sync_batch_norm=False, accumulation_steps=1,
           clip_gradient_norm=None, precision='float32', loss_scale=None,
           all_reduce_buffer_bytes=collectives.DEFAULT_BUFFER_BYTES,
           replica_averaging_steps=None):
  """Builds the clones, their losses and (with an optimizer) the train op.

  The update ops (e.g. batch-norm moving averages) of the first clone run
  with every step. The global step is created on the variables device, or
  reused if it exists.

  The arguments after `summarize_gradients` are new (upstream had none);
  their defaults give upstream's result. Those that name variables may be
  functions without arguments: deploy calls them once the clones are built,
  when the model's variables exist.

  Example, a training script's deployment with sync replicas and moving
  averages of the weights:

    optimizer = tf.train.SyncReplicasOptimizer(
        tf.train.MomentumOptimizer(rate, 0.9), replicas_to_aggregate=2,
        total_num_replicas=2)
    model = model_deploy.deploy(
        config, clone_fn, optimizer=optimizer,
        var_list=lambda: slim.get_trainable_variables('InceptionV3/Logits'),
        variable_averages=tf.train.ExponentialMovingAverage(0.9999, step))
    hook = optimizer.make_session_run_hook(config.is_chief)

  Args:
    config: a DeploymentConfig.
    model_fn: see `create_clones`.
    args: positional arguments for model_fn.
    kwargs: keyword arguments for model_fn.
    optimizer: a tf.compat.v1.train.Optimizer, possibly a
      tf.train.SyncReplicasOptimizer, or None to build only the losses (for
      evaluation).
    summarize_gradients: add a histogram and a norm summary per gradient.
    var_list: the variables to train (a list, or a function returning one);
      None trains every trainable variable.
    update_ops: more ops to run with every step (a list, or a function
      returning one), besides the first clone's UPDATE_OPS.
    variable_averages: a tf.train.ExponentialMovingAverage to apply to
      `variables_to_average` after each update. With a SyncReplicasOptimizer
      it is applied once per global step, by the chief (as upstream's
      script did); otherwise with every step, to the updated weights
      (upstream's script ran it beside the update, reading the weights
      before or after it).
    variables_to_average: a list, or a function returning one; None: the
      model variables (slim.get_model_variables()).
    summaries: more summary tensors to merge into `summary_op`.
    sync_batch_norm: normalise with the statistics of all clones' batches
      (see `create_clones`).
    accumulation_steps: k >= 1; with k > 1 each run of `train_op` is a
      micro-step that accumulates the gradients, and every k-th run applies
      their mean: one update on batch x clones x k examples; the global
      step counts updates (see deployment/accumulation.py).
    clip_gradient_norm: if set (> 0), clip the gradients by their global
      norm, computed on the gradient that is applied: summed over the
      clones and averaged over the micro-steps, never per clone.
    precision: 'float32', 'mixed_float16' or 'mixed_bfloat16' (see
      `create_clones` and deployment/precision.py); losses are float32.
    loss_scale: a precision.LossScale for mixed_float16; None makes one
      with its defaults (start at 2^15, double after 2000 finite steps).
      Gradients are unscaled before clipping and applying; a non-finite
      one skips the update and halves the scale.
    all_reduce_buffer_bytes: with all-reduce replicas (several replicas,
      no ps tasks; see DeploymentConfig), the gradients summed over this
      worker's clones are packed into buffers of about this many bytes and
      averaged over the replicas, one collective per buffer, before the
      update; every replica applies the same update. Start the replicas
      from the chief's weights with `broadcast_variables` or
      `BroadcastVariablesHook`.
    replica_averaging_steps: k, for all-reduce replicas only: instead of
      averaging the gradients every step, each replica applies its own and
      every k-th global step the replicas average the variables they train
      (the optimizer's slots stay each replica's own). Nothing crosses the
      network in between, except sync batch norm's statistics if asked
      for. With k = 1 (and SGD or momentum) the result is
      that of averaging the gradients.

  Returns:
    A DeployedModel. `train_op` (named 'train_op', None without optimizer)
    runs the update ops and the gradient step and yields the total loss;
    `summary_op` merges the summaries of the graph and of the first clone,
    the loss summaries and `summaries`, all placed on the CPU.

  Raises:
    TypeError: model_fn is not callable, or optimizer is neither None nor a
      tf.compat.v1.train.Optimizer (a string, a Keras optimizer).
    ValueError: no clone has a loss; variable_averages without an
      optimizer, with nothing to average, or given twice (to deploy and to
      the SyncReplicasOptimizer); sync_batch_norm with clones sharing a
      device; accumulation_steps or clip_gradient_norm out of range.
  """
  argument_checks.check_model_fn(model_fn)
  if optimizer is not None:
    argument_checks.check_optimizer(optimizer, 'deploy')
  options = _TrainingOptions(
      summarize_gradients, var_list, update_ops, variable_averages,
      variables_to_average, summaries or [], accumulation_steps,
      clip_gradient_norm, precision, loss_scale, all_reduce_buffer_bytes,
      replica_averaging_steps)
  options.check(optimizer)
  if replica_averaging_steps is not None and not config.all_reduce_replicas:
    raise ValueError(
        'replica_averaging_steps=%r needs all-reduce replicas (several '
        'replicas and no ps tasks), got %r'
        % (replica_averaging_steps, config))
  with slim_compat.identity_equality():
    # The graph's summaries so far; of the clones', only the first's.
    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
    with tf.device(config.variables_device()):
      global_step = tf.train.get_or_create_global_step()
    clones = _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                            precision)
    return _deploy_clones(config, clones, optimizer, global_step, options,
                          summaries)


def _called(value):
  """`value()` if it is a function, else `value` (None stays None)."""
  return value() if callable(value) else value


def _variables_to_average(variables_to_average):
  if variables_to_average is None:
    variables_to_average = tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)
  variables_to_average = list(_called(variables_to_average))
  if not variables_to_average:
    raise ValueError(
        'variable_averages: no variables to average; model_fn created no '
        'model variables (slim layers add theirs), so pass '
        'variables_to_average')
  return variables_to_average


def _give_averages_to_sync_optimizer(optimizer, variable_averages,
                                     variables):
  """Makes the chief apply the averages after each aggregated update.

  SyncReplicasOptimizer does that itself, but takes the variables only at
  construction, before the clones (and so the variables) exist.
  """
  # pylint: disable=protected-access
  if optimizer._variable_averages is not None:
    raise ValueError('variable_averages given both to deploy() and to the '
                     'SyncReplicasOptimizer; give it to deploy() only')
  optimizer._variable_averages = variable_averages
  optimizer._variables_to_average = variables
  # pylint: enable=protected-access


@dataclasses.dataclass(frozen=True)
class _TrainingOptions:
  """deploy()'s arguments about the train op (see deploy's docstring)."""
  summarize_gradients: bool
  var_list: typing.Any
  update_ops: typing.Any
  variable_averages: typing.Any
  variables_to_average: typing.Any
  summaries: list
  accumulation_steps: int
  clip_gradient_norm: typing.Optional[float]
  precision: str
  loss_scale: typing.Any
  all_reduce_buffer_bytes: int
  replica_averaging_steps: typing.Optional[int]

  def check(self, optimizer):
    if self.variable_averages is not None and optimizer is None:
      raise ValueError('variable_averages needs an optimizer: averages are '
                       'applied after each update')
    steps = self.accumulation_steps
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
      raise ValueError('accumulation_steps must be an integer >= 1, got %r'
                       % (steps,))
    if self.clip_gradient_norm is not None and not (
        self.clip_gradient_norm > 0):
      raise ValueError('clip_gradient_norm must be > 0 (or None: no '
                       'clipping), got %r' % (self.clip_gradient_norm,))
    precision_lib.check_precision(self.precision)
    every = self.replica_averaging_steps
    if every is not None and (isinstance(every, bool) or not isinstance(
        every, int) or every < 1):
      raise ValueError('replica_averaging_steps must be an integer >= 1 (or '
                       'None), got %r' % (every,))
    size = self.all_reduce_buffer_bytes
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
      raise ValueError('all_reduce_buffer_bytes must be an integer >= 1, got '
                       '%r' % (size,))
    if self.loss_scale is not None and self.precision != 'mixed_float16':
      raise ValueError('loss_scale is for precision=\'mixed_float16\', got '
                       'precision=%r' % (self.precision,))


def _clipped(grads_and_vars, clip_norm):
  grads, variables = zip(*grads_and_vars)
  clipped, _ = tf.clip_by_global_norm(list(grads), clip_norm)
  return list(zip(clipped, variables))


def _apply_fn(optimizer, global_step, options, variables_to_average):
  """fn(grads_and_vars) -> the update: clipping, the optimizer, averages."""
  sync = isinstance(optimizer, tf.train.SyncReplicasOptimizer)

  def apply(grads_and_vars):
    if options.clip_gradient_norm:
      grads_and_vars = _clipped(grads_and_vars, options.clip_gradient_norm)
    apply_op = optimizer.apply_gradients(grads_and_vars,
                                         global_step=global_step)
    if variables_to_average is None or sync:
      return apply_op
    # Averages of the updated weights (the shadow variables themselves are
    # created outside these dependencies, by init_scope).
    with tf.control_dependencies([apply_op]):
      return tf.group(apply_op, options.variable_averages.apply(
          variables_to_average))

  return apply


def _averaging_over_replicas(config, apply, buffer_bytes):
  """`apply` given the gradients averaged over the all-reduce replicas.

  Wraps the loss scale's finiteness check too, so that every replica sees
  the same gradients and takes the same branch (a replica that skipped the
  collective would leave the others waiting).
  """
  group = _replica_group(
      config, collectives.REPLICA_GRADIENTS_GROUP_KEY)

  def averaged_then_apply(grads_and_vars):
    return apply(collectives.all_reduce_mean_gradients(
        grads_and_vars, group, member=0, buffer_bytes=buffer_bytes))

  return averaged_then_apply


def _then_averaging_replicas(config, step_op, global_step, variables, every,
                             buffer_bytes):
  """step_op, then, when the global step reaches a multiple of `every`, the
  variables averaged over the replicas (all take that branch together:
  their global steps are equal)."""
  group = _replica_group(
      config, collectives.REPLICA_AVERAGING_GROUP_KEY)
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


def _deploy_clones(config, clones, optimizer, global_step, options,
                   summaries):
  summaries.update(options.summaries)
  first_clone = clones[0]
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_clone.scope)
  update_ops += list(_called(options.update_ops) or [])

  train_op = None
  with tf.device(config.optimizer_device()):
    if optimizer is not None:
      variables_to_average = None
      if options.variable_averages is not None:
        variables_to_average = _variables_to_average(
            options.variables_to_average)
        if isinstance(optimizer, tf.train.SyncReplicasOptimizer):
          _give_averages_to_sync_optimizer(
              optimizer, options.variable_averages, variables_to_average)
      compute_kwargs = {}
      if options.var_list is not None:
        compute_kwargs['var_list'] = list(_called(options.var_list))
      loss_scale = options.loss_scale
      if options.precision == 'mixed_float16' and loss_scale is None:
        loss_scale = precision_lib.LossScale()
      total_loss, grads_and_vars, gathered = _optimize_clones(
          clones, optimizer, None, loss_scale=loss_scale, **compute_kwargs)
      if options.summarize_gradients:
        summaries.update(_gradient_summaries(grads_and_vars))
      apply = _apply_fn(optimizer, global_step, options, variables_to_average)
      if loss_scale is not None:
        apply = loss_scale.apply_if_finite(apply)
        summaries.add(scalar_summary('loss_scale', loss_scale.scale))
      if config.all_reduce_replicas and not options.replica_averaging_steps:
        apply = _averaging_over_replicas(config, apply,
                                         options.all_reduce_buffer_bytes)
      if options.accumulation_steps > 1:
        step_op = accumulation.accumulate_then_apply(
            grads_and_vars, options.accumulation_steps, apply)
      else:
        step_op = apply(grads_and_vars)
      if options.replica_averaging_steps:
        step_op = _then_averaging_replicas(
            config, step_op, global_step, [v for _, v in grads_and_vars],
            options.replica_averaging_steps, options.all_reduce_buffer_bytes)
      with tf.control_dependencies([step_op] + update_ops):
        train_op = tf.identity(total_loss, name='train_op')
    else:
      gathered = _gather_losses(clones, None)
      total_loss = _total_loss(gathered.losses)

    summaries.update(tf.get_collection(tf.GraphKeys.SUMMARIES,
                                       first_clone.scope))
    summaries.update(_loss_summaries(clones, gathered, total_loss))
    summary_op = tf.summary.merge(sorted(summaries, key=lambda s: s.name),
                                  name='summary_op')
  return DeployedModel(train_op, summary_op, total_loss, clones)


def broadcast_variables(config, variables=None):
  """An op giving every all-reduce replica the chief's variable values.

  Run it once after the session is created (after the chief initialised
  or restored the model, and the other replicas initialised theirs): the
  chief sends, the others receive and assign. Without all-reduce replicas
  it is a no-op.

  Args:
    config: a DeploymentConfig.
    variables: what to broadcast; default: every global variable (the
      model, the optimizer's slots, the global step, moving averages).
  """
  variables = tf.global_variables() if variables is None else variables
  if not config.all_reduce_replicas or not variables:
    return tf.no_op(name='broadcast_variables')
  # Same order on every replica, whatever order the graph was built in.
  variables = sorted(variables, key=lambda v: v.op.name)
  with tf.device(config.optimizer_device()), \
      tf.name_scope('broadcast_variables'):
    values = collectives.broadcast(
        [v.read_value() for v in variables],
        _replica_group(config, collectives.REPLICA_BROADCAST_GROUP_KEY), 0,
        'broadcast_variables', is_source=config.is_chief)
    if config.is_chief:
      return tf.group(*values)
    return tf.group(*[v.assign(value, read_value=False)
                      for v, value in zip(variables, values)])


class BroadcastVariablesHook(tf.train.SessionRunHook):
  """Starts every all-reduce replica from the chief's variables.

  Builds `broadcast_variables(config)` in `begin()` (so after the model
  and the optimizer) and runs it once the session exists. Put it on every
  replica, before hooks that save or summarise.
  """

  def __init__(self, config):
    self._config = config
    self._op = None

  def begin(self):
    self._op = broadcast_variables(self._config)

  def after_create_session(self, session, coord):
    del coord
    session.run(self._op)
