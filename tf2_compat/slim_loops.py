"""Lets `slim.learning.train` run on TF 2.x the way it ran on TF 1.x.

Three things stop tf-slim's training loop, and a fourth ends every run with
a warning; `install()` mends each where it happens, without
`tf.compat.v1.disable_eager_execution()`:

1. Supervisor threads start eager. In TensorFlow 2, eager execution is a
   per-thread default: a new thread starts eager, with no default graph of
   its own, whatever its creator was building. The Supervisor's helper
   threads (summaries, steps per second, timed checkpoints) then run TF1
   graph code eagerly: `tf.train.global_step(sess, step)` reads the graph
   tensor as an eager one and the step counter dies with "global_step:0
   ... is out of scope"; `Saver.save(sess, ...)` takes its eager path.
   `disable_eager_execution()` would switch every thread of the process,
   for good. Instead each `coordinator.LooperThread` (the class of those
   threads, and of `Supervisor.loop`) runs its loop inside a graph, only
   while the loop runs: the graph of its session for a thread holding one
   (the Supervisor's), else the graph its creator was building when it
   created the thread, else none (created by eager code: no change).
   Queue-runner threads (`slim.queues`, `prefetch_queue`, `tf.train.batch`)
   need nothing: they only call `sess.run`, which works from any thread.

2. With `sync_optimizer`, training never ends cleanly (TF 1.x too:
   tensorflow#20833, models#6566). After the last step the chief's
   gradient-aggregation thread (a `SyncReplicasOptimizer` chief queue
   runner) waits for gradients no worker will send; `train()`'s
   `Supervisor.stop` waits 120 s for it, then raises "Coordinator stopped
   with threads still running: QueueRunnerThread-sync_token_q-...". During
   a `train()` call, that runner's threads are started without being
   registered for the join (they still see stop requests and report
   errors); closing the session at the end cancels the wait, and the
   cancellation, coming after the stop, is not an error.

3. `train(..., graph=g)` called from eager code: the Supervisor refuses
   eager execution. The call enters `g` (graph mode, in this thread, for
   the call), as TF 1.x had it.

4. "UserWarning: Attempting to use a closed FileWriter" at the end of every
   run. `train()` stops the Supervisor itself after its last checkpoint
   (closing the summary writer), then leaves `managed_session`, which
   stops it again: the second stop wrote a STOP event to the writer the
   first had closed (a no-op, hence the warning). `Supervisor.stop` now
   leaves a writer that is already closed alone; a writer the user
   reopened is written to and closed as before.

Everything else behaves as before: the main thread, other threads, eager
code and tf.function, a later `with tf.Graph().as_default()`, and
`MonitoredTrainingSession` with `SyncReplicasOptimizer` hooks.

These are the process-wide changes: `coordinator.LooperThread.__init__`
(records the creator's graph) and `.run` (enters it),
`supervisor.Supervisor.stop` and `tf_slim.learning.train` are wrapped.
`installed()` tells whether they are, `uninstall()` puts the originals
back.
"""

import functools
import importlib
import inspect

from tensorflow.python.eager import context
from tensorflow.python.framework import ops
from tensorflow.python.training import coordinator
from tensorflow.python.training import supervisor
from tensorflow.python.training import sync_replicas_optimizer
from tf2_compat import patching

_CREATOR_GRAPH = '_slim_compat_creator_graph'


def _recording_creator_graph(init):
  @functools.wraps(init)
  def wrapper(self, *args, **kwargs):
    init(self, *args, **kwargs)
    graph = None if context.executing_eagerly() else ops.get_default_graph()
    setattr(self, _CREATOR_GRAPH, graph)
  return wrapper


def _graph_of(thread):
  session = getattr(thread, '_sess', None)  # The Supervisor's threads.
  graph = getattr(session, 'graph', None)
  return graph if graph is not None else getattr(thread, _CREATOR_GRAPH, None)


def _running_in_graph(run):
  @functools.wraps(run)
  def wrapper(self):
    graph = _graph_of(self)
    if graph is None or not context.executing_eagerly():
      return run(self)
    with graph.as_default():
      return run(self)
  return wrapper


class _UnjoinedView:
  """The Coordinator as the sync chief's queue runner sees it.

  Its threads are not registered, so the coordinator's join does not wait
  for them; an error after the stop request (the session closing under a
  waiting thread) is dropped, as the coordinator drops it before its join.
  """

  def __init__(self, coord):
    self._coord = coord

  def register_thread(self, unused_thread):
    pass

  def should_stop(self):
    return self._coord.should_stop()

  def wait_for_stop(self, timeout=None):
    return self._coord.wait_for_stop(timeout)

  def request_stop(self, ex=None):
    if not self._coord.should_stop():
      self._coord.request_stop(ex)


def _create_unjoined_threads(runner, sess, coord=None, daemon=False,
                             start=False):
  del daemon  # Always: a thread left waiting must not keep the process.
  view = _UnjoinedView(coord) if coord is not None else None
  return type(runner).create_threads(runner, sess, coord=view, daemon=True,
                                     start=start)


def _sync_optimizers(sync_optimizer):
  if sync_optimizer is None:
    return []
  if isinstance(sync_optimizer, sync_replicas_optimizer.SyncReplicasOptimizer):
    return [sync_optimizer]
  return [opt for opt in sync_optimizer
          if isinstance(opt, sync_replicas_optimizer.SyncReplicasOptimizer)]


def _train_on_tf2(train):
  """Wraps slim.learning.train: items 2 and 3 of the module docstring."""
  signature = inspect.signature(train)

  @functools.wraps(train)
  def wrapper(*args, **kwargs):
    arguments = signature.bind(*args, **kwargs).arguments
    graph = arguments.get('graph')
    if graph is not None and context.executing_eagerly():
      with graph.as_default():
        return wrapper(*args, **kwargs)
    runners = []
    for optimizer in _sync_optimizers(arguments.get('sync_optimizer')):
      try:
        runner = optimizer.get_chief_queue_runner()
      except ValueError:
        continue  # No apply_gradients yet: train() reports it.
      if 'create_threads' not in vars(runner):
        runner.create_threads = functools.partial(_create_unjoined_threads,
                                                  runner)
        runners.append(runner)
    try:
      return train(*args, **kwargs)
    finally:
      for runner in runners:
        del runner.create_threads
  return wrapper


def _closing_the_writer_once(stop):
  """Wraps Supervisor.stop: item 4 of the module docstring."""
  signature = inspect.signature(stop)

  @functools.wraps(stop)
  def wrapper(*args, **kwargs):
    arguments = signature.bind(*args, **kwargs).arguments
    writer = arguments['self']._summary_writer  # pylint: disable=protected-access
    if getattr(writer, '_closed', False):  # A FileWriter stop() closed.
      arguments['close_summary_writer'] = False
    return stop(**arguments)
  return wrapper


def _targets():
  """(owner, attribute, wrap) of each wrapped function."""
  learning = importlib.import_module('tf_slim.learning')
  return ((coordinator.LooperThread, '__init__', _recording_creator_graph),
          (coordinator.LooperThread, 'run', _running_in_graph),
          (supervisor.Supervisor, 'stop', _closing_the_writer_once),
          (learning, 'train', _train_on_tf2))


def installed():
  """Whether the functions of `_targets()` are wrapped."""
  return patching.installed(_targets())


def install():
  """Wraps the functions; does nothing where they already are.

  Returns:
    The functions wrapped now, as 'Owner.name' strings (empty when they
    already were).
  """
  return patching.install(_targets())


def uninstall():
  """Puts the original functions back."""
  patching.uninstall(_targets())
