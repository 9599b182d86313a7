"""Errors caused by the user's flags or files rather than by a bug."""


class UsageError(Exception):
  """A bad flag value or a missing file; the message names it and the fix.

  The scripts print these without a traceback and exit with status 2,
  before anything is written to train_dir.
  """


def call_for_flag(flag_text, fn, *args, **kwargs):
  """Calls a factory; a ValueError, FileNotFoundError or corrupt-file error
  it raises becomes a UsageError prefixed with the flags that chose it.
  """
  # pylint: disable=g-import-not-at-top
  from deployment.slim_compat import tf
  try:
    return fn(*args, **kwargs)
  except (ValueError, FileNotFoundError) as e:
    raise UsageError('%s: %s' % (flag_text, e)) from None
  except tf.errors.DataLossError as e:
    raise UsageError('%s: %s' % (flag_text, e.message)) from None
