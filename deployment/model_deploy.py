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
sparse gradients stay sparse when summed; summaries are placed on the CPU;
MatMul and 16-bit convolution ops of CPU clones get faster gradients of
the same values (cpu_gradients.py).

Where the parts live: the update's options and the train step, its
stages in the order they run, in update.py; placement (device functions,
the variable creator) in device_placement.py; the clones' losses and
summaries in clone_losses.py. This module is about 400 lines for the
docstrings of the public entries.
"""

import collections
import contextlib
import warnings
import weakref

from deployment import argument_checks
from deployment import clone_losses
from deployment import collectives
from deployment import cpu_gradients
from deployment import device_placement
from deployment import gradients
from deployment import precision as precision_lib
from tf2_compat import slim_compat
from deployment import sync_batch_norm as sync_batch_norm_lib
from deployment import update as update_lib
# GatheredLosses is re-exported: model_deploy always offered it.
from deployment.clone_losses import GatheredLosses
from deployment.clone_losses import scalar_summary
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
# graph -> {id of a create_clones call's first Clone: the names of the ops
# of that call that cpu_gradients may have named}; for forgetting them.
_CLONE_OPS = weakref.WeakKeyDictionary()

# `train_op` runs one step and yields the total loss; `summary_op` merges the
# deployment's summaries (None when there are none).
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])


def session_config(config, **kwargs):
  """`config.session_config(**kwargs)`: the tf.ConfigProto with the devices
  `config` places clones on (see DeploymentConfig.session_config)."""
  return config.session_config(**kwargs)


# Re-exported: training scripts size their batch plan with it.
sync_batch_norm_group_size = sync_batch_norm_lib.group_size


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
  precision_lib.check_precision(precision)
  return _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                        precision)


def _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                   precision):
  args = args or []
  kwargs = kwargs or {}
  getter = (None if precision == 'float32'
            else precision_lib.master_weights_getter)
  group = (sync_batch_norm_lib.clones_group(config) if sync_batch_norm
           else None)
  clones = []
  graph = tf.get_default_graph()
  ops_before = len(graph.get_operations())
  variables_device = config.variables_device()
  host_ops = device_placement.host_ops_to(config.inputs_device())
  clone_scopes = [config.clone_scope(i) for i in range(config.num_clones)
                  if config.clone_scope(i)]
  with slim_compat.identity_equality(), tf.variable_creator_scope(
      device_placement.placing_variables_on(
          variables_device, clone_scopes, config.variables_read_device())):
    for i in range(config.num_clones):
      with tf.name_scope(config.clone_scope(i)) as clone_scope:
        clone_device = config.clone_device(i)
        with tf.device(clone_device), tf.device(host_ops), \
            cpu_gradients.on_cpu(clone_device):
          with tf.variable_scope(tf.get_variable_scope(),
                                 reuse=True if i > 0 else None,
                                 custom_getter=getter), \
              _synchronized(group, i):
            outputs = model_fn(*args, **kwargs)
        clones.append(Clone(outputs, clone_scope, clone_device))
  _CLONE_OPS.setdefault(graph, {})[id(clones[0])] = [
      op.name for op in graph.get_operations()[ops_before:]
      if op.type in cpu_gradients.GRADIENTS]
  return clones


def _forget_gradient_names(clones):
  """Takes cpu_gradients' names off every op of `clones` (from one
  create_clones call), so that the graph saved is TensorFlow's own; other
  clones keep theirs until optimized."""
  graph = tf.get_default_graph()
  names = _CLONE_OPS.get(graph, {}).pop(id(clones[0]), [])
  cpu_gradients.forget(graph, [graph.get_operation_by_name(name)
                               for name in names])


def _synchronized(group, member):
  if group is None:
    return contextlib.nullcontext()
  return sync_batch_norm_lib.synchronized(group, member)


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
  gathered, grads_and_vars = gradients.clone_gradients(
      clones, lambda loss: optimizer.compute_gradients(loss, **kwargs),
      regularization_losses)
  _forget_gradient_names(clones)
  return clone_losses.total_of(gathered.losses), grads_and_vars


# Long for its docstring only: the public entry documents every argument;
# the body checks them, builds the clones and hands the step to
# update.train_step.
def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, var_list=None, update_ops=None,
           variable_averages=None, variables_to_average=None,
           summaries=None, sync_batch_norm=False, precision='float32',
           update=None, replica_mean_variables=None, **update_fields):
  """Builds the clones, their losses and (with an optimizer) the train op.

  The update ops (e.g. batch-norm moving averages) of the first clone run
  with every step. The global step is created on the variables device, or
  reused if it exists.

  The arguments after `summarize_gradients` are new (upstream had none);
  their defaults give upstream's result. Those that name variables may be
  functions without arguments: deploy calls them once the clones are built,
  when the model's variables exist.

  Example, a training script's deployment with sync replicas, moving
  averages of the weights, and the gradients of 4 micro-steps per update:

    optimizer = tf.train.SyncReplicasOptimizer(
        tf.train.MomentumOptimizer(rate, 0.9), replicas_to_aggregate=2,
        total_num_replicas=2)
    model = model_deploy.deploy(
        config, clone_fn, optimizer=optimizer,
        var_list=lambda: slim.get_trainable_variables('InceptionV3/Logits'),
        variable_averages=tf.train.ExponentialMovingAverage(0.9999, step),
        update=update.UpdateOptions(accumulation_steps=4))
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
    sync_batch_norm, precision: how the clones are built; see
      `create_clones`. With mixed_float16 the update scales the loss (see
      update.UpdateOptions.loss_scale).
    update: an update.UpdateOptions: how the gradients become the update
      (accumulation, clipping, loss scale, the all-reduce between
      replicas, replica averaging); None: UpdateOptions(). It reaches
      update.train_step unchanged; that function's body is the step's
      stages in the order they run. With all-reduce replicas, start them
      from the chief's weights with `broadcast_variables` or
      `BroadcastVariablesHook`.
    replica_mean_variables: variables each replica sets from its own
      batches by the first clone's update ops, not by the gradient, such
      as batch norm's moving statistics or the quantization ranges of
      nets/quantize.py (a list, or a function returning one:
      `lambda: tf.get_collection(quantize.RANGES)`;
      train_image_classifier.replica_statistics gathers both).
      With all-reduce replicas they are averaged over the replicas after
      every step (see update.train_step), so that the replicas keep the
      same values; otherwise they are left as they are.
    **update_fields: deprecated, for one release: the fields of an
      UpdateOptions as keyword arguments (accumulation_steps=4), as the
      previous release took them; each call warns with a
      DeprecationWarning naming update=UpdateOptions(...).

  Returns:
    A DeployedModel. `train_op` (named 'train_op', None without optimizer)
    runs the update ops and the gradient step and yields the total loss;
    `summary_op` merges the summaries of the graph and of the first clone,
    the loss summaries and `summaries`, all placed on the CPU.

  Raises:
    TypeError: model_fn is not callable, or optimizer is neither None nor a
      tf.compat.v1.train.Optimizer (a string, a Keras optimizer); update
      is not an UpdateOptions; an unknown keyword argument.
    ValueError: no clone has a loss; variable_averages without an
      optimizer, with nothing to average, or given twice (to deploy and to
      the SyncReplicasOptimizer); sync_batch_norm with clones sharing a
      device; an update option out of range (see update.UpdateOptions) or
      not fitting `config` or `precision`; update= and a deprecated update
      keyword argument both given.
  """
  argument_checks.check_model_fn(model_fn)
  if optimizer is not None:
    argument_checks.check_optimizer(optimizer, 'deploy')
  if variable_averages is not None and optimizer is None:
    raise ValueError('variable_averages needs an optimizer: averages are '
                     'applied after each update')
  update = _update_options(update, update_fields)
  update.check_deployment(config)
  precision_lib.check_precision(precision)
  precision_lib.check_loss_scale(precision, update.loss_scale)
  with slim_compat.identity_equality():
    # The graph's summaries so far; of the clones', only the first's.
    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES)).union(
        summaries or [])
    with tf.device(config.variables_device()):
      global_step = tf.train.get_or_create_global_step()
    clones = _create_clones(config, model_fn, args, kwargs, sync_batch_norm,
                            precision)
    first_clone = clones[0]
    step_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_clone.scope)
    step_ops += list(_called(update_ops) or [])
    train_op = None
    with tf.device(config.optimizer_device()):
      if optimizer is None:
        gathered = clone_losses.gather_losses(clones, None)
        total_loss = clone_losses.total_of(gathered.losses)
      else:
        var_list = _called(var_list)
        step = update_lib.train_step(
            config, clones, optimizer, global_step, update, precision,
            var_list=None if var_list is None else list(var_list),
            variable_averages=variable_averages,
            variables_to_average=variables_to_average,
            summarize_gradients=summarize_gradients, update_ops=step_ops,
            replica_mean_variables=list(_called(replica_mean_variables)
                                        or []))
        with tf.control_dependencies([step.op] + step_ops):
          train_op = tf.identity(step.total_loss, name='train_op')
        total_loss, gathered = step.total_loss, step.losses
        summaries.update(step.summaries)
      summaries.update(tf.get_collection(tf.GraphKeys.SUMMARIES,
                                         first_clone.scope))
      summaries.update(
          clone_losses.loss_summaries(clones, gathered, total_loss))
      summary_op = tf.summary.merge(sorted(summaries, key=lambda s: s.name),
                                    name='summary_op')
    _forget_gradient_names(clones)
  return DeployedModel(train_op, summary_op, total_loss, clones)


# deploy()'s keyword arguments of the previous release, fields of an
# update.UpdateOptions now, taken flat for one more release (later fields,
# such as gradient_compression, only in an UpdateOptions).
_DEPRECATED_UPDATE_ARGUMENTS = (
    'accumulation_steps', 'clip_gradient_norm', 'loss_scale',
    'all_reduce_buffer_bytes', 'replica_averaging_steps')


def _update_options(update, update_fields):
  """deploy()'s UpdateOptions: `update` itself, UpdateOptions() for None,
  or one made of the deprecated flat keyword arguments (with a warning)."""
  unknown = sorted(set(update_fields) - set(_DEPRECATED_UPDATE_ARGUMENTS))
  if unknown:
    raise TypeError('deploy() got an unexpected keyword argument %r'
                    % unknown[0])
  if update is not None and not isinstance(update,
                                           update_lib.UpdateOptions):
    raise TypeError('update must be a deployment.update.UpdateOptions (or '
                    'None), got %r' % (update,))
  if not update_fields:
    return update_lib.UpdateOptions() if update is None else update
  names = ', '.join(sorted(update_fields))
  if update is not None:
    raise ValueError(
        'deploy() got update=%r and also %s; give the options once: put '
        '%s in update=UpdateOptions(...)' % (update, names, names))
  given = ', '.join('%s=...' % name for name in sorted(update_fields))
  warnings.warn(
      'deploy(%s) is deprecated and goes in the next release; pass '
      'update=deployment.update.UpdateOptions(%s) instead'
      % (given, given), DeprecationWarning, stacklevel=3)
  return update_lib.UpdateOptions(**update_fields)


def _called(value):
  """`value()` if it is a function, else `value` (None stays None)."""
  return value() if callable(value) else value


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
        update_lib.replica_group(
            config, collectives.REPLICA_BROADCAST_GROUP_KEY), 0,
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
