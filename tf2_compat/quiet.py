"""Keeps the lines TensorFlow, tf-keras and tf-slim print for nobody off stderr.

On a machine without a GPU, TensorFlow 2.21 + tf-keras + tf-slim print about
ten lines per run that no user of this project can act on. This module drops
exactly those, and nothing else:

  C++, while TensorFlow loads (the process's stderr, filtered line by line):
    WARNING: All log messages before absl::InitializeLog() is called ...
    I... cudart_stub.cc:31] Could not find cuda drivers on your machine, ...
    E... cuda_platform.cc:52] failed call to cuInit: ... UNKNOWN ERROR (303)
    I... port.cc:153] oneDNN custom operations are on. ...  (twice, on CPUs
      with AVX-512; oneDNN stays on, TF_ENABLE_ONEDNN_OPTS=0 turns it off)
  Python warnings (by category, message and the module that raises them):
    `layer.apply` is deprecated ...        (every tf-slim layer calls it)
    `tf.layers.flatten` is deprecated ...  (slim.flatten calls it)
  Records of the 'tensorflow' logger:
    deprecation notices whose call site is inside tensorflow, tf_keras or
    tf_slim (the caller is library code, so only its authors can act on it)
    the project's own calls to a TF1 API that TensorFlow marks deprecated,
    in a `deprecation_silenced()` block
    the LIBRARY_INFO lines of the session machinery ("Graph was finalized.",
    "Running local_init_op.", "Calling checkpoint listeners ...") and
    tf-slim's "Scale of 0 disables regularizer."

It also defaults TF_CPP_MIN_LOG_LEVEL to 2, the level `make` and the cluster
launcher use: TensorFlow's C++ INFO lines (CPU instruction sets, MLIR pass,
TFRecord buffer size) and WARNING lines are hidden, its errors are shown.
Level 1 would keep the C++ warnings, but the one a normal run prints,
"root_dataset.cc] Optimization loop failed: CANCELLED" (tf.data's autotuner
stopped with the session), comes at the end of some runs and not others, long
after the import, where no line filter runs. TF_CPP_MIN_LOG_LEVEL=1 shows the
C++ warnings.

TF_CPP_MIN_LOG_LEVEL was not enough for the C++ lines: TensorFlow prints the
cudart line at every level, 0 to 3, and level 3 would hide every C++ error
with the cuInit one. So they are filtered by text, and only during the
import of TensorFlow (see `native_stderr_filtered`). Error 303 is what
TensorFlow's CUDA stub returns when no driver library is installed; any other
cuInit failure (a driver that is there but broken) is shown.

To see everything, as without this module, run with TF_CPP_MIN_LOG_LEVEL=0.
Python's own `-W` options or PYTHONWARNINGS also keep the warnings filters
out.
"""

import contextlib
import importlib.util
import logging
import os
import re
import subprocess
import sys
import warnings

# One pattern per line TensorFlow writes from C++ while it loads on a machine
# without CUDA. The absl line comes once per shared library that logs before
# absl is initialised; it carries no information of its own. The oneDNN
# notice comes once per library that loads oneDNN, where the CPU has the
# vector units (AVX-512) that switch its custom operations on.
NATIVE_NOISE = tuple(re.compile(pattern) for pattern in (
    rb'WARNING: All log messages before absl::InitializeLog\(\) is called '
    rb'are written to STDERR$',
    rb'I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers '
    rb'on your machine, GPU will not be used\.$',
    rb'E\d{4} [\d:.]+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: '
    rb'.*\(303\)$',
    rb'I\d{4} [\d:.]+ +\d+ port\.cc:\d+\] oneDNN custom operations are '
    rb'on\. .*TF_ENABLE_ONEDNN_OPTS=0`\.$',
))

# (message regex, module that raises it): UserWarnings of TensorFlow's legacy
# Keras layers, raised at every call tf-slim makes, so the module is TF's.
LIBRARY_WARNINGS = (
    (r'`layer\.apply` is deprecated',
     r'tensorflow\.python\.keras\.engine\.base_layer_v1$'),
    (r'`tf\.layers\.flatten` is deprecated',
     r'tensorflow\.python\.keras\.legacy_tf_layers\.core$'),
)

# INFO records of TensorFlow's session machinery and of tf-slim that tell
# what the library does inside, not what happens to the model. The ones that
# do ("Saving checkpoints for N into DIR", "Restoring parameters from PATH")
# are kept.
LIBRARY_INFO = tuple(re.compile(pattern) for pattern in (
    r'Create CheckpointSaverHook\.$',
    r'Graph was finalized\.$',
    r'(Done r|R)unning local_init_op\.$',
    r'Calling checkpoint listeners (before|after) saving checkpoint '
    r'\d+\.\.\.$',
    r'Scale of 0 disables regularizer\.$',
))

_LIBRARY_PACKAGES = ('tensorflow', 'tf_keras', 'tf_slim')


def showing_everything():
  """Whether the user asked for all output (TF_CPP_MIN_LOG_LEVEL=0)."""
  return os.environ.get('TF_CPP_MIN_LOG_LEVEL') == '0'


def is_native_noise(line):
  """Whether one stderr line (bytes, without its newline) is NATIVE_NOISE."""
  return any(pattern.match(line) for pattern in NATIVE_NOISE)


@contextlib.contextmanager
def native_stderr_filtered():
  """Drops the NATIVE_NOISE lines written to file descriptor 2 in the block.

  C++ code writes to the descriptor, not to `sys.stderr`, so the descriptor
  itself is pointed at a pipe. A separate small process (this file run as a
  script) reads the pipe and passes every other line on at once. Being a
  process of its own, it still passes on what a crash inside the block wrote
  last (a failed CPU check, an abort), and it cannot deadlock on the GIL the
  importing thread holds.

  Does nothing when the user asked for all output, or where the descriptor
  cannot be redirected.

  Yields:
    Whether the filter is in place.
  """
  if showing_everything():
    yield False
    return
  sys.stderr.flush()
  try:
    saved = os.dup(2)
  except OSError:
    yield False
    return
  try:
    # Its own session: Ctrl-C or a kill of the process group must not stop
    # it before the lines already written are through. It ends at EOF,
    # when this process restores (or loses, by dying) its descriptor 2.
    line_filter = subprocess.Popen(
        [sys.executable, '-I', '-S', os.path.abspath(__file__)],
        stdin=subprocess.PIPE, stdout=saved, stderr=subprocess.DEVNULL,
        start_new_session=True)
  except OSError:
    os.close(saved)
    yield False
    return
  os.dup2(line_filter.stdin.fileno(), 2)
  line_filter.stdin.close()
  try:
    yield True
  finally:
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    try:
      # Lets the last lines out before this process writes anything new.
      line_filter.wait(timeout=10)
    except subprocess.TimeoutExpired:
      pass  # Something started in the block still holds the pipe.


def import_tensorflow(eager=True):
  """Imports TensorFlow and finds its devices with NATIVE_NOISE filtered.

  eager=False switches the process to graph mode
  (tf.compat.v1.disable_eager_execution) before the devices are found:
  finding them sets up the eager context, and a switch after that leaves
  it half eager (variables made in a tf.cond branch then fail with
  "Attempting to capture an EagerTensor without building a function").

  Sets the defaults TF_CPP_MIN_LOG_LEVEL=2 and TF_USE_LEGACY_KERAS=1 first,
  for the variables the user has not set.

  Finding the devices is the step that calls cuInit; it would otherwise
  happen, and print, at the first session. It starts no session.
  Does nothing if TensorFlow is already imported.
  """
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  # tf.keras as tf_keras (Keras 2), the Keras that works in graph mode,
  # unless the user chose. TensorFlow loads it at import; Keras 3, its
  # default, cannot build TF1 graphs and is slower to load.
  os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
  if 'tensorflow' in sys.modules:
    return
  with native_stderr_filtered():
    import tensorflow  # pylint: disable=g-import-not-at-top
    if not eager:
      tensorflow.compat.v1.disable_eager_execution()
    tensorflow.config.list_physical_devices('GPU')


def _library_roots():
  roots = []
  for name in _LIBRARY_PACKAGES:
    spec = importlib.util.find_spec(name)
    for location in (spec and spec.submodule_search_locations) or ():
      roots.append(os.path.realpath(location) + os.sep)
  return tuple(roots)


class LibraryLogFilter(logging.Filter):
  """Drops 'tensorflow' logger records that are about library code only."""

  def __init__(self, library_roots=None):
    """Creates the filter.

    Args:
      library_roots: directories (each ending in a separator) whose files
        are library code; by default those of the installed tensorflow,
        tf_keras and tf_slim.
    """
    super().__init__()
    self._roots = tuple(library_roots or _library_roots())

  def _in_library(self, path):
    return os.path.realpath(path).startswith(self._roots)

  def filter(self, record):
    # deprecation.py logs 'From %s: ... is deprecated ...' with the caller's
    # 'file:line' as the first argument.
    if (isinstance(record.msg, str) and record.msg.startswith('From %s: ')
        and 'deprecated' in record.msg and record.args):
      call_site = str(record.args[0]).rpartition(':')[0]
      return not self._in_library(call_site)
    if record.levelno == logging.INFO and any(
        pattern.match(record.getMessage()) for pattern in LIBRARY_INFO):
      return not self._in_library(record.pathname)
    return True


def filter_library_messages():
  """Installs the LIBRARY_WARNINGS filters and the LibraryLogFilter, once.

  Returns:
    Whether they are installed (not when the user asked for all output).
  """
  if showing_everything():
    return False
  if not sys.warnoptions:  # The user's -W / PYTHONWARNINGS decide instead.
    for message, module in LIBRARY_WARNINGS:
      warnings.filterwarnings('ignore', message=message, category=UserWarning,
                              module=module)
  logger = logging.getLogger('tensorflow')
  if not any(isinstance(f, LibraryLogFilter) for f in logger.filters):
    logger.addFilter(LibraryLogFilter())
  return True


@contextlib.contextmanager
def deprecation_silenced():
  """TensorFlow logs no deprecation notice for calls made in the block.

  For the project's own calls to a TF1 API that TensorFlow marks deprecated
  in favour of a TF2 one this graph-mode code cannot use (the checkpoint
  index of tf.compat.v1.Saver, an iterator's saveable): the notice would
  point at code that is right as it is. TensorFlow is imported here, not
  when this module is, so that `import_tensorflow` still imports it first.
  """
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top
  with deprecation.silence():
    yield


def _write_all(fd, data):
  while data:
    data = data[os.write(fd, data):]


def _forward_lines(source_fd=0, target_fd=1):
  """Copies source to target line by line, less the NATIVE_NOISE lines."""
  pending = b''
  target_open = True
  while True:
    chunk = os.read(source_fd, 65536)
    if chunk:
      *lines, pending = (pending + chunk).split(b'\n')
      kept = b''.join(line + b'\n' for line in lines
                      if not is_native_noise(line))
    else:  # EOF: what is left is a last line without its newline.
      kept = b'' if is_native_noise(pending) else pending
    if target_open and kept:
      try:
        _write_all(target_fd, kept)
      except OSError:
        target_open = False  # Keep reading: the writer must never block.
    if not chunk:
      return


if __name__ == '__main__':
  _forward_lines()
