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
import numbers

from deployment import device_placement
from deployment import gradients
from deployment import slim_compat
from deployment.slim_compat import tf

__all__ = [
    'Clone', 'DeployedModel', 'DeploymentConfig', 'create_clones',
    'deploy', 'optimize_clones',
]

# `outputs`: whatever model_fn returned; `scope`: the clone's name scope
# ('' or 'clone_<i>/'); `device`: the clone's device string.
Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device'])

# `train_op` runs one step and yields the total loss; `summary_op` merges the
# deployment's summaries (None when there are none).
DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])


def _check_int(name, value, minimum):
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise TypeError('%s must be an integer, got %r' % (name, value))
  if value < minimum:
    raise ValueError('%s must be >= %d, got %d' % (name, minimum, value))


class DeploymentConfig:
  """Where each part of a deployed model runs.

  Args:
    num_clones: model copies per replica (one per GPU, or on the CPU).
    clone_on_cpu: put every clone on CPU:0 instead of GPU:<i>.
    replica_id: index of this replica (worker task), in [0, num_replicas).
    num_replicas: number of worker tasks training together.
    num_ps_tasks: number of parameter-server tasks; 0 keeps variables on the
      worker's CPU.
    worker_job_name: cluster job name of the workers.
    ps_job_name: cluster job name of the parameter servers.
    ps_strategy: how variables are spread over ps tasks: 'round_robin'
      (upstream behaviour) or 'by_size' (each variable to the task with the
      fewest bytes so far).

  Raises:
    ValueError, TypeError: for a value out of range, naming it.
  """

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0,
               num_replicas=1, num_ps_tasks=0, worker_job_name='worker',
               ps_job_name='ps', ps_strategy='round_robin'):
    _check_int('num_clones', num_clones, 1)
    _check_int('num_replicas', num_replicas, 1)
    _check_int('num_ps_tasks', num_ps_tasks, 0)
    _check_int('replica_id', replica_id, 0)
    if replica_id >= num_replicas:
      raise ValueError(
          'replica_id must be in [0, num_replicas=%d), got %d'
          % (num_replicas, replica_id))
    if num_replicas > 1 and num_ps_tasks == 0:
      raise ValueError(
          'num_replicas=%d needs parameter servers: set num_ps_tasks >= 1'
          % num_replicas)
    if num_ps_tasks > 0:
      for flag, job in (('worker_job_name', worker_job_name),
                        ('ps_job_name', ps_job_name)):
        if not job or not isinstance(job, str):
          raise ValueError('%s must be a non-empty string when num_ps_tasks '
                           '> 0, got %r' % (flag, job))
    if ps_strategy not in device_placement.PS_STRATEGIES:
      raise ValueError('ps_strategy must be one of %s, got %r' % (
          ', '.join(device_placement.PS_STRATEGIES), ps_strategy))
    self._num_clones = num_clones
    self._clone_on_cpu = bool(clone_on_cpu)
    self._replica_id = replica_id
    self._num_replicas = num_replicas
    self._num_ps_tasks = num_ps_tasks
    self._worker_job_name = worker_job_name
    self._ps_job_name = ps_job_name
    self._ps_strategy = ps_strategy
    if num_ps_tasks == 0:
      self._worker_device = ''
      self._ps_device = ''
    else:
      self._ps_device = '/job:' + ps_job_name
      self._worker_device = '/job:' + worker_job_name
      # Without the task, every replica's clones would resolve to whichever
      # worker task the placer picks first (an upstream bug).
      if num_replicas > 1:
        self._worker_device += '/task:%d' % replica_id

  @property
  def num_clones(self):
    return self._num_clones

  @property
  def clone_on_cpu(self):
    return self._clone_on_cpu

  @property
  def replica_id(self):
    return self._replica_id

  @property
  def num_replicas(self):
    return self._num_replicas

  @property
  def num_ps_tasks(self):
    return self._num_ps_tasks

  @property
  def ps_device(self):
    return self._ps_device

  @property
  def worker_device(self):
    return self._worker_device

  @property
  def ps_strategy(self):
    return self._ps_strategy

  @property
  def is_chief(self):
    return self._replica_id == 0

  def __repr__(self):
    return ('DeploymentConfig(num_clones=%d, clone_on_cpu=%s, replica_id=%d, '
            'num_replicas=%d, num_ps_tasks=%d)' % (
                self._num_clones, self._clone_on_cpu, self._replica_id,
                self._num_replicas, self._num_ps_tasks))

  def _check_clone_index(self, clone_index):
    if isinstance(clone_index, bool) or not isinstance(
        clone_index, numbers.Integral) or not (
            0 <= clone_index < self._num_clones):
      raise ValueError('clone_index must be in [0, num_clones=%d), got %r'
                       % (self._num_clones, clone_index))

  def clone_device(self, clone_index):
    """Device of clone `clone_index`, e.g. '/job:worker/device:GPU:1'."""
    self._check_clone_index(clone_index)
    if self._clone_on_cpu:
      return self._worker_device + '/device:CPU:0'
    return self._worker_device + '/device:GPU:%d' % clone_index

  def clone_scope(self, clone_index):
    """Name scope of clone `clone_index`: '' for a single clone."""
    self._check_clone_index(clone_index)
    if self._num_clones == 1:
      return ''
    return 'clone_%d' % clone_index

  def optimizer_device(self):
    """Device for the optimizer's ops: the worker's CPU."""
    return self._worker_device + '/device:CPU:0'

  def inputs_device(self):
    """Device for the input pipeline: the worker's CPU."""
    return self._worker_device + '/device:CPU:0'

  def variables_device(self):
    """Device (string or device function) for the model's variables.

    Without ps tasks: '/device:CPU:0'. With ps tasks: a device function that
    gives each variable op a ps task (see `ps_strategy`) and leaves every
    other op's device unchanged. Each call returns a new function whose
    round-robin starts again at task 0.
    """
    if self._num_ps_tasks == 0:
      return '/device:CPU:0'
    return device_placement.PsDeviceChooser(
        self._num_ps_tasks, job=self._ps_device, device='/device:CPU:0',
        strategy=self._ps_strategy)

  def caching_device(self):
    """Where variable reads are cached: None on one machine.

    With ps tasks, a function that places a variable's read on the device of
    the op that reads it, so each worker reads a variable once per step.
    """
    if self._num_ps_tasks > 0:
      return lambda op: op.device
    return None


def _placing_variables_on(device):
  """A variable creator that builds every new variable under `device`."""

  def creator(next_creator, **kwargs):
    with tf.device(device):
      return next_creator(**kwargs)

  return creator


def create_clones(config, model_fn, args=None, kwargs=None):
  """Calls `model_fn` once per clone, each under its name scope and device.

  Variables are created by the first clone on `config.variables_device()` and
  reused by the others, so their number does not depend on `num_clones`.
  Summaries and string constants inside a clone are placed on the worker's
  CPU.

  Args:
    config: a DeploymentConfig.
    model_fn: builds the model; adds its losses to tf.GraphKeys.LOSSES (for
      example through tf.losses.*).
    args: positional arguments for model_fn.
    kwargs: keyword arguments for model_fn.

  Returns:
    A list of Clone tuples, one per clone.
  """
  args = args or []
  kwargs = kwargs or {}
  clones = []
  variables_device = config.variables_device()
  host_ops = device_placement.host_ops_to(config.inputs_device())
  with slim_compat.identity_equality(), tf.variable_creator_scope(
      _placing_variables_on(variables_device)):
    for i in range(config.num_clones):
      with tf.name_scope(config.clone_scope(i)) as clone_scope:
        clone_device = config.clone_device(i)
        with tf.device(clone_device), tf.device(host_ops):
          with tf.variable_scope(tf.get_variable_scope(),
                                 reuse=True if i > 0 else None):
            outputs = model_fn(*args, **kwargs)
        clones.append(Clone(outputs, clone_scope, clone_device))
  return clones


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """The loss of one clone, on the clone's device.

  Returns:
    (clone_loss, regularization_loss): clone_loss is None when the clone has
    neither losses nor regularization losses; regularization_loss is None
    when `regularization_losses` is empty.
  """
  with tf.device(clone.device):
    parts = []
    clone_losses = tf.get_collection(tf.GraphKeys.LOSSES, clone.scope)
    if clone_losses:
      clone_loss = tf.add_n(clone_losses, name='clone_loss')
      if num_clones > 1:
        clone_loss = tf.math.divide(clone_loss, 1.0 * num_clones,
                                    name='scaled_clone_loss')
      parts.append(clone_loss)
    regularization_loss = None
    if regularization_losses:
      regularization_loss = tf.add_n(regularization_losses,
                                     name='regularization_loss')
      parts.append(regularization_loss)
    if not parts:
      return None, None
    return tf.add_n(parts), regularization_loss


def _gather_losses(clones, regularization_losses, per_clone_fn=None):
  """Losses of all clones; regularization goes to the first clone only.

  Returns:
    (clone_losses, regularization_loss, results): the clone losses (None
    where a clone has none), the regularization loss tensor or None, and
    what per_clone_fn(clone, clone_loss) returned for each clone with a loss.
  """
  if regularization_losses is None:
    regularization_losses = tf.get_collection(
        tf.GraphKeys.REGULARIZATION_LOSSES)
  clone_losses = []
  results = []
  total_regularization = None
  for clone in clones:
    with tf.name_scope(clone.scope):
      clone_loss, regularization = _gather_clone_loss(
          clone, len(clones), regularization_losses)
      if regularization is not None:
        total_regularization = regularization
      if clone_loss is not None and per_clone_fn is not None:
        results.append(per_clone_fn(clone, clone_loss))
    clone_losses.append(clone_loss)
    regularization_losses = None
  return clone_losses, total_regularization, results


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
    ValueError: when no clone has a loss.
  """
  total_loss, grads_and_vars, _, _ = _optimize_clones(
      clones, optimizer, regularization_losses, **kwargs)
  return total_loss, grads_and_vars


def _optimize_clones(clones, optimizer, regularization_losses, **kwargs):
  def compute(clone, clone_loss):
    with tf.device(clone.device):
      return optimizer.compute_gradients(clone_loss, **kwargs)

  clone_losses, regularization_loss, clone_grads = _gather_losses(
      clones, regularization_losses, compute)
  total_loss = _total_loss(clone_losses)
  grads_and_vars = gradients.sum_clones_gradients(clone_grads)
  return total_loss, grads_and_vars, clone_losses, regularization_loss


def _loss_summaries(clones, clone_losses, regularization_loss, total_loss):
  summaries = []
  for clone, clone_loss in zip(clones, clone_losses):
    if clone_loss is not None:
      name = '/'.join(p for p in ('Losses', clone.scope.rstrip('/'),
                                  'clone_loss') if p)
      summaries.append(tf.summary.scalar(name, clone_loss))
  if regularization_loss is not None:
    summaries.append(tf.summary.scalar('Losses/regularization_loss',
                                       regularization_loss))
  summaries.append(tf.summary.scalar('total_loss', total_loss))
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
           summarize_gradients=False):
  """Builds the clones, their losses and (with an optimizer) the train op.

  The update ops (e.g. batch-norm moving averages) of the first clone run
  with every step. The global step is created on the variables device.

  Args:
    config: a DeploymentConfig.
    model_fn: see `create_clones`.
    args: positional arguments for model_fn.
    kwargs: keyword arguments for model_fn.
    optimizer: a tf.compat.v1.train.Optimizer, or None to build only the
      losses (for evaluation).
    summarize_gradients: add a histogram and a norm summary per gradient.

  Returns:
    A DeployedModel. `train_op` (named 'train_op', None without optimizer)
    runs the update ops and the gradient step and yields the total loss;
    `summary_op` merges the first clone's summaries and the loss summaries,
    all placed on the CPU.
  """
  with slim_compat.identity_equality():
    return _deploy(config, model_fn, args, kwargs, optimizer,
                   summarize_gradients)


def _deploy(config, model_fn, args, kwargs, optimizer, summarize_gradients):
  summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
  with tf.device(config.variables_device()):
    global_step = tf.train.get_or_create_global_step()

  clones = create_clones(config, model_fn, args, kwargs)
  first_clone = clones[0]
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_clone.scope)

  train_op = None
  with tf.device(config.optimizer_device()):
    if optimizer is not None:
      total_loss, grads_and_vars, clone_losses, regularization_loss = (
          _optimize_clones(clones, optimizer, None))
      if summarize_gradients:
        summaries.update(_gradient_summaries(grads_and_vars))
      apply_op = optimizer.apply_gradients(grads_and_vars,
                                           global_step=global_step)
      with tf.control_dependencies([apply_op] + update_ops):
        train_op = tf.identity(total_loss, name='train_op')
    else:
      clone_losses, regularization_loss, _ = _gather_losses(clones, None)
      total_loss = _total_loss(clone_losses)

    summaries.update(tf.get_collection(tf.GraphKeys.SUMMARIES,
                                       first_clone.scope))
    summaries.update(_loss_summaries(clones, clone_losses,
                                     regularization_loss, total_loss))
    summary_op = tf.summary.merge(sorted(summaries, key=lambda s: s.name),
                                  name='summary_op')
  return DeployedModel(train_op, summary_op, total_loss, clones)
