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

from deployment.slim_compat import tf

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
  """

  def __init__(self, group_size, group_key=1, timeout_seconds=60.0):
    if group_size < 1:
      raise ValueError('group_size must be >= 1, got %r' % (group_size,))
    if timeout_seconds is not None and timeout_seconds <= 0:
      raise ValueError('timeout_seconds must be > 0 or None, got %r'
                       % (timeout_seconds,))
    self.group_size = group_size
    self.group_key = group_key
    self.timeout_seconds = timeout_seconds
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


def _communication_hint(tensor):
  return 'nccl' if 'GPU' in (tensor.device or '').upper() else 'auto'


def _reduce(tensor, group, instance_key):
  return tf.raw_ops.CollectiveReduceV2(
      input=tensor, group_size=group.group_size, group_key=group.group_key,
      instance_key=instance_key, ordering_token=[], merge_op='Add',
      final_op='Id', communication_hint=_communication_hint(tensor),
      timeout_seconds=float(group.timeout_seconds or 0))


def all_reduce_sum(tensor, group, name, member):
  """The sum of `tensor` over every member of `group`, differentiable.

  The gradient of a sum all-reduce is the all-reduce of the gradients: each
  member's input feeds every member's output.

  Args:
    tensor: a float tensor, placed on this member's device.
    group: the CollectiveGroup.
    name: what is reduced, the same in every member (e.g. a layer scope).
    member: this member's index, for counting occurrences of `name`.
  """
  if group.group_size == 1:
    return tf.identity(tensor)
  key = group.instance_key(name, member)

  @tf.custom_gradient
  def reduce_with_gradient(x):
    def gradient(upstream):
      return _reduce(upstream, group,
                     group.instance_key(name + '/gradient', member))
    return _reduce(x, group, key), gradient

  return reduce_with_gradient(tensor)
