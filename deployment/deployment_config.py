"""Where each part of a deployed model runs: `DeploymentConfig`.

Re-exported by `deployment.model_deploy`, whose upstream API it belongs to.
"""

import numbers

from deployment import argument_checks
from deployment import device_placement
from tf2_compat.slim_compat import tf


def uses_all_reduce(num_replicas, num_ps_tasks):
  """The rule: several replicas (workers) and no ps tasks all-reduce.

  Each worker then keeps a full copy of the variables and the workers
  average their gradients with collective ops.
  """
  return num_replicas > 1 and num_ps_tasks == 0


def is_chief_replica(replica_id):
  """The rule: replica (worker task) 0 is the chief; it initialises the
  model and writes the checkpoints and summaries."""
  return replica_id == 0


class DeploymentConfig:
  """Where each part of a deployed model runs.

  Args:
    num_clones: model copies per replica (one per GPU, or on the CPU).
    clone_on_cpu: put every clone on CPU:0 instead of GPU:<i>.
    replica_id: index of this replica (worker task), in [0, num_replicas).
    num_replicas: number of worker tasks training together.
    num_ps_tasks: number of parameter-server tasks; 0 keeps variables on the
      worker's CPU. Several replicas without ps tasks all-reduce: each
      worker keeps a full copy of the variables and the workers sum their
      gradients with collective ops (see `all_reduce_replicas`).
    worker_job_name: cluster job name of the workers.
    ps_job_name: cluster job name of the parameter servers.
    ps_strategy: how variables are spread over ps tasks: 'round_robin'
      (upstream behaviour) or 'by_size' (each variable to the task with the
      fewest bytes so far).
    separate_cpu_devices: with clone_on_cpu, give each clone device of its
      own logical CPU device (CPU:0, CPU:1, ...) instead of sharing CPU:0.
      Collective ops (sync batch norm) need this: two members of a
      collective on one device wait for each other forever. Create the
      session with `config.session_config()`, which asks
      TensorFlow for that many CPU devices.
    devices_per_clone: devices each clone spans (model parallelism inside a
      clone): clone i gets devices i*k .. i*k+k-1; `clone_devices(i)` lists
      them for model_fn to place its parts. Ops default to the first.
    collective_timeout_secs: a collective op (sync batch norm, the
      all-reduce between replicas) whose members do not all arrive fails
      after this many seconds instead of waiting forever. Between the
      clones of one graph only each clone's first sync batch norm
      collective is timed (see collectives.CollectiveGroup).
    cache_variable_reads: with ps tasks, each step reads every model
      variable from its ps once into the worker's CPU, and all the
      worker's clones (and the regularizers) use that copy; the bytes sent
      by the ps no longer grow with the number of clones. False reads
      wherever a value is used, as upstream Slim did. No effect without ps
      tasks, where variables are local already.

  Raises:
    ValueError, TypeError: for a value out of range, naming it.
  """

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0,
               num_replicas=1, num_ps_tasks=0, worker_job_name='worker',
               ps_job_name='ps', ps_strategy='round_robin',
               separate_cpu_devices=False, devices_per_clone=1,
               collective_timeout_secs=60.0, cache_variable_reads=True):
    argument_checks.check_int('num_clones', num_clones, 1)
    argument_checks.check_int('devices_per_clone', devices_per_clone, 1)
    if not (isinstance(collective_timeout_secs, numbers.Real)
            and collective_timeout_secs > 0):
      raise ValueError('collective_timeout_secs must be a number > 0, got %r'
                       % (collective_timeout_secs,))
    if separate_cpu_devices and not clone_on_cpu:
      raise ValueError('separate_cpu_devices=True places clones on logical '
                       'CPU devices: set clone_on_cpu=True too (GPU clones '
                       'are on separate devices already)')
    argument_checks.check_int('num_replicas', num_replicas, 1)
    argument_checks.check_int('num_ps_tasks', num_ps_tasks, 0)
    argument_checks.check_int('replica_id', replica_id, 0)
    if replica_id >= num_replicas:
      raise ValueError(
          'replica_id must be in [0, num_replicas=%d), got %d'
          % (num_replicas, replica_id))
    if num_ps_tasks > 0 or num_replicas > 1:
      for flag, job in (('worker_job_name', worker_job_name),
                        ('ps_job_name', ps_job_name)):
        if not job or not isinstance(job, str):
          raise ValueError('%s must be a non-empty string in a cluster '
                           '(num_ps_tasks > 0 or num_replicas > 1), got %r'
                           % (flag, job))
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
    self._separate_cpu_devices = bool(separate_cpu_devices)
    self._devices_per_clone = devices_per_clone
    self._collective_timeout_secs = float(collective_timeout_secs)
    self._cache_variable_reads = bool(cache_variable_reads)
    self._ps_device = '/job:' + ps_job_name if num_ps_tasks else ''
    self._worker_device = ''
    if num_ps_tasks or num_replicas > 1:
      self._worker_device = '/job:' + worker_job_name
    # Without the task, every replica's clones would resolve to whichever
    # worker task the placer picks first (an upstream bug).
    if num_replicas > 1:
      self._worker_device += '/task:%d' % replica_id

  # The arguments a cluster task decides; for_task refuses them.
  _TASK_ARGUMENTS = ('replica_id', 'num_replicas', 'num_ps_tasks')

  @classmethod
  def for_task(cls, task, **kwargs):
    """The DeploymentConfig of a worker task of a cluster.

    The task decides which replica this is and how many replicas and ps
    tasks there are; everything else is as for the constructor.

      task = cluster.ClusterTask(['ps0:2222'], ['w0:2222', 'w1:2222'],
                                 'worker', 1)
      config = DeploymentConfig.for_task(task, num_clones=2)
      config.clone_device(1)  # '/job:worker/task:1/device:GPU:1'

    Args:
      task: the worker task, e.g. a clusters.cluster.ClusterTask; any
        object with the attributes job_name, task_index (replica_id),
        num_workers (num_replicas) and num_ps_tasks.
      **kwargs: the constructor's other arguments (num_clones,
        clone_on_cpu, ps_strategy, ...).

    Raises:
      TypeError: an argument the task decides is given too.
      ValueError: the task is not of the worker job (a ps task deploys no
        clones), or a value is out of range, as for the constructor.
    """
    given = [name for name in cls._TASK_ARGUMENTS if name in kwargs]
    if given:
      raise TypeError('for_task takes %s from the task; drop %s=%r' % (
          ', '.join(cls._TASK_ARGUMENTS), given[0], kwargs[given[0]]))
    worker_job = kwargs.get('worker_job_name', 'worker')
    if task.job_name != worker_job:
      raise ValueError(
          'for_task needs a task of the %r job, got %s %d: a ps task '
          'serves variables and deploys no clones'
          % (worker_job, task.job_name, task.task_index))
    return cls(replica_id=task.task_index, num_replicas=task.num_workers,
               num_ps_tasks=task.num_ps_tasks, **kwargs)

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
  def separate_cpu_devices(self):
    return self._separate_cpu_devices

  @property
  def devices_per_clone(self):
    return self._devices_per_clone

  @property
  def collective_timeout_secs(self):
    return self._collective_timeout_secs

  @property
  def num_local_devices(self):
    """Devices the clones of one replica use: num_clones x devices_per_clone
    (on one shared CPU:0, unless separate_cpu_devices)."""
    return self._num_clones * self._devices_per_clone

  @property
  def clones_share_a_device(self):
    """Whether several clone devices resolve to the same device (CPU:0)."""
    return (self._clone_on_cpu and not self._separate_cpu_devices
            and self.num_local_devices > 1)

  @property
  def all_reduce_replicas(self):
    """Whether the replicas all-reduce their gradients (several replicas,
    no ps tasks) instead of sharing variables on parameter servers."""
    return uses_all_reduce(self._num_replicas, self._num_ps_tasks)

  @property
  def is_chief(self):
    return is_chief_replica(self._replica_id)

  def __repr__(self):
    extra = ''
    if self._separate_cpu_devices:
      extra += ', separate_cpu_devices=True'
    if self._devices_per_clone > 1:
      extra += ', devices_per_clone=%d' % self._devices_per_clone
    return ('DeploymentConfig(num_clones=%d, clone_on_cpu=%s, replica_id=%d, '
            'num_replicas=%d, num_ps_tasks=%d%s)' % (
                self._num_clones, self._clone_on_cpu, self._replica_id,
                self._num_replicas, self._num_ps_tasks, extra))

  def _check_clone_index(self, clone_index):
    if not argument_checks.is_integer(clone_index) or not (
        0 <= clone_index < self._num_clones):
      raise ValueError('clone_index must be in [0, num_clones=%d), got %r'
                       % (self._num_clones, clone_index))

  def clone_device(self, clone_index):
    """Device of clone `clone_index`, e.g. '/job:worker/device:GPU:1'.

    With several devices per clone, the first of `clone_devices`.
    """
    return self.clone_devices(clone_index)[0]

  def clone_devices(self, clone_index):
    """Every device of clone `clone_index`, in order.

    e.g. ['/device:GPU:2', '/device:GPU:3'] for clone 1 of 2 devices each;
    ['/device:CPU:0', '/device:CPU:0'] with clone_on_cpu alone.
    """
    self._check_clone_index(clone_index)
    first = clone_index * self._devices_per_clone
    indices = range(first, first + self._devices_per_clone)
    if self._clone_on_cpu and not self._separate_cpu_devices:
      return [self._worker_device + '/device:CPU:0' for _ in indices]
    kind = 'CPU' if self._clone_on_cpu else 'GPU'
    return [self._worker_device + '/device:%s:%d' % (kind, i)
            for i in indices]

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

    Without ps tasks: the worker's CPU ('/device:CPU:0' on one machine,
    '/job:worker/task:<replica_id>/device:CPU:0' for all-reduce replicas).
    With ps tasks: a device function that
    gives each variable op a ps task (see `ps_strategy`) and leaves every
    other op's device unchanged. Each call returns a new function whose
    round-robin starts again at task 0.
    """
    if self._num_ps_tasks == 0:
      return self._worker_device + '/device:CPU:0'
    return device_placement.PsDeviceChooser(
        self._num_ps_tasks, job=self._ps_device, device='/device:CPU:0',
        strategy=self._ps_strategy)

  def variables_read_device(self):
    """Where the model's variables are read each step, or None.

    With ps tasks and `cache_variable_reads`: the worker's CPU, where a
    variable's value, read from its ps once per step, is cached for every
    clone. None otherwise: each use reads the variable where it is.
    """
    if self._num_ps_tasks > 0 and self._cache_variable_reads:
      return self.inputs_device()
    return None

  def caching_device(self):
    """Where variable reads are cached: None on one machine.

    With ps tasks, a function that places a variable's read on the device of
    the op that reads it, so each worker reads a variable once per step.
    """
    if self._num_ps_tasks > 0:
      return lambda op: op.device
    return None

  def session_config(self, **kwargs):
    """A tf.ConfigProto with the devices this config places clones on.

    With separate_cpu_devices, TensorFlow makes one logical CPU device per
    clone device (it makes a single CPU device otherwise). With all-reduce
    replicas, it names worker 0 as the leader of the collective groups;
    give the same config to the replica's server (tf.distribute.Server(...,
    config=...)).

    Args:
      **kwargs: more tf.ConfigProto fields (e.g. allow_soft_placement=True).
    """
    proto = tf.ConfigProto(**kwargs)
    if self.all_reduce_replicas:
      # The task that resolves the replicas' collective groups: worker 0.
      proto.experimental.collective_group_leader = (
          '%s/replica:0/task:0' % self._worker_device.rsplit('/task:', 1)[0])
    if self._separate_cpu_devices:
      proto.device_count['CPU'] = max(self.num_local_devices,
                                      proto.device_count.get('CPU', 1))
    return proto
