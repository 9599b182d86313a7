"""Times training steps of several graphs in interleaved rounds.

Interleaving (configuration A, B, C, then A, B, C again ...) spreads a
disturbance of the machine over all configurations alike, so their ratios
stay meaningful on a shared machine even when the absolute times do not.

  timed = [TimedGraph(build_a), TimedGraph(build_b)]
  load = time_interleaved(timed, rounds=5, steps=10)
  median_a = timed[0].median
"""

import statistics
import time

from tf2_compat.slim_compat import tf
from other_load import OtherLoad  # next to this file


class TimedGraph:
  """A graph, its session and the durations of its timed steps.

  Args:
    build_fn: builds the graph in the default graph; returns
      (op to time, tf.ConfigProto or None).
    warmup_steps: untimed steps run first.
  """

  def __init__(self, build_fn, warmup_steps=1):
    self.step_seconds = []
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._op, session_config = build_fn()
      self._session = tf.Session(config=session_config)
      self._session.run([tf.global_variables_initializer(),
                         tf.local_variables_initializer()])
      for _ in range(warmup_steps):
        self._session.run(self._op)

  @property
  def median(self):
    return statistics.median(self.step_seconds)

  def time_steps(self, steps):
    for _ in range(steps):
      start = time.perf_counter()
      self._session.run(self._op)
      self.step_seconds.append(time.perf_counter() - start)

  def close(self):
    self._session.close()


def time_interleaved(timed_graphs, rounds, steps):
  """Runs `steps` timed steps of each graph per round; closes them after.

  Returns:
    The OtherLoad measured meanwhile (see other_load.disturbance_note).
  """
  with OtherLoad() as load:
    for round_index in range(rounds):
      for timed in timed_graphs:
        timed.time_steps(steps)
      print('round %d of %d done' % (round_index + 1, rounds), flush=True)
  for timed in timed_graphs:
    timed.close()
  return load
