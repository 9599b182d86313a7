"""Which cluster a process belongs to and which task it is: flags or TF_CONFIG.

A cluster for Slim training has two jobs on TensorFlow's distributed runtime:
`ps` (parameter servers, holding the variables) and `worker` (replicas, each
running the training loop). Worker 0 is the chief: it initialises or
restores the model and writes checkpoints and summaries.

A process learns the cluster and its own task in one of two ways:

  * the classic flags of upstream Slim, the same lists on every machine:

      --ps_hosts=ps0.example.com:2222,ps1.example.com:2222
      --worker_hosts=w0.example.com:2222,w1.example.com:2222
      --job_name=worker --task=1

  * the TF_CONFIG environment variable, as Kubernetes TFJob and
    tf.distribute set it:

      TF_CONFIG='{"cluster": {"ps": ["ps0:2222"], "worker": ["w0:2222"]},
                  "task": {"type": "worker", "index": 0}}'

Both at once are accepted only when they describe the same cluster and the
same task; otherwise `from_flags_and_env` raises a ValueError naming both.
Letting either silently win would turn a stale TF_CONFIG (or a stale flag in
a pod template) into a second chief or a task listening on the wrong port,
which shows up much later as a hang. A `--task` given with TF_CONFIG alone
must match its index for the same reason.

Typical use (what train_image_classifier.py does):

  task = cluster.from_flags_and_env(FLAGS.ps_hosts, FLAGS.worker_hosts,
                                    FLAGS.job_name, FLAGS.task)
  server = servers.start_server(task)   # clusters/servers.py
  if task.is_ps:
    servers.serve_until_stopped(server)
  else:
    peers.wait_for(peers.needed_by(task))   # clusters/peers.py
    ... train against server.target with task.device_filters ...

The server functions (`start_server`, `check_port`, `PortUnavailable`,
`serve_until_stopped`), `unreachable_workers` and the placement report
(`placement_report`, `placement_by_device`, `DeviceLoad`) lived here
before; their old names `clusters.cluster.X` still work, with a
DeprecationWarning, through old_paths (see `__getattr__` below).
"""

import json
import os

from clusters import addresses
from deployment import deployment_config
from deployment import device_placement
from tf2_compat.slim_compat import tf

PS_JOB = device_placement.PS_JOB
WORKER_JOB = 'worker'
JOBS = (PS_JOB, WORKER_JOB)


def _check_address(where, address):
  """Raises ValueError unless `address` is 'host:port' with a valid port."""
  try:
    addresses.split_address(address)
  except ValueError as e:
    raise ValueError('%s: %s' % (where, e)) from None


class ClusterTask:
  """One task of a ps/worker cluster: the cluster's addresses and this task.

  Validates itself on construction; every attribute is read-only.

  Args:
    ps_hosts: list of 'host:port' of the ps tasks (may be empty with a
      single worker).
    worker_hosts: list of 'host:port' of the workers, the chief first.
    job_name: 'ps' or 'worker'.
    task_index: index of this task in its job.
    source: where the description came from, for error messages
      (e.g. 'TF_CONFIG' or '--ps_hosts/--worker_hosts/--job_name/--task').
    port_fix: how a user gives this task another port, for the error when
      its port is taken (default: 'give this task a free port in SOURCE').

  Several workers without ps tasks all-reduce their gradients (see
  `all_reduce`).

  Raises:
    ValueError: for an unknown job, an index out of range, a malformed or
      repeated address.
  """

  def __init__(self, ps_hosts, worker_hosts, job_name, task_index,
               source='cluster', port_fix=None):
    if job_name not in JOBS:
      raise ValueError('%s: job name %r is neither %r nor %r'
                       % (source, job_name, PS_JOB, WORKER_JOB))
    hosts = {PS_JOB: tuple(ps_hosts), WORKER_JOB: tuple(worker_hosts)}
    for job in JOBS:
      for address in hosts[job]:
        _check_address('%s, %s job' % (source, job), address)
    every = hosts[PS_JOB] + hosts[WORKER_JOB]
    repeated = sorted({a for a in every if every.count(a) > 1})
    if repeated:
      raise ValueError('%s: address %s is given to more than one task'
                       % (source, ', '.join(repeated)))
    if not hosts[WORKER_JOB]:
      raise ValueError('%s: the cluster has no worker; list at least one '
                       'worker address' % source)
    if isinstance(task_index, bool) or not isinstance(task_index, int):
      raise ValueError('%s: task index %r is not an integer'
                       % (source, task_index))
    count = len(hosts[job_name])
    if not 0 <= task_index < count:
      raise ValueError('%s: task index %d is out of range: the %s job has %d '
                       'task(s), indices 0..%d' % (
                           source, task_index, job_name, count, count - 1))
    self._hosts = hosts
    self._job_name = job_name
    self._task_index = task_index
    self._source = source
    self._port_fix = port_fix or 'give this task a free port in %s' % source

  @property
  def job_name(self):
    return self._job_name

  @property
  def task_index(self):
    return self._task_index

  @property
  def source(self):
    return self._source

  @property
  def port_fix(self):
    return self._port_fix

  @property
  def ps_hosts(self):
    return self._hosts[PS_JOB]

  @property
  def worker_hosts(self):
    return self._hosts[WORKER_JOB]

  @property
  def num_ps_tasks(self):
    return len(self._hosts[PS_JOB])

  @property
  def num_workers(self):
    return len(self._hosts[WORKER_JOB])

  @property
  def is_ps(self):
    return self._job_name == PS_JOB

  @property
  def all_reduce(self):
    """Several workers and no ps: each worker holds the variables and the
    workers all-reduce their gradients."""
    return deployment_config.uses_all_reduce(self.num_workers,
                                             self.num_ps_tasks)

  @property
  def is_chief(self):
    """Worker 0 initialises the model and writes checkpoints."""
    return (self._job_name == WORKER_JOB
            and deployment_config.is_chief_replica(self._task_index))

  @property
  def address(self):
    return self._hosts[self._job_name][self._task_index]

  @property
  def cluster_spec(self):
    jobs = {job: list(hosts) for job, hosts in self._hosts.items() if hosts}
    return tf.train.ClusterSpec(jobs)

  @property
  def device_filters(self):
    """Devices a worker's session may see: the ps job and itself.

    Without them the master waits for every task of the cluster to answer,
    so a worker would hang whenever another worker is gone or finished.
    (All-reduce workers still reach each other: collective ops talk to
    their peers directly, outside the session's devices.)
    """
    if not self.num_ps_tasks:
      return ['/job:%s/task:%d' % (WORKER_JOB, self._task_index)]
    return ['/job:%s' % PS_JOB,
            '/job:%s/task:%d' % (WORKER_JOB, self._task_index)]

  def _identity(self):
    return (self.ps_hosts, self.worker_hosts, self.job_name, self.task_index)

  def __eq__(self, other):
    return (isinstance(other, ClusterTask) and
            self._identity() == other._identity())

  def __hash__(self):
    return hash(self._identity())

  def __str__(self):
    return '%s task %d (%s) of a cluster of %d ps and %d workers' % (
        self._job_name, self._task_index, self.address, self.num_ps_tasks,
        self.num_workers)

  def __repr__(self):
    return ('ClusterTask(ps_hosts=%r, worker_hosts=%r, job_name=%r, '
            'task_index=%d)' % (list(self.ps_hosts), list(self.worker_hosts),
                                self._job_name, self._task_index))


_FLAGS_SOURCE = '--ps_hosts/--worker_hosts/--job_name/--task'


def _split_hosts(flag, text):
  hosts = [h.strip() for h in (text or '').split(',')]
  if hosts == ['']:
    return []
  if '' in hosts:
    raise ValueError('%s=%s has an empty entry; give comma-separated '
                     'host:port addresses' % (flag, text))
  return hosts


def from_flags(ps_hosts, worker_hosts, job_name, task_index=0):
  """The task described by the classic flags; None when none is given.

  Args:
    ps_hosts: value of --ps_hosts, comma-separated 'host:port'.
    worker_hosts: value of --worker_hosts.
    job_name: value of --job_name, 'ps' or 'worker'.
    task_index: value of --task.

  Raises:
    ValueError: when the flags are incomplete or describe no valid task.
  """
  if not (ps_hosts or worker_hosts or job_name):
    return None
  if not job_name:
    raise ValueError('--job_name is required with --ps_hosts/--worker_hosts: '
                     'set --job_name=ps or --job_name=worker')
  if not worker_hosts:
    raise ValueError('--worker_hosts is required with --job_name=%s'
                     % job_name)
  if job_name not in JOBS:
    raise ValueError('--job_name=%s is neither %r nor %r'
                     % (job_name, PS_JOB, WORKER_JOB))
  return ClusterTask(_split_hosts('--ps_hosts', ps_hosts),
                     _split_hosts('--worker_hosts', worker_hosts),
                     job_name, task_index, source=_FLAGS_SOURCE)


_TF_CONFIG_EXAMPLE = ('{"cluster": {"ps": ["host:port", ...], "worker": '
                      '["host:port", ...]}, "task": {"type": "worker", '
                      '"index": 0}}')


def from_tf_config(text):
  """The task described by a TF_CONFIG value; None when it is unset or {}.

  Jobs other than 'ps' and 'worker' (a separate 'chief', an 'evaluator')
  are refused rather than ignored: this trainer makes worker 0 the chief, so
  list the chief's address first under "worker", and run
  eval_image_classifier.py on its own for evaluation.

  Raises:
    ValueError: for invalid JSON or a description that is not a valid task.
  """
  if text is None or not text.strip():
    return None
  try:
    config = json.loads(text)
  except ValueError as e:
    raise ValueError('TF_CONFIG is not valid JSON (%s): %r; expected %s'
                     % (e, text, _TF_CONFIG_EXAMPLE)) from None
  if not isinstance(config, dict):
    raise ValueError('TF_CONFIG must be a JSON object, got %r; expected %s'
                     % (text, _TF_CONFIG_EXAMPLE))
  if not config.get('cluster') and not config.get('task'):
    return None
  cluster, task = config.get('cluster'), config.get('task')
  if not isinstance(cluster, dict) or not cluster:
    raise ValueError('TF_CONFIG has no "cluster" object: %r; expected %s'
                     % (text, _TF_CONFIG_EXAMPLE))
  unknown = sorted(set(cluster) - set(JOBS))
  if unknown:
    raise ValueError(
        'TF_CONFIG cluster has job(s) %s; only "ps" and "worker" are '
        'supported (worker 0 is the chief: list a separate chief first '
        'under "worker")' % ', '.join('"%s"' % j for j in unknown))
  for job in JOBS:
    hosts = cluster.get(job, [])
    if not isinstance(hosts, list):
      raise ValueError('TF_CONFIG cluster "%s" must be a list of "host:port"'
                       ', got %r' % (job, hosts))
  if not isinstance(task, dict) or 'type' not in task or 'index' not in task:
    raise ValueError('TF_CONFIG needs "task": {"type": ..., "index": ...}, '
                     'got %r' % (task,))
  return ClusterTask(cluster.get(PS_JOB, []), cluster.get(WORKER_JOB, []),
                     task['type'], task['index'], source='TF_CONFIG')


def from_flags_and_env(ps_hosts, worker_hosts, job_name, task_index=None,
                       environ=None):
  """The task of this process from the flags and/or TF_CONFIG.

  Args:
    ps_hosts, worker_hosts, job_name: the values of the flags.
    task_index: the value of --task when it was given, else None (0 is then
      used with the flags).
    environ: mapping holding TF_CONFIG; os.environ by default.

  Returns:
    A ClusterTask, or None when neither describes a cluster.

  Raises:
    ValueError: for bad input or when flags and TF_CONFIG disagree.
  """
  environ = os.environ if environ is None else environ
  from_env = from_tf_config(environ.get('TF_CONFIG'))
  from_args = from_flags(ps_hosts, worker_hosts, job_name,
                         0 if task_index is None else task_index)
  if from_args is not None and from_env is not None and from_args != from_env:
    raise ValueError(
        'the flags describe %r but TF_CONFIG describes %r; give the cluster '
        'one way only (unset TF_CONFIG or drop --ps_hosts/--worker_hosts/'
        '--job_name/--task)' % (from_args, from_env))
  if (from_args is None and from_env is not None and task_index is not None
      and task_index != from_env.task_index):
    raise ValueError('--task=%d but TF_CONFIG says task index %d; drop --task'
                     % (task_index, from_env.task_index))
  return from_args or from_env


def __getattr__(name):
  """The names that left this module, by their old path: see old_paths,
  which only such a name loads."""
  import old_paths  # pylint: disable=g-import-not-at-top
  return old_paths.moved_name(__name__, name)
