"""Errors the scripts report to the user, and their exit statuses.

  ScriptError        a failure the user can act on; printed without a
                     traceback as 'error: <line>' lines.
  UsageError         bad flags or input files (exit 2); raised before
                     anything is written to train_dir. Carries every
                     problem found, one line each.
  TrainingDiverged   the loss or the weights became NaN (exit 3); the last
                     good checkpoint is kept.
"""

import re

# TensorFlow's text of an op error raised by a session run: "Graph execution
# error:", then, when it can show one, the Python stack that built the op (30
# lines and more) and the op's name, then the reason, and the op again in
# [[...]]. Only the reason is for the user.
_GRAPH_EXECUTION_ERROR = re.compile(
    r"Graph execution error:\s*(?:Detected at node.*?\nNode: '[^'\n]*'\n)?"
    r"(.*?)\n\s*\[\[[^\n]*\]\]", re.DOTALL)


def without_op_stacks(text):
  """`text` with each TensorFlow "Graph execution error" cut to its reason:
  'corrupted record at 12' instead of 30 lines of stack around it."""
  return _GRAPH_EXECUTION_ERROR.sub(lambda m: m.group(1).strip(), text)


def one_line(text):
  """`text` on one line: TensorFlow's op stacks cut (without_op_stacks), its
  [[node]] lines dropped, the other lines joined."""
  lines = [line.strip() for line in without_op_stacks(text).splitlines()
           if line.strip() and not line.strip().startswith('[[')]
  return ' '.join(lines)


def op_error_reason(error):
  """What a TensorFlow error (or any exception) says went wrong, on one
  line."""
  text = getattr(error, 'message', None) or str(error)
  return one_line(text) or type(error).__name__


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
