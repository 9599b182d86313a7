"""The training session of one replica of a ps/worker cluster.

  * `monitored_training_session`: tf.train.MonitoredTrainingSession, except
    that a non-chief worker checks every `non_chief_wait_secs` (instead of
    TensorFlow's fixed 30 s) whether the chief has initialised the model.
  * `PlacementReportHook`: logs at start-up how many variables and bytes
    each ps task holds (deployment.device_placement.placement_report).
  * `sync_replicas_hooks`: the hooks of SyncReplicasOptimizer, plus one that
    lets the other workers finish when one stops.
  * `check_same_cluster`: all-reduce workers agree on their cluster before
    anything is built or written.
"""

import re
import zlib

from deployment import collectives
from deployment import device_placement
from deployment import model_deploy
from tf2_compat.slim_compat import tf


class NonChiefSessionCreator(tf.train.SessionCreator):
  """Creates a worker's session once the chief has made the model ready.

  What tf.train.WorkerSessionCreator does, with the poll period exposed:
  SessionManager takes `recovery_wait_secs`, but WorkerSessionCreator and
  MonitoredTrainingSession leave it at 30 s.

  Args:
    scaffold: the tf.train.Scaffold shared with the chief's graph.
    master: the target of this worker's server.
    config: the session's tf.ConfigProto.
    wait_secs: seconds between two checks that the model is ready.
    max_wait_secs: give up (tf.errors.DeadlineExceededError) after this.
  """

  def __init__(self, scaffold, master, config, wait_secs, max_wait_secs=7200):
    if wait_secs <= 0:
      raise ValueError('wait_secs must be > 0, got %r' % (wait_secs,))
    self._scaffold = scaffold
    self._master = master
    self._config = config
    self._wait_secs = wait_secs
    self._max_wait_secs = max_wait_secs

  def create_session(self):
    self._scaffold.finalize()
    manager = tf.train.SessionManager(
        local_init_op=self._scaffold.local_init_op,
        local_init_feed_dict=self._scaffold.local_init_feed_dict,
        ready_op=self._scaffold.ready_op,
        ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
        graph=tf.get_default_graph(),
        recovery_wait_secs=self._wait_secs)
    return manager.wait_for_session(self._master, config=self._config,
                                    max_wait_secs=self._max_wait_secs)


def monitored_training_session(non_chief_wait_secs=None, recover=True,
                               **kwargs):
  """tf.train.MonitoredTrainingSession with a configurable non-chief wait.

  Args:
    non_chief_wait_secs: poll period of a non-chief worker waiting for the
      chief; None keeps TensorFlow's 30 s.
    recover: whether a run failing with tf.errors.UnavailableError or
      AbortedError (a ps task restarted) recreates the session and goes on,
      as MonitoredSession does. All-reduce workers pass False: once a peer
      is gone their collectives fail again at once, and recreating the
      session would loop instead of stopping with the error. (Initialises
      as a chief: only with is_chief.)
    **kwargs: the arguments of tf.train.MonitoredTrainingSession. A
      non-chief uses only scaffold, master, config, hooks, max_wait_secs and
      stop_grace_period_secs, as TensorFlow's own non-chief path does.

  Returns:
    A tf.train.MonitoredSession.
  """
  if not recover:
    return tf.train.SingularMonitoredSession(
        hooks=kwargs.get('hooks'), scaffold=kwargs.get('scaffold'),
        master=kwargs.get('master', ''), config=kwargs.get('config'),
        checkpoint_dir=kwargs.get('checkpoint_dir'),
        stop_grace_period_secs=kwargs.get('stop_grace_period_secs', 120))
  if kwargs.get('is_chief', True) or non_chief_wait_secs is None:
    return tf.train.MonitoredTrainingSession(**kwargs)
  creator = NonChiefSessionCreator(
      kwargs.get('scaffold') or tf.train.Scaffold(), kwargs.get('master', ''),
      kwargs.get('config'), non_chief_wait_secs,
      max_wait_secs=kwargs.get('max_wait_secs', 7200))
  return tf.train.MonitoredSession(
      session_creator=creator, hooks=kwargs.get('hooks') or [],
      stop_grace_period_secs=kwargs.get('stop_grace_period_secs', 120))


class PlacementReportHook(tf.train.SessionRunHook):
  """Logs, when the session starts, what each ps task holds.

  Runs in `begin`, once the graph is built and before the session waits for
  the cluster, so the lines come first in the log, e.g.

    variables on 2 ps task(s), round_robin placement:
      ps task 0: 5 variables, 13093384 bytes (12.5 MiB)
      ps task 1: 4 variables, 4648 bytes (0.0 MiB)

  Args:
    num_ps_tasks: number of ps tasks (tasks holding nothing are listed).
    strategy: the --ps_strategy, for the log.
    log_fn: where lines go (tf.logging.info by default).
  """

  def __init__(self, num_ps_tasks, strategy, log_fn=None):
    self._num_ps_tasks = num_ps_tasks
    self._strategy = strategy
    self._log = log_fn or tf.logging.info

  def begin(self):
    variables = tf.global_variables()
    if self._num_ps_tasks:
      self._log('variables on %d ps task(s), %s placement:',
                self._num_ps_tasks, self._strategy)
    else:
      self._log('variables on every worker (all-reduce), here:')
    for line in device_placement.placement_report(variables,
                                                  self._num_ps_tasks):
      self._log('  %s', line)


class ReleaseWaitingWorkersHook(tf.train.SessionRunHook):
  """When a worker stops, gives each other worker tokens to end its step.

  With SyncReplicasOptimizer a worker's step ends by taking a token from a
  queue that the chief's queue runner fills after each global step, once
  enough fresh gradients have come. Once the chief has stopped, no tokens
  come; once the other workers have stopped, no gradients come. Either way
  a worker whose step started before the final global step (or whose
  gradient was dropped as stale) would wait forever. That happens to the
  chief too: StopAtStepHook decides on the global step read when a step
  began, which can be steps old when the step ends, so the chief may begin
  one more step after the others have left. Two tokens per other
  worker are enough for each to finish that step and one more, after
  which it sees the final step and stops; tokens left over only give a
  restarted cluster a few steps of slack, like the chief's initial tokens
  do.

  Args:
    sync_optimizer: the tf.train.SyncReplicasOptimizer, after
      apply_gradients.
    num_workers: number of workers in the cluster.
  """

  def __init__(self, sync_optimizer, num_workers):
    self._sync_optimizer = sync_optimizer
    self._num_tokens = 2 * max(0, num_workers - 1)
    self._release = None

  def begin(self):
    if self._num_tokens:
      self._release = self._sync_optimizer.get_init_tokens_op(
          self._num_tokens)

  def end(self, session):
    if self._release is None:
      return
    try:
      session.run(self._release)
    except tf.errors.CancelledError:
      # The chief has stopped: it released its tokens, then its queue runner
      # closed the queue, which still hands them out.
      pass


def sync_replicas_hooks(sync_optimizer, is_chief, num_workers):
  """The hooks a worker training with SyncReplicasOptimizer needs."""
  return [sync_optimizer.make_session_run_hook(is_chief),
          ReleaseWaitingWorkersHook(sync_optimizer, num_workers)]


class ClusterMismatch(Exception):
  """The all-reduce workers were started with different clusters."""


_GROUP_SIZE_MISMATCH = re.compile(
    r'joining a group with size ?(\d+), but that group has size ?(\d+)')


def check_same_cluster(task, deployment, master, timeout_secs):
  """Before training, makes sure every all-reduce worker has this cluster.

  Each worker all-reduces a fingerprint of its worker list in a graph of
  its own: workers with lists of another length cannot form the group,
  lists of the same length but other addresses give another sum. Either
  way every worker stops here, before anything is written.

  Raises:
    ClusterMismatch: naming this worker's list.
    tf.errors.OpError: a worker did not join within `timeout_secs`.
  """
  listed = ','.join(task.worker_hosts)
  fingerprint = float(zlib.crc32(listed.encode()))
  group = collectives.CollectiveGroup(
      task.num_workers, group_key=collectives.CLUSTER_CHECK_GROUP_KEY,
      timeout_seconds=timeout_secs)
  with tf.Graph().as_default():
    with tf.device(deployment.optimizer_device()):
      total = collectives.all_reduce_sum(
          tf.constant([fingerprint], tf.float64), group, 'cluster_check', 0)
    config = model_deploy.session_config(
        deployment, device_filters=task.device_filters)
    with tf.Session(master, config=config) as session:
      try:
        agreed = session.run(total)[0] == fingerprint * task.num_workers
      except tf.errors.InternalError as e:
        sizes = _GROUP_SIZE_MISMATCH.search(e.message)
        if not sizes:
          raise
        agreed = False
  if not agreed:
    raise ClusterMismatch(
        'the all-reduce workers were given different clusters: this '
        'worker (task %d, from %s) lists %d workers, %s, and another lists '
        'other ones; give every task the same --worker_hosts (or TF_CONFIG '
        'cluster)' % (task.task_index, task.source, task.num_workers,
                      listed))
