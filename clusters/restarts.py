"""When a task of a local cluster fails: restart it alone, restart every
task, or give up; and the lines that say which.

Decisions and lines only, no processes (clusters/local_cluster.py runs
those), so that the policy is tested without a cluster. What a restart
covers follows from how the cluster trains:

  * all-reduce (no ps tasks): every step needs every worker, and the
    others stop when one dies (as with MultiWorkerMirroredStrategy), so
    every task is restarted; they resume from the latest checkpoint.
  * synchronous ps training (--sync_replicas): a global step waits for
    the gradients of --replicas_to_aggregate workers, so every task is
    restarted too.
  * asynchronous ps training: each worker steps on its own, so a task that
    dies, worker or ps, is restarted alone, on its address, and the others
    go on.

Two budgets: --max_restarts counts the restarts of any task, whatever they
cover; --ps_restarts (the older flag) restarts ps tasks only, alone, in
any mode, and a dead ps task draws on it first. --max_restarts never
restarts a task that exited 2: that is the scripts' status for what a
restart would meet again, bad input (a flag, a file, a port taken) or a
full disk (a checkpoint that cannot be written).
"""

import collections
import math
import os
import re
import threading

from clusters import script_contract

ALL_REDUCE = 'all-reduce'
SYNC_PS = 'synchronous ps'
ASYNC_PS = 'asynchronous ps'

RESTART_TASK = 'restart the task'
RESTART_CLUSTER = 'restart every task'
GIVE_UP = 'give up'

BAD_INPUT_STATUS = 2

_LATEST_CHECKPOINT = re.compile(r'^model_checkpoint_path:\s*"(.*)"\s*$',
                                re.M)
_FALSE = ('false', 'f', '0')


# action: one of RESTART_TASK, RESTART_CLUSTER, GIVE_UP. flag: the budget
# the restart draws on ('--max_restarts' or '--ps_restarts'); number: the
# restart's number in it, 1 first; allowed: the budget's size.
Decision = collections.namedtuple('Decision',
                                  ['action', 'flag', 'number', 'allowed'])

# What the launcher reads of the script's own arguments: --train_dir (None
# when not given) and whether --sync_replicas is on.
ScriptArgs = collections.namedtuple('ScriptArgs',
                                    ['train_dir', 'sync_replicas'])


def check_seconds(name, value, zero_allowed, fix):
  """Raises ValueError, naming `name`, `value` and the `fix`, unless `value`
  is a finite number of seconds > 0 (>= 0 when `zero_allowed`)."""
  if not (math.isfinite(value) and (value >= 0 if zero_allowed else
                                    value > 0)):
    raise ValueError('%s must be a finite number of seconds %s 0, got %s; '
                     'give %s' % (name, '>=' if zero_allowed else '>', value,
                                  fix))


def read_script_args(command):
  """The ScriptArgs of `command`, [script, args...], read as absl does.

  `--train_dir=D`, `--train_dir D`, `--sync_replicas`,
  `--sync_replicas=false`, `--nosync_replicas`, one dash or two; the last
  one given wins; nothing after a lone `--` is a flag. Only the command
  line is read: a --flagfile is not.
  """
  train_dir, sync_replicas = None, False
  args = list(command[1:])
  while args:
    arg = args.pop(0)
    if arg == '--':
      break
    if not arg.startswith('-'):
      continue
    name, has_value, value = arg.lstrip('-').partition('=')
    if name == script_contract.TRAIN_DIR_FLAG:
      if not has_value and args:
        value = args.pop(0)
      train_dir = value
    elif name == script_contract.SYNC_REPLICAS_FLAG:
      sync_replicas = not has_value or value.lower() not in _FALSE
    elif name == 'no' + script_contract.SYNC_REPLICAS_FLAG:
      sync_replicas = False
  return ScriptArgs(train_dir, sync_replicas)


def training_mode(num_ps, script_args):
  """ALL_REDUCE without ps tasks, else SYNC_PS or ASYNC_PS."""
  if not num_ps:
    return ALL_REDUCE
  return SYNC_PS if script_args.sync_replicas else ASYNC_PS


def latest_checkpoint_step(train_dir):
  """The global step of the checkpoint that `train_dir`'s index (its
  `checkpoint` file) names as the latest; None when there is none."""
  try:
    with open(os.path.join(train_dir, 'checkpoint')) as index:
      text = index.read()
  except OSError:
    return None
  latest = _LATEST_CHECKPOINT.search(text)
  step = latest and re.search(r'-(\d+)$', latest.group(1))
  return int(step.group(1)) if step else None


class RestartPolicy:
  """Decides what a failed task's exit leads to, and counts the restarts.

  Args:
    mode: ALL_REDUCE, SYNC_PS or ASYNC_PS (see training_mode).
    max_restarts: restarts of any task, in all.
    ps_restarts: restarts of ps tasks alone, drawn on first.

  Raises:
    ValueError: a negative budget.
  """

  def __init__(self, mode, max_restarts=0, ps_restarts=0):
    for flag, value, zero_means in (
        ('max_restarts', max_restarts, 'a failed task stops the cluster'),
        ('ps_restarts', ps_restarts, 'a dead ps task stops the cluster')):
      if value < 0:
        raise ValueError('%s must be >= 0, got %d; give 0 (%s) or more'
                         % (flag, value, zero_means))
    self.mode = mode
    self._allowed = {'--max_restarts': max_restarts,
                     '--ps_restarts': ps_restarts}
    self._used = {'--max_restarts': 0, '--ps_restarts': 0}

  def decide(self, task_name, status):
    """The Decision for `task_name` failing with exit `status`; a restart
    decided is counted."""
    if task_name.startswith('ps') and self._left('--ps_restarts'):
      return self._draw('--ps_restarts', RESTART_TASK)
    if status == BAD_INPUT_STATUS or not self._left('--max_restarts'):
      return self._decision(GIVE_UP, '--max_restarts')
    alone = self.mode == ASYNC_PS
    return self._draw('--max_restarts',
                      RESTART_TASK if alone else RESTART_CLUSTER)

  def _left(self, flag):
    return self._allowed[flag] - self._used[flag]

  def _draw(self, flag, action):
    self._used[flag] += 1
    return self._decision(action, flag)

  def _decision(self, action, flag):
    return Decision(action, flag, self._used[flag], self._allowed[flag])


class Backoff:
  """How long the launcher waits before a restart.

  A task that fails as it starts, with a status other than 2, would be
  restarted as fast as Python starts, and use up any --max_restarts in
  seconds. So a restart that follows the last one within
  `reset_secs` waits `first_secs`, then twice as long at each such restart,
  up to `max_secs`. Once the tasks have run `reset_secs` since the last
  restart, the next one is made at once and the count starts again: a
  failure now and then does not pay for an old streak.

  Args:
    first_secs: the wait of the first quick restart.
    max_secs: the longest wait.
    reset_secs: how long the tasks must run for the next restart to be
      made at once.

  Raises:
    ValueError: unless 0 < first_secs <= max_secs.
  """

  def __init__(self, first_secs=1, max_secs=30, reset_secs=60):
    if not 0 < first_secs <= max_secs:
      raise ValueError('a Backoff needs 0 < first_secs <= max_secs, got %s '
                       'and %s' % (first_secs, max_secs))
    self.first_secs = first_secs
    self.max_secs = max_secs
    self.reset_secs = reset_secs
    self._last = None  # When the last restart was made (time.monotonic).
    self._quick = 0  # How often the wait has doubled in this streak.

  def pause(self, now):
    """(seconds to wait, the launcher's line on it) before a restart
    decided at `now` (time.monotonic); (0, None) when it is made at once.
    The restart counts as made when the wait ends."""
    since = None if self._last is None else now - self._last
    if since is None or since >= self.reset_secs:
      self._quick, wait = 0, 0
    else:
      wait = min(self.max_secs, self.first_secs * 2 ** self._quick)
      if wait < self.max_secs:  # Past it, 2 ** _quick need not grow.
        self._quick += 1
    self._last = now + wait
    if not wait:
      return 0, None
    return wait, (
        '[launch] waiting %g s before restarting: the last restart was %.1f '
        's ago (restarts less than %g s apart wait %g s, twice as long each '
        'time, up to %g s)\n' % (wait, since, self.reset_secs,
                                  self.first_secs, self.max_secs))


def rolls_back(task_name):
  """Whether restarting `task_name` alone (asynchronous ps training) takes
  the cluster back to the latest checkpoint: the chief restores it as it
  starts, and onto a restarted ps task."""
  return task_name == 'worker0' or task_name.startswith('ps')


def failure_line(task_name, status, decision, address):
  """The launcher's line on a failed task and what follows.

  Without --max_restarts, and for --ps_restarts, the lines of the
  launcher before --max_restarts existed, word for word: the exit status
  a --ps_restarts line shows is the task's own, 0 included; elsewhere a ps
  task's exit 0 shows as the launcher's status for it, 1.
  """
  if decision.flag == '--ps_restarts':
    return ('[launch] %s exited with status %d; restarting it on %s (%d more '
            'restart(s) allowed)\n' % (task_name, status, address,
                                       decision.allowed - decision.number))
  status = status or 1
  if decision.action == GIVE_UP:
    if not decision.allowed:
      why = ''
    elif status == BAD_INPUT_STATUS:
      why = (', which is not restarted: the scripts exit 2 for what a '
             'restart would meet again (bad input, a full disk; see its '
             'error above)')
    else:
      why = ' after %d restart(s), all that --max_restarts %d allows' % (
          decision.number, decision.allowed)
    return ('[launch] %s failed with exit status %d%s; stopping the '
            'cluster\n' % (task_name, status, why))
  count = 'restart %d of --max_restarts %d' % (decision.number,
                                               decision.allowed)
  if decision.action == RESTART_TASK:
    return ('[launch] %s failed with exit status %d; restarting it alone on '
            '%s (%s); the other tasks go on\n' % (task_name, status, address,
                                                  count))
  return ('[launch] %s failed with exit status %d; stopping every task to '
          'restart the cluster (%s)\n' % (task_name, status, count))


def _resumed_from(train_dir, resumed):
  if resumed is None:
    return 'step 0 (no checkpoint in %s yet)' % train_dir
  return 'step %d, the latest checkpoint in %s' % (resumed, train_dir)


def _steps_lost(resumed, logged):
  if logged is None:
    return 'no step was logged since the last start'
  return '%d step(s) lost (the workers had logged step %d)' % (
      max(0, logged - (resumed or 0)), logged)


_NO_TRAIN_DIR = "(no --train_dir among its arguments to read the step from)"


def every_task_line(train_dir, resumed, logged):
  """The launcher's line as it starts every task again.

  Args:
    train_dir: the script's --train_dir (None: not given).
    resumed: the step of train_dir's latest checkpoint (None: none yet).
    logged: the highest step the workers logged since they last started
      (None: none).
  """
  lead = '[launch] starting every task again on new ports: '
  if train_dir is None:
    return lead + ("they resume from the latest checkpoint of the script's "
                   "train_dir %s\n" % _NO_TRAIN_DIR)
  return lead + 'resuming from %s; %s\n' % (_resumed_from(train_dir, resumed),
                                             _steps_lost(resumed, logged))


def rollback_line(train_dir, resumed, logged):
  """The launcher's line when the chief or a ps task is restarted alone
  (asynchronous ps training): as it restores, the chief takes every
  variable, on every ps task, back to train_dir's latest checkpoint, and
  the steps the other workers run until then are lost as well; arguments
  as for every_task_line."""
  lead = '[launch] the chief restores '
  if train_dir is None:
    return lead + ("the latest checkpoint of the script's train_dir onto the "
                   "ps tasks %s\n" % _NO_TRAIN_DIR)
  return lead + '%s, onto the ps tasks: at least %s\n' % (
      _resumed_from(train_dir, resumed), _steps_lost(resumed, logged))


class StepLog:
  """The highest global step the workers logged since the cluster last
  started, read from their progress lines (script_contract.STEP_LINE): the highest of
  each task's latest, so that a cluster taken back to a checkpoint counts
  from there.

  Each start has a number; a line relayed from an earlier start (a task
  stopped for the restart, its last lines still in the pipe) is not
  counted.
  """

  def __init__(self):
    self._lock = threading.Lock()
    self._start = 0
    self._latest = {}  # Task name -> the step of its latest line.

  def new_start(self):
    """Forgets the steps logged so far; returns the new start's number."""
    with self._lock:
      self._start += 1
      self._latest = {}
      return self._start

  def observe(self, start, task_name, line):
    """Counts `line`, relayed from `task_name` of start number `start`."""
    match = script_contract.STEP_LINE.search(line)
    if match is None:
      return
    with self._lock:
      if start == self._start:
        self._latest[task_name] = int(match.group(1))

  @property
  def highest(self):
    with self._lock:
      return max(self._latest.values(), default=None)
