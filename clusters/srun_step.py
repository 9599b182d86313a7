"""The srun job step this process is one task of, from what srun sets.

TensorFlow's SlurmClusterResolver reads SLURM_PROCID, SLURM_STEP_NUM_TASKS,
SLURM_STEP_NODELIST and SLURM_STEP_TASKS_PER_NODE, and trusts them: a rank
outside the step gives no task (a TypeError later), an empty node list
"max() arg is an empty sequence". clusters.slurm also reads SLURMD_NODENAME
and SLURM_LOCALID. `SrunStep(os.environ)` checks all six before the
resolver sees them; a bad one is a ValueError naming the variable, its
value and the fix:

  --slurm: SLURM_PROCID='5' is not a task of this srun step, whose 3 tasks
  (SLURM_STEP_NUM_TASKS) are 0 to 2; start every task with srun, or drop
  --slurm

The node list and the tasks per node are read with the resolver's own
parsers, so that what passes here is what it reads.
"""

import os

# Imports TensorFlow quietly, before the resolver's module.
from tf2_compat import slim_compat  # pylint: disable=unused-import
# pylint: disable=g-direct-tensorflow-import,g-bad-import-order
from tensorflow.python.distribute.cluster_resolver import (
    slurm_cluster_resolver)

FIX = 'start every task with srun, or drop --slurm'


def _problem(text):
  return ValueError('--slurm: %s; %s' % (text, FIX))


def _setting(environ, name):
  """NAME='value', as a shell would set it, for the error messages."""
  return '%s=%r' % (name, environ[name])


def _required(environ, name):
  if name not in environ:
    raise _problem('%s is not set, so this process is not a task of a srun '
                   'step' % name)
  return environ[name]


def _whole_number(environ, name):
  text = _required(environ, name)
  try:
    return int(text)
  except ValueError:
    raise _problem('%s is not a whole number'
                   % _setting(environ, name)) from None


class SrunStep:
  """What srun tells one task about its step, checked; read-only after.

  Properties:
    rank: SLURM_PROCID, 0 to num_tasks - 1.
    num_tasks: SLURM_STEP_NUM_TASKS, 1 or more.
    nodes: the names SLURM_STEP_NODELIST expands to, in its order.
    tasks_per_node: SLURM_STEP_TASKS_PER_NODE expanded, one count per node
      of `nodes`; they add up to num_tasks.
    node: SLURMD_NODENAME, one of `nodes`; None where it is not set.
    local_id: SLURM_LOCALID, this task's place among the tasks of `node`;
      None where it is not set.

  Raises:
    ValueError: on construction, for a variable the resolver reads that is
      missing, and for any of the six whose value srun would not set.
  """

  def __init__(self, environ=None):
    environ = os.environ if environ is None else environ
    self._rank = _whole_number(environ, 'SLURM_PROCID')
    self._num_tasks = _whole_number(environ, 'SLURM_STEP_NUM_TASKS')
    if self._num_tasks < 1:
      raise _problem('%s: a srun step has 1 task or more'
                     % _setting(environ, 'SLURM_STEP_NUM_TASKS'))
    if not 0 <= self._rank < self._num_tasks:
      raise _problem('%s is not a task of this srun step, whose %d tasks '
                     '(SLURM_STEP_NUM_TASKS) are 0 to %d' % (
                         _setting(environ, 'SLURM_PROCID'), self._num_tasks,
                         self._num_tasks - 1))
    self._nodes = tuple(_node_list(environ))
    self._tasks_per_node = tuple(_tasks_per_node(environ, self._nodes,
                                                 self._num_tasks))
    self._node = environ.get('SLURMD_NODENAME')
    if self._node is not None and self._node not in self._nodes:
      raise _problem('%s is not a node of this srun step (%s)' % (
          _setting(environ, 'SLURMD_NODENAME'),
          _setting(environ, 'SLURM_STEP_NODELIST')))
    self._local_id = None
    if 'SLURM_LOCALID' in environ:
      self._local_id = _whole_number(environ, 'SLURM_LOCALID')
      self._check_local_id(environ)

  def _check_local_id(self, environ):
    if self._node is None:
      tasks, where = max(self._tasks_per_node), 'any node of this srun step'
    else:
      tasks = self._tasks_per_node[self._nodes.index(self._node)]
      where = 'node %s' % self._node
    if not 0 <= self._local_id < tasks:
      raise _problem('%s is not a task of %s, which runs %d of its tasks '
                     '(SLURM_STEP_TASKS_PER_NODE): 0 to %d' % (
                         _setting(environ, 'SLURM_LOCALID'), where, tasks,
                         tasks - 1))

  @property
  def rank(self):
    return self._rank

  @property
  def num_tasks(self):
    return self._num_tasks

  @property
  def nodes(self):
    return self._nodes

  @property
  def tasks_per_node(self):
    return self._tasks_per_node

  @property
  def node(self):
    return self._node

  @property
  def local_id(self):
    return self._local_id


def _node_list(environ):
  name = 'SLURM_STEP_NODELIST'
  try:
    nodes = slurm_cluster_resolver.expand_hostlist(_required(environ, name))
  except ValueError:
    raise _problem('%s is not a Slurm node list (such as n[01-04],gpu7)'
                   % _setting(environ, name)) from None
  if not nodes:
    raise _problem('%s names no node' % _setting(environ, name))
  for node in nodes:
    if nodes.count(node) > 1:
      raise _problem('%s names node %s twice' % (_setting(environ, name),
                                                  node))
  return nodes


def _tasks_per_node(environ, nodes, num_tasks):
  name = 'SLURM_STEP_TASKS_PER_NODE'
  try:
    counts = slurm_cluster_resolver.expand_tasks_per_node(
        _required(environ, name))
  except ValueError:
    raise _problem('%s is not a Slurm tasks-per-node list (such as '
                   '2(x3),1)' % _setting(environ, name)) from None
  if len(counts) != len(nodes):
    raise _problem('%s gives the task counts of %d node(s), but %s has %d' % (
        _setting(environ, name), len(counts),
        _setting(environ, 'SLURM_STEP_NODELIST'), len(nodes)))
  if 0 in counts:
    raise _problem('%s gives a node no task' % _setting(environ, name))
  if sum(counts) != num_tasks:
    raise _problem('%s makes %d tasks, but %s' % (
        _setting(environ, name), sum(counts),
        _setting(environ, 'SLURM_STEP_NUM_TASKS')))
  return counts
