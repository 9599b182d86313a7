"""All-reduce between the clones (and replicas) of one deployment.

Built on TensorFlow's collective ops (`CollectiveReduceV2`), which run in
graph mode between devices of one session and, over gRPC, between tasks
of a cluster. Every member of a group builds the same op with the same
group key and instance key, on its own device; the op returns the sum over
all members. Two members on one device wait for each other forever, so
each member needs a device of its own (see
DeploymentConfig(separate_cpu_devices=True) for CPU clones).

Instance keys must match across clones and replicas without any exchange:
they are derived from the name of what is reduced (a batch-norm layer's
scope, which every clone and replica shares) and its occurrence count in
the member, in the order the graph is built.

On GPUs the ops ask for NCCL (`communication_hint='nccl'`). This machine
has no GPU, so that path is untested here.
"""

import itertools

from deployment import apply_when
from tf2_compat.slim_compat import tf

# The group keys of a deployment's collectives, one per use: instance keys
# count from 1 in every CollectiveGroup, so two uses sharing a key would
# clash. Replica groups span the workers of a cluster.
CLONES_GROUP_KEY = 1          # sync batch norm between the clones
REPLICA_GRADIENTS_GROUP_KEY = 2
REPLICA_BROADCAST_GROUP_KEY = 3
CLUSTER_CHECK_GROUP_KEY = 4   # the workers' start-up agreement
REPLICA_AVERAGING_GROUP_KEY = 5
REPLICA_STATISTICS_GROUP_KEY = 6  # the variables set from each batch

# Errors a collective raises when a member never arrives or the group breaks.
COLLECTIVE_ERRORS = (tf.errors.DeadlineExceededError,
                     tf.errors.UnavailableError, tf.errors.CancelledError)


class CollectiveGroup:
  """Members that reduce together, and the instance keys they agree on.

  Args:
    group_size: the number of members (e.g. clones x replicas).
    group_key: identifies the group; groups with other members need other
      keys.
    timeout_seconds: a collective whose members do not all arrive fails
      after this long (tf.errors.DeadlineExceededError) instead of waiting
      forever; None waits forever.
    time_first_only: give the timeout to the first collective each member
      builds, not to the others. TensorFlow (2.21) watches each timed
      collective with a thread of its own that sleeps the whole timeout,
      even when the collective completed long before: one per op per step
      piles up tens of thousands of threads with sync batch norm (two
      collectives per layer per clone per step). Where the members are the
      clones of one graph, timing the first is enough when every other
      collective of a clone depends on it (a chain of layers, a stem
      before branches): a clone missing from a step leaves the others
      waiting there, and once all have arrived every member is in the step
      (a failing op aborts the step's other collectives). A model whose
      batch norms sit in towers with inputs of their own, run one tower
      at a time, could wait untimed.
  """

  def __init__(self, group_size, group_key=1, timeout_seconds=60.0,
               time_first_only=False):
    if group_size < 1:
      raise ValueError('group_size must be >= 1, got %r' % (group_size,))
    if timeout_seconds is not None and timeout_seconds <= 0:
      raise ValueError('timeout_seconds must be > 0 or None, got %r'
                       % (timeout_seconds,))
    self.group_size = group_size
    self.group_key = group_key
    self.timeout_seconds = timeout_seconds
    self._time_first_only = time_first_only
    self._timed_members = set()
    self._keys = {}
    self._next_key = itertools.count(1)
    self._occurrences = {}

  def instance_key(self, name, member):
    """The key of the next collective named `name` built by `member`.

    The n-th collective that member builds under a name gets the same key
    as the n-th one every other member builds under it.
    """
    occurrence = self._occurrences.get((name, member), 0)
    self._occurrences[(name, member)] = occurrence + 1
    slot = (name, occurrence)
    if slot not in self._keys:
      self._keys[slot] = next(self._next_key)
    return self._keys[slot]

  def timeout_for(self, member):
    """The timeout_seconds attribute of `member`'s next collective (0: no
    timeout)."""
    if self.timeout_seconds is None:
      return 0.0
    if self._time_first_only:
      if member in self._timed_members:
        return 0.0
      self._timed_members.add(member)
    return float(self.timeout_seconds)


def _communication_hint(tensor):
  return 'nccl' if 'GPU' in (tensor.device or '').upper() else 'auto'


def _attributes(group, instance_key, tensor, member):
  """The attributes every collective op of `group` takes."""
  return dict(group_size=group.group_size, group_key=group.group_key,
              instance_key=instance_key,
              communication_hint=_communication_hint(tensor),
              timeout_seconds=group.timeout_for(member))


def _reduce(tensor, group, instance_key, member):
  return tf.raw_ops.CollectiveReduceV2(
      input=tensor, ordering_token=[], merge_op='Add', final_op='Id',
      **_attributes(group, instance_key, tensor, member))


def sum_over(tensor, group, name, member):
  """The sum of `tensor` over every member of `group`, not differentiable:
  for code that writes its own gradient (sync batch norm's moments).

  Args:
    tensor: a float tensor, placed on this member's device.
    group: the CollectiveGroup.
    name: what is reduced, the same in every member (e.g. a layer scope).
    member: this member's index, for counting occurrences of `name`.
  """
  if group.group_size == 1:
    return tensor
  return _reduce(tensor, group, group.instance_key(name, member), member)


def all_reduce_sum(tensor, group, name, member):
  """The sum of `tensor` over every member of `group`, differentiable.

  The gradient of a sum all-reduce is the all-reduce of the gradients: each
  member's input feeds every member's output. Arguments as `sum_over`.
  """
  if group.group_size == 1:
    return tf.identity(tensor)

  @tf.custom_gradient
  def reduce_with_gradient(x):
    def gradient(upstream):
      return sum_over(upstream, group, name + '/gradient', member)
    return sum_over(x, group, name, member), gradient

  return reduce_with_gradient(tensor)


# Gradients are packed into buffers of at most this many bytes, one
# all-reduce per buffer (like Horovod's fusion buffer): a few collectives
# instead of one per variable, and a large tensor split over several. TF's
# ring all-reduce over gRPC keeps the link busy only with several
# collectives under way (benchmarks/all_reduce_buffers.py measures it).
DEFAULT_BUFFER_BYTES = 4 * 2 ** 20


def _buffers(tensors, buffer_bytes):
  """The pieces of `tensors` grouped into buffers of one dtype each.

  The tensors are taken last first, the order in which backprop computes
  the gradients of the variables in creation order, so the first buffers
  can be sent while the rest are still computed. A tensor fills what is
  left of its dtype's open buffer and goes on into new ones: every buffer
  holds at most `buffer_bytes` (at least one element).

  Returns:
    [[(tensor index, first element, number of elements), ...] per buffer].
  """
  buffers = []
  open_buffers = {}  # dtype -> (pieces, elements left)
  for index in reversed(range(len(tensors))):
    tensor = tensors[index]
    capacity = max(1, buffer_bytes // tensor.dtype.size)
    pieces, room = open_buffers.get(tensor.dtype, (None, 0))
    start, size = 0, tensor.shape.num_elements()
    while start < size:
      if room == 0:
        pieces, room = [], capacity
        buffers.append(pieces)
      taken = min(room, size - start)
      pieces.append((index, start, taken))
      start += taken
      room -= taken
    open_buffers[tensor.dtype] = (pieces, room)
  return buffers


def _packed(tensors, buffer_bytes, reduce_fn):
  """reduce_fn applied to `tensors` packed into flat buffers, unpacked."""
  flat = [tf.reshape(tensor, [-1]) for tensor in tensors]
  parts = [[] for _ in tensors]
  for number, pieces in enumerate(_buffers(tensors, buffer_bytes)):
    reduced = reduce_fn(tf.concat(
        [_piece(flat[index], start, size)
         for index, start, size in pieces], 0), number)
    for (index, _, _), part in zip(
        pieces, tf.split(reduced, [size for _, _, size in pieces])):
      parts[index].append(part)
  return [tf.reshape(part[0] if len(part) == 1 else tf.concat(part, 0),
                     tensor.shape) for part, tensor in zip(parts, tensors)]


def _piece(flat, start, size):
  """Elements [start, start + size) of the 1-D `flat`; itself when whole."""
  if size == flat.shape.num_elements():
    return flat
  return flat[start:start + size]


# What the all-reduce sends float32 values as, by UpdateOptions'
# gradient_compression (Horovod's Compression.fp16 is the model).
WIRE_DTYPES = {'none': None, 'fp16': tf.float16, 'bf16': tf.bfloat16}

# The graph collection of the local boolean variables that say whether a
# compressed all-reduce of the gradients overflowed its 16-bit dtype (see
# all_reduce_mean_gradients); training/hooks.py reads them.
COMPRESSION_OVERFLOWED = 'compressed_all_reduce_overflowed'


def all_reduce_mean_gradients(grads_and_vars, group, member,
                              buffer_bytes=DEFAULT_BUFFER_BYTES,
                              wire_dtype=None):
  """The gradients averaged over the members of `group` (the replicas).

  Each member passes its own (already clone-summed) gradients, in the same
  variable order; every member gets the same mean back. The gradients are
  packed into buffers of about `buffer_bytes`, one CollectiveReduceV2
  each. Sparse gradients (tf.IndexedSlices, from embedding lookups) are
  made dense first: their rows differ between members, and a dense sum is
  one collective of a known size where gathering would need two.

  Args:
    grads_and_vars: list of (gradient or None, variable).
    group: the CollectiveGroup of the replicas.
    member: this replica's index in the group.
    buffer_bytes: the packing threshold.
    wire_dtype: see all_reduce_mean. With tf.float16, whether the
      all-reduce overflowed is noted for training/hooks.py (see
      _noting_overflow); bfloat16 has float32's range.
  """
  present = [(g, v) for g, v in grads_and_vars if g is not None]
  if group.group_size == 1 or not present:
    return list(grads_and_vars)
  dense = [tf.convert_to_tensor(g) for g, _ in present]
  buffer_checks = [] if wire_dtype == tf.float16 else None
  means = all_reduce_mean(dense, group, member, 'replica_gradients',
                          buffer_bytes, wire_dtype, buffer_checks)
  if buffer_checks:
    means = _noting_overflow(means, buffer_checks)
  averaged = dict(zip([id(v) for _, v in present], means))
  return [(averaged[id(v)] if g is not None else None, v)
          for g, v in grads_and_vars]


def all_reduce_mean(tensors, group, member, name,
                    buffer_bytes=DEFAULT_BUFFER_BYTES, wire_dtype=None,
                    buffer_checks=None):
  """`tensors` averaged over the members of `group`, packed into buffers.

  With a `wire_dtype` (tf.float16 or tf.bfloat16), a buffer of wider
  floats is divided by the group size, cast to it, summed in it and cast
  back: half the bytes on the network, the mean rounded to 16 bits (the
  division first keeps the sum in float16's range, unless the mean itself
  is beyond it). A buffer already of 16 bits, or of another dtype, is sent
  as it is.

  Args:
    buffer_checks: a list, or None. With a list, each narrowed buffer
      carries one element more, the number of members whose values in it
      were not all finite, and gets (every member's values were finite,
      the mean is finite) appended, two boolean tensors, the same on every
      member.
  """
  scale = 1.0 / group.group_size

  def reduce(flat, number):
    key = group.instance_key('%s/buffer_%d' % (name, number), member)
    if not _narrows(flat.dtype, wire_dtype):
      summed = _reduce(flat, group, key, member)
      return summed * tf.cast(scale, summed.dtype)
    divided = tf.cast(flat * tf.cast(scale, flat.dtype), wire_dtype)
    if buffer_checks is None:
      return tf.cast(_reduce(divided, group, key, member), flat.dtype)
    not_finite_here = tf.logical_not(
        tf.reduce_all(tf.math.is_finite(flat)))
    summed = _reduce(tf.concat(
        [divided, tf.reshape(tf.cast(not_finite_here, wire_dtype), [1])],
        0), group, key, member)
    mean, members_not_finite = summed[:-1], summed[-1]
    buffer_checks.append((tf.equal(members_not_finite, 0),
                          tf.reduce_all(tf.math.is_finite(mean))))
    return tf.cast(mean, flat.dtype)

  return _packed(list(tensors), buffer_bytes, reduce)


def _noting_overflow(means, buffer_checks):
  """`means`, once a local variable in the COMPRESSION_OVERFLOWED
  collection says whether the latest all-reduce of finite values
  overflowed: its mean is not finite though every member sent finite
  values.

  An all-reduce of values not all finite (a member's gradient was already
  NaN) leaves the variable as it was: without a loss scale, the update of
  an overflow makes the weights, and so the next gradients, NaN, and the
  variable must still say what began it when the NaN is met. The
  variable is only assigned, never read here: a session that initialises
  the global variables only can still run the step.
  """
  inputs_finite = tf.reduce_all(tf.stack([c for c, _ in buffer_checks]))
  overflowed = tf.logical_and(inputs_finite, tf.logical_not(
      tf.reduce_all(tf.stack([m for _, m in buffer_checks]))))
  flag = tf.Variable(False, trainable=False,
                     name='compressed_all_reduce_overflowed',
                     collections=[tf.GraphKeys.LOCAL_VARIABLES,
                                  COMPRESSION_OVERFLOWED])
  noted = apply_when.either_way(inputs_finite, flag.assign(
      apply_when.when_true(overflowed, inputs_finite), read_value=False))
  with tf.control_dependencies([noted]):
    return [tf.identity(mean) for mean in means]


def _narrows(dtype, wire_dtype):
  return (wire_dtype is not None and dtype.is_floating and
          dtype.size > wire_dtype.size)


def broadcast(tensors, group, member, name, is_source,
              buffer_bytes=DEFAULT_BUFFER_BYTES):
  """The source member's `tensors`, on every member of `group`.

  The source sends its values; the others receive tensors of the same
  shapes and dtypes (their own values only give those). Packed into
  buffers like the gradients.
  """

  def send_or_receive(flat, number):
    common = _attributes(group, group.instance_key(
        '%s/buffer_%d' % (name, number), member), flat, member)
    if is_source:
      return tf.raw_ops.CollectiveBcastSendV2(input=flat, **common)
    # Static: the receiver's own values (`flat`) are never computed.
    return tf.raw_ops.CollectiveBcastRecvV2(
        shape=flat.shape.as_list(), T=flat.dtype, **common)

  return _packed(list(tensors), buffer_bytes, send_or_receive)


def average_every(step_op, variables, global_step, every, group, member,
                  buffer_bytes=DEFAULT_BUFFER_BYTES, wire_dtype=None,
                  exact_variables=()):
  """After `step_op`, on every `every`-th global step, `variables` averaged
  over the members of `group` (periodic parameter averaging).

  The members take the averaging branch together: their global steps are
  equal. Read after `step_op`, the global step is the one it advanced.

  Args:
    exact_variables: averaged in the same branch, always in their own
      dtype, even with a `wire_dtype` (statistics such as a moving
      variance, whose range a 16-bit float may not hold).

  Returns:
    The op that runs `step_op` and, when due, the averaging.
  """
  with tf.control_dependencies([step_op]):
    due = tf.equal(tf.math.floormod(global_step.read_value(),
                                    tf.cast(every, global_step.dtype)), 0)

  def average():
    if wire_dtype is None:
      return assign_means(list(variables) + list(exact_variables), group,
                          member, 'replica_average', buffer_bytes)
    averaged = [assign_means(variables, group, member, 'replica_average',
                             buffer_bytes, wire_dtype)]
    if exact_variables:
      averaged.append(assign_means(exact_variables, group, member,
                                   'replica_average_exact', buffer_bytes))
    return tf.group(*averaged)

  return tf.cond(due, average, tf.no_op, name='average_replicas')


def assign_means(variables, group, member, name,
                 buffer_bytes=DEFAULT_BUFFER_BYTES, wire_dtype=None):
  """An op setting `variables` to their mean over the members of `group`
  (see all_reduce_mean); every member gets the same values."""
  means = all_reduce_mean([v.read_value() for v in variables], group,
                          member, name, buffer_bytes, wire_dtype)
  return tf.group(*[v.assign(mean, read_value=False)
                    for v, mean in zip(variables, means)])
