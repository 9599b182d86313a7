"""Errors caused by the user's flags or files rather than by a bug."""


class UsageError(Exception):
  """A bad flag value or a missing file; the message names it and the fix.

  The scripts print these without a traceback and exit with status 2,
  before anything is written to train_dir.
  """
