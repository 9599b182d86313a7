"""The `main` both scripts share: logging set-up and errors as exit codes.

  def main(unused_argv):
    cli.run_main(lambda: train(run_config.from_flags(FLAGS)))

Exit statuses: 0 done; 2 bad flags or input files (UsageError, or a
corrupt TFRecord file met while reading); 3 training diverged
(TrainingDiverged). Each error prints as 'error: ...' lines on stderr,
without a traceback. Anything else is a bug and keeps its traceback.
"""

import logging
import sys

from deployment.slim_compat import tf
from training.errors import ScriptError


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
    _fail(2, [e.message])


def _fail(exit_code, lines):
  for line in lines:
    print('error: %s' % line, file=sys.stderr)
  sys.exit(exit_code)
