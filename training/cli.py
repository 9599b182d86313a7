"""The `main` both scripts share: flag parsing, logging set-up and errors
as exit codes.

  def main(unused_argv):
    cli.run_main(lambda: train(run_config.from_flags(FLAGS)))

  if __name__ == '__main__':
    cli.run_app(main)

Exit statuses: 0 done; 2 bad flags or input files (a flag that does not
parse, a UsageError, or a corrupt TFRecord file met while reading) and
other failures a restart would meet again (LastingFailure: a full or
read-only disk); 3 training diverged (TrainingDiverged). Each error prints
as 'error: ...' lines on stderr, without a traceback. Anything else is a
bug and keeps its traceback.
"""

import logging
import sys

from absl import app
from absl import flags

from tf2_compat.op_errors import one_line
from tf2_compat.slim_compat import tf
from training.errors import ScriptError

USAGE_EXIT_CODE = 2


def parse_flags(argv):
  """absl's flag parsing, with a parse error as one 'error:' line and exit
  status 2 (absl's own prints a FATAL line and exits 1).

  Returns:
    The arguments left after the flags, as absl's parser does.
  """
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    # A flagfile that cannot be opened comes as 'ERROR:: Unable to open ...'.
    reason = str(e).removeprefix('ERROR:: ')
    _fail(USAGE_EXIT_CODE, ['%s (--helpfull lists the flags)' % reason])


def run_app(main):
  """absl.app.run(main) with parse_flags as the flag parser."""
  app.run(main, flags_parser=parse_flags)


def run_main(body):
  """Runs `body()`; exits with the status its error calls for."""
  tf.logging.set_verbosity(tf.logging.INFO)
  # absl's handler already prints TensorFlow's records once.
  logging.getLogger('tensorflow').propagate = False
  try:
    body()
  except ScriptError as e:
    _fail(e.exit_code, e.lines)
  except tf.errors.DataLossError as e:
    # Raised by reading a corrupt file; tfrecord_check names the file.
    _fail(USAGE_EXIT_CODE, [e.message])


def _fail(exit_code, lines):
  for line in lines:
    print('error: %s' % one_line(line), file=sys.stderr)
  sys.exit(exit_code)
