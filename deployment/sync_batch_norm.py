"""Batch norm with the statistics of every clone's batch (sync batch norm).

With several clones, `slim.batch_norm` normalises each clone's batch with
the mean and variance of that batch alone: 8 clones of batch 4 normalise
like batch 4. Here, in training, each clone computes the sum, the sum of
squares and the count of its batch in float32, one all-reduce adds them
over all clones (and replicas), and every clone normalises with the mean
and variance of the union: 8 clones of batch 4 normalise like one batch of
32. Gradients flow through the all-reduce. Conv layers' 4-D inputs are
normalised by the fused kernel, given those statistics; other inputs by
the layer's unfused ops. In inference it is plain batch norm with the
moving averages.

The layer is tf-slim's own: `slim.batch_norm`'s arguments, its variables
(`beta`, `gamma`, `moving_mean`, `moving_variance`, same names, same
collections), so checkpoints move freely between synced and plain graphs.
The moving variance takes Bessel's correction over the global count, as
the fused kernel of plain batch norm does, so N synced clones of batch b
keep the same moving averages as one clone of batch N*b.

No network needs editing: inside `synchronized(group, member)` (which
`create_clones(..., sync_batch_norm=...)` enters for each clone) every
`slim.batch_norm` call, direct or through a layer's `normalizer_fn`, is
synchronized. It does so by pointing tf-slim's layer module at a batch-norm
layer class of its own for the duration of the graph building; nothing is
changed outside the `with` block, and other threads building graphs
meanwhile keep plain batch norm (or their own group).
"""

import contextlib
import functools
import threading

import numpy as np
from tf_slim.layers import layers as slim_layers

from deployment import collectives
from tf2_compat import patching
from tf2_compat.slim_compat import tf

_PlainLayer = slim_layers.normalization_layers.BatchNormalization


class SyncBatchNormalization(_PlainLayer):
  """tf.layers.BatchNormalization whose training statistics are all-reduced.

  In training, 4-D channels-last inputs (conv layers, the common case) are
  normalised by the fused kernel given the all-reduced statistics (see
  `_normalize`); other inputs take the layer's own unfused path, also with
  the all-reduced statistics.

  Args:
    group: the collectives.CollectiveGroup of the clones (and replicas).
    member: this clone's index among the group's members of this process.
    **kwargs: BatchNormalization's arguments; `fused` is ignored (the fused
      training kernel computes its own statistics).
  """

  def __init__(self, *args, group, member, **kwargs):
    kwargs['fused'] = False
    super().__init__(*args, **kwargs)
    self._group = group
    self._member = member
    self._global_count = None

  def call(self, inputs, training=None, mask=None):
    training = self._get_training_value(training)
    if not self._fused_path_fits(inputs, training, mask):
      return super().call(inputs, training=training, mask=mask)
    mean, variance = self._global_moments(inputs, [0, 1, 2], keep_dims=False)
    for variable, value in ((self.moving_mean, mean),
                            (self.moving_variance, variance)):
      self.add_update(functools.partial(
          self._assign_moving_average, variable, value, self.momentum, None))
    depth = inputs.shape[-1]
    scale = (tf.ones([depth]) if self.gamma is None
             else tf.cast(self.gamma, tf.float32))
    offset = (tf.zeros([depth]) if self.beta is None
              else tf.cast(self.beta, tf.float32))
    return _normalize(inputs, scale, offset, mean, variance, self.epsilon)

  def _fused_path_fits(self, inputs, training, mask):
    """Whether `call` can normalise with the fused kernel: training for
    sure, a dtype the kernel takes, 4-D channels-last, none of renorm,
    virtual batches, adjustment, masks."""
    training_value = (training if isinstance(training, bool)
                      else tf.get_static_value(training))
    return (training_value is not None and bool(training_value)
            and inputs.dtype in (tf.float16, tf.bfloat16, tf.float32)
            and inputs.shape.rank == 4 and list(self.axis) == [3]
            and not self.renorm and self.virtual_batch_size is None
            and self.adjustment is None and mask is None)

  def _global_moments(self, inputs, reduction_axes, keep_dims):
    """The mean and variance over every member's batch, in float32, shaped
    like a reduction of `inputs` over `reduction_axes` (with its reduced
    dimensions kept as 1s if `keep_dims`)."""
    with tf.name_scope('sync_moments'):
      mean, variance, self._global_count = _moments(
          tf.cast(inputs, tf.float32), reduction_axes, keep_dims,
          functools.partial(collectives.sum_over, group=self._group,
                            member=self._member), self.name)
      return mean, variance

  def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims,
                              mask=None):
    if mask is not None:
      raise ValueError('sync batch norm does not support masks')
    mean, variance = self._global_moments(inputs, reduction_axes, keep_dims)
    return (tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype))

  def _assign_moving_average(self, variable, value, momentum, inputs_size):
    if variable is self.moving_variance and self._global_count is not None:
      count = tf.cast(self._global_count, value.dtype)
      value = value * count / tf.maximum(count - 1.0, 1.0)
    return super()._assign_moving_average(variable, value, momentum,
                                          inputs_size)


def _moments(x, axes, keep_dims, sum_over, name):
  """The mean, variance and count of float32 `x` over `axes` of every
  member's x, with a gradient written out.

  Each member sums x and x^2 over `axes`; one all-reduce adds them, with
  the counts, over the members; mean = S / N and variance =
  max(Q / N - mean^2, 0). Their gradient is one all-reduce too: with
  upstream gradients dm and dv (dv zero where the max clipped), each
  member's dS = (dm - 2 mean dv) / N and dQ = dv / N are summed over the
  members (every member's x feeds every member's moments), and
  dx = dS + 2 x dQ. Written by hand, a batch norm's moments and their
  gradient take a few dozen ops where tf.gradients through the same
  arithmetic took about 160 (Inception v4: half of a synced graph).

  Args:
    x: float32, on this member's device.
    axes: the axes to reduce.
    keep_dims: whether the moments keep the reduced axes as 1s.
    sum_over: sum_over(tensor, name) all-reduces over the members.
    name: what is reduced, the same in every member (the layer's scope).

  Returns:
    (mean, variance, count): the moments shaped as
    reduce_sum(x, axes, keepdims=keep_dims), and the count of values per
    channel over every member, of shape [1].
  """
  rank = x.shape.rank
  axes = sorted(axis % rank for axis in axes)
  reduced = [x.shape[axis] for axis in axes]
  # Reducing leading axes leaves the trailing shape, which broadcasts
  # against x; other reductions are broadcast through the kept shape.
  broadcasts = keep_dims or axes == list(range(len(axes)))

  def flat(t):
    return t if t.shape.rank == 1 else tf.reshape(t, [-1])

  @tf.custom_gradient
  def moments(x):
    sums = tf.reduce_sum(x, axes, keepdims=keep_dims)
    squares = tf.reduce_sum(tf.square(x), axes, keepdims=keep_dims)
    if None not in reduced:
      local_count = tf.constant([float(np.prod(reduced))])
    else:
      local_count = tf.reshape(tf.cast(tf.size(x), tf.float32) /
                               tf.cast(tf.size(sums), tf.float32), [1])
    depth = sums.shape.num_elements()
    if depth is None:
      depth = tf.size(sums)
    total = sum_over(tf.concat([flat(sums), flat(squares), local_count], 0),
                     name=name)
    total_sums, total_squares, count = tf.split(total, [depth, depth, 1],
                                                num=3)

    def shaped(t):
      if t.shape.rank == sums.shape.rank:
        return t
      return tf.reshape(t, sums.shape if sums.shape.is_fully_defined()
                        else tf.shape(sums))

    mean = shaped(total_sums / count)
    # E[x^2] - E[x]^2 can come out slightly negative in float32.
    spread = shaped(total_squares / count) - tf.square(mean)
    variance = tf.maximum(spread, 0.0)

    def gradient(d_mean, d_variance, d_count):
      del d_count  # The count does not depend on x.
      d_variance = d_variance * tf.cast(spread >= 0.0, tf.float32)
      d_sums = flat((d_mean - 2.0 * mean * d_variance) / count)
      d_squares = flat(d_variance / count)
      d_sums, d_squares = tf.split(
          sum_over(tf.concat([d_sums, d_squares], 0), name=name + '/gradient'),
          2)
      if not broadcasts:
        # x's shape with its reduced axes 1.
        kept = tf.where_v2([axis in axes for axis in range(rank)], 1,
                           tf.shape(x))
        d_sums = tf.reshape(d_sums, kept)
        d_squares = tf.reshape(d_squares, kept)
      else:
        d_sums = shaped(d_sums)
        d_squares = shaped(d_squares)
      return d_sums + 2.0 * x * d_squares

    return (mean, variance, count), gradient

  return moments(x)


def _normalize(x, scale, offset, mean, variance, epsilon):
  """(x - mean) / sqrt(variance + epsilon) * scale + offset, channels last,
  by the fused kernel, differentiable in all five.

  The fused kernel's inference mode takes the statistics as inputs but its
  gradient treats them as constants. Here they depend on x (through the
  all-reduce), so their gradients are added from what the kernel's
  gradient computes anyway: with inv = 1 / sqrt(variance + epsilon),
  d/d mean = -scale * inv * sum(dy) = -scale * inv * d offset, and
  d/d variance = -scale * inv^2 / 2 * sum(dy * x_hat)
               = -scale * inv^2 / 2 * d scale.
  """

  @tf.custom_gradient
  def normalize(x, scale, offset, mean, variance):
    y, _, _ = tf.nn.fused_batch_norm(x, scale, offset, mean, variance,
                                     epsilon=epsilon, is_training=False)

    def gradient(dy):
      # The kernel's registered gradient (tf's _BaseFusedBatchNormGrad, in
      # inference mode, channels last), written out: tf.gradients would
      # first walk every op downstream of x, the rest of the network, again
      # for each batch norm (a minute of Inception v4's building).
      kernel = y.op
      dx, dscale, doffset, _, _ = tf.raw_ops.FusedBatchNormGradV3(
          y_backprop=dy, x=x, scale=scale, reserve_space_1=kernel.inputs[3],
          reserve_space_2=kernel.inputs[4],
          reserve_space_3=kernel.outputs[5],
          epsilon=kernel.get_attr('epsilon'), data_format='NHWC',
          is_training=False)
      inv = tf.math.rsqrt(variance + epsilon)
      return (dx, dscale, doffset, -scale * inv * doffset,
              -0.5 * scale * tf.square(inv) * dscale)

    return y, gradient

  return normalize(x, scale, offset, mean, variance)


# The (group, member) of the clone each thread is building, innermost last:
# graphs built at the same time in several threads (replicas of an
# in-process cluster, for example) each get their own.
_building = threading.local()
_patch_lock = threading.Lock()
_patch_users = 0


def _current():
  stack = getattr(_building, 'stack', None)
  return stack[-1] if stack else None


class _LayerModule:
  """Stands in for the module tf-slim takes BatchNormalization from: the
  synchronized layer inside `synchronized`, tf-slim's own elsewhere."""

  def __init__(self, original):
    self._original = original

  def BatchNormalization(self, *args, **kwargs):  # pylint: disable=invalid-name
    current = _current()
    if current is None:
      return _PlainLayer(*args, **kwargs)
    group, member = current
    return SyncBatchNormalization(*args, group=group, member=member, **kwargs)

  def __getattr__(self, name):
    return getattr(self._original, name)


def _unfused_instead(original_fused, batch_norm_function):
  """tf-slim's fused path: inside `synchronized`, redirected to the layer
  (and so synchronized); elsewhere unchanged."""

  def fused_batch_norm(inputs, **kwargs):
    if _current() is None:
      return original_fused(inputs, **kwargs)
    if (kwargs.get('updates_collections') is not tf.GraphKeys.UPDATE_OPS
        or kwargs.get('zero_debias_moving_mean')):
      raise ValueError(
          'sync batch norm needs slim.batch_norm\'s default '
          'updates_collections (tf.GraphKeys.UPDATE_OPS) and '
          'zero_debias_moving_mean=False; got updates_collections=%r, '
          'zero_debias_moving_mean=%r' % (
              kwargs.get('updates_collections'),
              kwargs.get('zero_debias_moving_mean')))
    kwargs.pop('zero_debias_moving_mean', None)
    return batch_norm_function(inputs, fused=False, **kwargs)

  return fused_batch_norm


# What tf-slim's layer module is pointed at while any thread is in
# `synchronized`, installed and put back as the compatibility layer's fixes
# are (tf2_compat/patching.py).
_TARGETS = (
    (slim_layers, 'normalization_layers', _LayerModule),
    (slim_layers, '_fused_batch_norm',
     lambda original: _unfused_instead(original,
                                       slim_layers.batch_norm.__wrapped__)),
)


def _patch():
  """Points tf-slim at the stand-ins while any thread is in `synchronized`."""
  global _patch_users
  with _patch_lock:
    if _patch_users == 0:
      patching.install(_TARGETS)
    _patch_users += 1


def _unpatch():
  global _patch_users
  with _patch_lock:
    _patch_users -= 1
    if _patch_users == 0:
      patching.uninstall(_TARGETS)


@contextlib.contextmanager
def synchronized(group, member):
  """Every slim.batch_norm built inside is synchronized over `group`.

  Only the calling thread's batch norms: another thread building a graph at
  the same time gets plain batch norm, or its own group.

  Args:
    group: a collectives.CollectiveGroup.
    member: the index of the clone being built.
  """
  stack = getattr(_building, 'stack', None)
  if stack is None:
    stack = _building.stack = []
  stack.append((group, member))
  _patch()
  try:
    yield
  finally:
    _unpatch()
    stack.pop()


def batch_norm(inputs, group, member, **kwargs):
  """slim.batch_norm, synchronized over `group`: the drop-in for code that
  builds its clones without create_clones.

  Args:
    inputs: the tensor to normalise, on this member's device.
    group: a collectives.CollectiveGroup of all members.
    member: this member's index in the group.
    **kwargs: slim.batch_norm's arguments (decay, epsilon, scale,
      is_training, scope, ...).
  """
  with synchronized(group, member):
    return slim_layers.batch_norm(inputs, **kwargs)


def group_size(config):
  """How many clones' batches sync batch norm normalises together, for a
  DeploymentConfig.

  Every clone of every replica with all-reduce replicas (they step
  together); the worker's own clones otherwise, since ps workers do not
  step together and their batches are not one batch.
  """
  replicas = config.num_replicas if config.all_reduce_replicas else 1
  return config.num_clones * replicas


def needs_separate_cpu_devices(num_clones, clone_on_cpu):
  """Whether sync batch norm's clones need DeploymentConfig(
  separate_cpu_devices=True): collectives between members on one device
  never complete, and several CPU clones share CPU:0 without it
  (clones_group refuses such a config)."""
  return bool(clone_on_cpu and num_clones > 1)


def clones_group(config):
  """The CollectiveGroup of sync batch norm for a DeploymentConfig: the
  clones of this worker, with those of every all-reduce replica.

  Raises:
    ValueError: several clones share one device.
  """
  if (needs_separate_cpu_devices(config.num_clones, config.clone_on_cpu)
      and not config.separate_cpu_devices):
    raise ValueError(
        'sync_batch_norm with %d clones all on %s: collective ops between '
        'members on one device never complete. Give each clone its own '
        'device: DeploymentConfig(clone_on_cpu=True, '
        'separate_cpu_devices=True), with a session from '
        'model_deploy.session_config(config)'
        % (config.num_clones, config.clone_device(0)))
  # Between processes every collective is timed: a worker can die mid-step.
  return collectives.CollectiveGroup(
      group_size(config),
      group_key=collectives.CLONES_GROUP_KEY,
      timeout_seconds=config.collective_timeout_secs,
      time_first_only=not config.all_reduce_replicas)
