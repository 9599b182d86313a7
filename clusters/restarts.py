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
restarts a task that exited 2: that is the scripts' status for bad input
(a flag, a file, a port taken), which a restart would meet again.
"""

import collections
import os
import re
import threading

ALL_REDUCE = 'all-reduce'
SYNC_PS = 'synchronous ps'
ASYNC_PS = 'asynchronous ps'

RESTART_TASK = 'restart the task'
RESTART_CLUSTER = 'restart every task'
GIVE_UP = 'give up'

BAD_INPUT_STATUS = 2

# The progress line of train_image_classifier.py (training/hooks.py).
STEP_LINE = re.compile(r'\bstep (\d+): loss = ')
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
    if name == 'train_dir':
      if not has_value and args:
        value = args.pop(0)
      train_dir = value
    elif name == 'sync_replicas':
      sync_replicas = not has_value or value.lower() not in _FALSE
    elif name == 'nosync_replicas':
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
    self.max_restarts = max_restarts
    self.ps_restarts = ps_restarts
    self._used = {'--max_restarts': 0, '--ps_restarts': 0}

  def decide(self, task_name, status):
    """The Decision for `task_name` failing with exit `status`; a restart
    decided is counted."""
    if task_name.startswith('ps') and self._left('--ps_restarts'):
      return self._draw('--ps_restarts', RESTART_TASK)
    if status == BAD_INPUT_STATUS or not self._left('--max_restarts'):
      return Decision(GIVE_UP, '--max_restarts', self._used['--max_restarts'],
                      self.max_restarts)
    alone = self.mode == ASYNC_PS
    return self._draw('--max_restarts',
                      RESTART_TASK if alone else RESTART_CLUSTER)

  def _left(self, flag):
    allowed = (self.max_restarts if flag == '--max_restarts'
               else self.ps_restarts)
    return allowed - self._used[flag]

  def _draw(self, flag, action):
    self._used[flag] += 1
    allowed = self._left(flag) + self._used[flag]
    return Decision(action, flag, self._used[flag], allowed)


def failure_line(task_name, status, decision, address):
  """The launcher's line on a failed task and what follows.

  Without --max_restarts, and for --ps_restarts, the lines of the
  launcher before --max_restarts existed, word for word.
  """
  if decision.action == GIVE_UP:
    if not decision.allowed:
      why = ''
    elif status == BAD_INPUT_STATUS:
      why = ' (bad input, which a restart would meet again)'
    else:
      why = ' after %d restart(s), all that --max_restarts %d allows' % (
          decision.number, decision.allowed)
    return '[launch] %s failed with exit status %d%s; stopping the cluster\n' % (
        task_name, status, why)
  if decision.flag == '--ps_restarts':
    return ('[launch] %s exited with status %d; restarting it on %s (%d more '
            'restart(s) allowed)\n' % (task_name, status, address,
                                       decision.allowed - decision.number))
  count = 'restart %d of --max_restarts %d' % (decision.number,
                                               decision.allowed)
  if decision.action == RESTART_TASK:
    return ('[launch] %s failed with exit status %d; restarting it alone on '
            '%s (%s); the other tasks go on\n' % (task_name, status, address,
                                                  count))
  return ('[launch] %s failed with exit status %d; stopping every task to '
          'restart the cluster (%s)\n' % (task_name, status, count))


def resume_line(train_dir, resumed, logged):
  """The launcher's line as it starts every task again.

  Args:
    train_dir: the script's --train_dir (None: not given).
    resumed: the step of train_dir's latest checkpoint (None: none yet).
    logged: the highest step the tasks logged since they last started
      (None: none).
  """
  if train_dir is None:
    return ('[launch] starting every task again on new ports: they resume '
            'from the latest checkpoint of the script\'s train_dir (no '
            '--train_dir among its arguments to read the step from)\n')
  if resumed is None:
    where = 'step 0 (no checkpoint in %s yet)' % train_dir
  else:
    where = 'step %d, the latest checkpoint in %s' % (resumed, train_dir)
  if logged is None:
    lost = 'no step was logged since the last start'
  else:
    lost = '%d step(s) lost (the workers had logged step %d)' % (
        max(0, logged - (resumed or 0)), logged)
  return '[launch] starting every task again on new ports: resuming from ' \
      '%s; %s\n' % (where, lost)


class StepLog:
  """The highest global step the tasks logged since the cluster last
  started, read from their progress lines (STEP_LINE).

  Each start has a number; a line relayed from an earlier start (a task
  stopped for the restart, its last lines still in the pipe) is not
  counted.
  """

  def __init__(self):
    self._lock = threading.Lock()
    self._start = 0
    self._highest = None

  def new_start(self):
    """Forgets the steps logged so far; returns the new start's number."""
    with self._lock:
      self._start += 1
      self._highest = None
      return self._start

  def observe(self, start, line):
    """Counts `line`, relayed from a task of start number `start`."""
    match = STEP_LINE.search(line)
    if match is None:
      return
    with self._lock:
      if start == self._start:
        self._highest = max(self._highest or 0, int(match.group(1)))

  @property
  def highest(self):
    with self._lock:
      return self._highest
