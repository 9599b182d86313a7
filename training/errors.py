"""Errors the scripts report to the user, and their exit statuses.

  ScriptError        a failure the user can act on; printed without a
                     traceback as 'error: <line>' lines.
  UsageError         bad flags or input files (exit 2); raised before
                     anything is written to train_dir. Carries every
                     problem found, one line each.
  LastingFailure     a failure during the run that a restart would meet
                     again, a full or read-only disk (exit 2, as bad
                     input: the launcher never restarts a task that
                     exits 2).
  NonFiniteGradients the gradient stayed not finite: every update skipped
                     by the loss scale, or a compressed all-reduce
                     overflowed (exit 2, as LastingFailure: a restart
                     would meet it again); train_dir is left as it was.
  TrainingDiverged   the loss or the weights became NaN (exit 3); the last
                     good checkpoint is kept.
"""


class ScriptError(Exception):
  """An error whose lines are printed as they are; `exit_code` is the
  process's exit status."""
  exit_code = 1

  def __init__(self, *lines):
    super().__init__('\n'.join(lines))
    self.lines = tuple(lines)


class UsageError(ScriptError):
  """Bad flag values or missing files; each line names one and its fix."""
  exit_code = 2


class LastingFailure(ScriptError):
  """A failure during the run that a restart would meet again (a full or
  read-only disk); exits 2 like bad input, so nothing restarts into it."""
  exit_code = 2


class NonFiniteGradients(LastingFailure):
  """Training stopped because its gradient stayed not finite: the loss
  scale skipped every update, or the float16 all-reduce overflowed; the
  line says which and what to change."""


class TrainingDiverged(ScriptError):
  """Training stopped on a NaN loss or non-finite weights."""
  exit_code = 3


class Problems:
  """Collects the problems of a configuration so that all are reported.

    problems = Problems()
    problems.check(batch_size >= 1, '--batch_size must be >= 1, got 0')
    dataset = problems.attempt(get_dataset, name)   # None if it failed
    problems.raise_if_any()                           # UsageError, all lines
  """

  def __init__(self):
    self._lines = []

  def __bool__(self):
    return bool(self._lines)

  def add(self, line):
    self._lines.append(line)

  def check(self, condition, line):
    """Adds `line` unless `condition` holds; returns `condition`."""
    if not condition:
      self.add(line)
    return condition

  def attempt(self, fn, *args, **kwargs):
    """fn(*args, **kwargs), or None after recording its UsageError."""
    try:
      return fn(*args, **kwargs)
    except UsageError as e:
      self._lines.extend(e.lines)
      return None

  def raise_if_any(self):
    if self._lines:
      raise UsageError(*self._lines)


def call_for_flag(flag_text, fn, *args, **kwargs):
  """Calls a factory; a ValueError, FileNotFoundError or corrupt-file error
  it raises becomes a UsageError prefixed with the flags that chose it.
  """
  # pylint: disable=g-import-not-at-top
  from tf2_compat.slim_compat import tf
  try:
    return fn(*args, **kwargs)
  except (ValueError, FileNotFoundError) as e:
    raise UsageError('%s: %s' % (flag_text, e)) from None
  except tf.errors.DataLossError as e:
    raise UsageError('%s: %s' % (flag_text, e.message)) from None
