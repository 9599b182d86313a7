"""Placement: where variables and host-only ops go, and where they went.

The device functions and the variable creator that deploy() uses, and the
placement report a worker logs at start-up (what each ps task holds); the
device strings themselves, and the session's device counts, come from
DeploymentConfig.

TensorFlow calls a device function for every op created under
`tf.device(fn)`; PsDeviceChooser returns a ps task for the ops that create
variables and leaves every other op where the enclosing scopes put it.

Upstream Slim recognised variables by an op type starting with `Variable`,
which misses the `VarHandleOp` that every TF2 resource variable is built
from: all variables then stayed on the worker. Here the set of variable op
types is explicit.
"""

import collections

import numpy as np

from tf2_compat.slim_compat import tf

# Ops that own variable (or table) state and so belong on a ps task.
VARIABLE_OP_TYPES = frozenset([
    'VarHandleOp',  # resource variables (TF2 default)
    'VariableV2',  # reference variables (use_resource=False)
    'Variable',
    'AutoReloadVariable',
    'MutableHashTable',
    'MutableHashTableV2',
    'MutableHashTableOfTensors',
    'MutableHashTableOfTensorsV2',
    'MutableDenseHashTable',
    'MutableDenseHashTableV2',
])

PS_STRATEGIES = ('round_robin', 'by_size')

# The job of the parameter servers (DeploymentConfig's default ps_job_name).
PS_JOB = 'ps'


def variable_bytes(op):
  """Size in bytes of the variable an op creates; 0 if the shape is unknown."""
  try:
    shape = tf.TensorShape(op.get_attr('shape'))
    dtype = tf.as_dtype(op.get_attr('dtype'))
  except ValueError:
    return 0
  if not shape.is_fully_defined():
    return 0
  return int(np.prod(shape.as_list(), dtype=np.int64)) * dtype.size


class PsDeviceChooser:
  """Device function that spreads variables over ps tasks.

  Args:
    num_tasks: number of ps tasks, >= 1.
    device: device of the ps job without the task, e.g. '/job:ps/device:CPU:0'
      is given as job='/job:ps' and device='/device:CPU:0'.
    strategy: 'round_robin' gives task k to the k-th variable created (mod
      num_tasks); 'by_size' gives each new variable to the task holding the
      fewest bytes so far (ties go to the lowest task).

  The chooser keeps the bytes and variable names it placed per task in
  `bytes_per_task` and `variables_per_task`, for start-up reports.
  """

  def __init__(self, num_tasks, job='/job:ps', device='/device:CPU:0',
               strategy='round_robin'):
    if num_tasks < 1:
      raise ValueError('num_tasks must be >= 1, got %r' % (num_tasks,))
    if strategy not in PS_STRATEGIES:
      raise ValueError('ps strategy must be one of %s, got %r'
                       % (', '.join(PS_STRATEGIES), strategy))
    self._job = job
    self._device = device
    self._strategy = strategy
    self._next_task = 0
    self.bytes_per_task = [0] * num_tasks
    self.variables_per_task = [[] for _ in range(num_tasks)]

  def task_device(self, task):
    return '%s/task:%d%s' % (self._job, task, self._device)

  def _choose_task(self, op):
    if self._strategy == 'by_size':
      return int(np.argmin(self.bytes_per_task))
    task = self._next_task
    self._next_task = (task + 1) % len(self.bytes_per_task)
    return task

  def __call__(self, op):
    if op.device or op.type not in VARIABLE_OP_TYPES:
      return op.device
    task = self._choose_task(op)
    self.bytes_per_task[task] += variable_bytes(op)
    self.variables_per_task[task].append(op.name)
    return self.task_device(task)


# Summary ops have no GPU kernels; strings cannot live in GPU memory.
SUMMARY_OP_TYPES = frozenset([
    'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary',
    'AudioSummaryV2', 'TensorSummary', 'TensorSummaryV2', 'MergeSummary',
])


def host_ops_to(cpu_device):
  """A device function that sends summaries and string constants to a CPU.

  Every other op keeps the device of the enclosing scopes.
  """

  def choose(op):
    if op.type in SUMMARY_OP_TYPES or (
        op.type == 'Const' and op.outputs[0].dtype == tf.string):
      return cpu_device
    return op.device

  return choose


def placing_variables_on(device, clone_scopes, read_device=None):
  """A variable creator that builds every new variable under `device`.

  This is what places the model's variables: create_clones enters it with
  tf.variable_creator_scope around every clone, so variables made by slim,
  plain tf.get_variable or tf.Variable all go where `device` says (a
  device string, or a device function such as PsDeviceChooser).

  With a `read_device`, a variable's value is read once per step onto it
  (the variable's caching device) and every use takes that copy.

  Variables whose name takes the graph's name scope (Keras layers, plain
  tf.Variable) would be named `clone_0/...` with several clones and
  without the prefix with one, so a checkpoint would depend on the number
  of clones. The creator builds them outside the clone's name scope.
  (tf.get_variable, and so slim, names variables by variable scope and is
  unaffected.)

  Args:
    device: a device string or device function.
    clone_scopes: the clones' name scopes ('clone_0', ...; none for one
      clone).
    read_device: where each step's read of a variable is cached, or None.
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


# One line of the placement report: `device` is '/job:ps/task:<task>' for a
# ps task, else the variables' device string ('' when none was set); `job`
# and `task` are None for devices outside the ps job.
DeviceLoad = collections.namedtuple(
    'DeviceLoad', ['device', 'job', 'task', 'num_variables', 'num_bytes'])


def _report_order(load):
  return (load.job != PS_JOB, load.task or 0, load.device)


def placement_by_device(variables):
  """Groups variables by ps task (or other device) and sums their sizes.

  Args:
    variables: e.g. tf.global_variables() of the built training graph.

  Returns:
    A list of DeviceLoad, ps tasks first in task order, then other devices.
  """
  totals = collections.OrderedDict()
  for variable in variables:
    spec = tf.DeviceSpec.from_string(variable.op.device)
    if spec.job == PS_JOB:
      task = spec.task or 0
      key = ('/job:%s/task:%d' % (PS_JOB, task), PS_JOB, task)
    else:
      key = (variable.op.device, None, None)
    count, size = totals.get(key, (0, 0))
    totals[key] = (count + 1, size + variable_bytes(variable.op))
  loads = [DeviceLoad(*key, *total) for key, total in totals.items()]
  return sorted(loads, key=_report_order)


def placement_report(variables, num_ps_tasks=None):
  """Lines for the start-up log: variables and bytes per ps task.

  Args:
    variables: the variables to report.
    num_ps_tasks: when given, ps tasks that hold nothing get a line too.

  Returns:
    A list of strings, e.g. 'ps task 1: 4 variables, 4520 bytes (0.0 MiB)'.
  """
  loads = placement_by_device(variables)
  held = {load.task for load in loads if load.job == PS_JOB}
  loads += [DeviceLoad('/job:%s/task:%d' % (PS_JOB, task), PS_JOB, task, 0, 0)
            for task in range(num_ps_tasks or 0) if task not in held]
  lines = []
  for load in sorted(loads, key=_report_order):
    if load.job == PS_JOB:
      where = 'ps task %d' % load.task
    else:
      where = 'device %s' % (load.device or '(none)')
    lines.append('%s: %d variables, %d bytes (%.1f MiB)' % (
        where, load.num_variables, load.num_bytes, load.num_bytes / 2.0**20))
  return lines
