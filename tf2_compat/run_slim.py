"""Runs an existing TF-Slim program on TensorFlow 2.21 without editing it.

    python -m tf2_compat.run_slim path/to/train_image_classifier.py --flags...

does what `python path/to/train_image_classifier.py --flags...` did on
TensorFlow 1.x. Before the script's first line it installs

  - `tf2_compat.slim_compat`: the TensorFlow internals tf-slim 1.1.0 still
    uses, and `tf2_compat.slim_loops`, which lets `slim.learning.train`
    run its Supervisor threads with eager execution left on;
  - `tf2_compat.contrib_stubs`: `import tensorflow.contrib...` works;
    `tensorflow.contrib.slim` is tf_slim, the tf-slim parts of `framework`,
    `training`, `layers`, `metrics` and `losses` are tf-slim's, and a call
    of anything TF 2.x removed (`quantize.create_training_graph`, ...)
    raises `RemovedInTF2Error` naming the call and its replacement, a use
    of it as a value (`isinstance(x, tf.contrib.rnn.LSTMBlockCell)`)
    `RemovedNameUsedError`;

then runs the script as `__main__`, with `sys.argv` = [script, flags...],
the script's folder first on `sys.path` and this project's root after it
(so `from deployment import model_deploy`, `from nets import
nets_factory`, ... find this project's modules). A program's own `nets`,
`datasets` and `preprocessing` packages win over this project's wherever
its `sys.path` has them (`tf2_compat.program_tree`); this project's
`deployment` is always this project's.

A program written for TF 1.x (`import tensorflow as tf`, `tf.app.flags`,
`slim = tf.contrib.slim`, `tf.summary.merge`, ...) runs unchanged with

    python -m tf2_compat.run_slim --tf1 SCRIPT.py ...

which gives the program's own modules, and only them, TF 1.x's
`tensorflow` (`tf2_compat.tf1_imports`), and switches the process to graph
mode and TF 1.x shapes (`shape[1].value`), as TF 1.x was. Without `--tf1`, such a program stops at its first
TF 1.x name with one line that says to add it.

A script that builds its graph in TensorFlow's global default graph, not
under `with tf.Graph().as_default()`, needs graph mode for the whole
process, as TF 1.x had it:

    python -m tf2_compat.run_slim --disable_eager_execution SCRIPT.py ...

calls `tf.compat.v1.disable_eager_execution()` before the script.

Exit status: the script's own. When the script cannot run, or uses
something TF 2.x removed, one line `error: ...` on stderr and status 2
(no such file, syntax error, bad option, a TF 1.x name without `--tf1`, a
removed contrib name used as a value) or 1 (removed call), naming the
program's line, in a function TensorFlow traces (a `dataset.map` function)
as anywhere else. Any other exception prints the script's traceback,
without this runner's frames, and exits 1.
"""

import os
import re
import sys
import traceback
import types

from tf2_compat import program_tree
from tf2_compat import traced_errors

USAGE = ('usage: python -m tf2_compat.run_slim [--tf1] '
         '[--disable_eager_execution] SCRIPT.py [SCRIPT FLAGS...]')
PROJECT_ROOT = program_tree.PROJECT_ROOT
EXIT_CANNOT_RUN = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130  # What a shell reports for a Ctrl-C.


class ScriptError(Exception):
  """The script cannot be run; the message is the line to print."""


def compile_script(path):
  """Reads and compiles the script, before any TensorFlow import.

  Returns:
    The code object.

  Raises:
    ScriptError: no such file, not a file, unreadable, or a syntax error.
  """
  if not os.path.exists(path):
    raise ScriptError('no such script: %s' % path)
  if not os.path.isfile(path):
    raise ScriptError('%s is not a Python file' % path)
  try:
    with open(path, 'rb') as script:
      source = script.read()
  except OSError as error:
    raise ScriptError('cannot read %s: %s' % (path, error.strerror))
  try:
    return compile(source, path, 'exec', dont_inherit=True)
  except SyntaxError as error:  # IndentationError and TabError too.
    where = '%s:%d' % (path, error.lineno) if error.lineno else path
    raise ScriptError('%s: %s: %s' % (where, type(error).__name__, error.msg))
  except ValueError as error:  # A null byte, on Pythons before 3.11.4.
    raise ScriptError('%s: %s' % (path, error))


def install(tree, disable_eager_execution=False, tf1=False):
  """Installs the compat layer, the contrib stubs and the program's packages.

  Args:
    tree: the program's ProgramTree.
    disable_eager_execution: also switch the whole process to graph mode.
    tf1: give the program's own modules TF 1.x's `tensorflow`, and switch
      the process to graph mode and TF 1.x shapes.

  Returns:
    The builtins the script runs with.
  """
  # pylint: disable=g-import-not-at-top
  from tf2_compat import quiet
  # Graph mode from the import on, when the script asks for it (see
  # quiet.import_tensorflow); the switch below covers an earlier import.
  quiet.import_tensorflow(eager=not (disable_eager_execution or tf1))
  from tf2_compat import contrib_stubs
  from tf2_compat.slim_compat import tf
  contrib_stubs.install()
  if disable_eager_execution or tf1:
    tf.disable_eager_execution()
  if not tf1:
    program_tree.install(tree)
    return __builtins__
  # TF 1.x shapes: `images.get_shape()[1].value`, a TF 1.x idiom, needs
  # the Dimension objects TF 2 replaced by ints.
  tf.disable_v2_tensorshape()
  from tf2_compat import tf1_imports
  tf1_imports.install(tree)
  return tf1_imports.TF1_BUILTINS


def _script_sys_path(path):
  folder = os.path.dirname(os.path.abspath(path))
  rest = [entry for entry in sys.path[1:]
          if entry not in (folder, PROJECT_ROOT)]
  return [folder] + ([PROJECT_ROOT] if PROJECT_ROOT != folder else []) + rest


def _script_frames(tb, path):
  """The traceback from the script's first frame on (None if it has none)."""
  real_path = os.path.realpath(path)
  while tb is not None:
    if os.path.realpath(tb.tb_frame.f_code.co_filename) == real_path:
      return tb
    tb = tb.tb_next
  return None


def _call_site(error, tree):
  """'file:line' of the innermost frame of the program that `error` passed,
  in a traced function too (None if none)."""
  site = None
  for filename, lineno in traced_errors.frames(error):
    if tree.contains(filename):
      site = '%s:%d' % (filename, lineno)
  return site


# The AttributeError of a name TF 2 dropped from the `tensorflow` package or
# one of its API modules ('tensorflow._api.v2.summary' for tf.summary).
_MISSING_NAME = re.compile(
    r"^module 'tensorflow(?:\._api\.v2)?((?:\.\w+)*)' has no attribute "
    r"'(\w+)'$")


def tf1_name(error):
  """'tf.app' when `error` is TF 2.x missing a name TF 1.x had, else None."""
  if not isinstance(error, AttributeError):
    return None
  match = _MISSING_NAME.match(str(error))
  if not match:
    return None
  from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top
  value = tf
  for attribute in (match.group(1) + '.' + match.group(2)).split('.')[1:]:
    value = getattr(value, attribute, None)
  return 'tf%s.%s' % match.groups() if value is not None else None


def _report(error, tree, path, args):
  """The `error: ...` line and exit status for `error`, or None."""
  # pylint: disable=g-import-not-at-top
  from tf2_compat import contrib_stubs
  site = _call_site(error, tree)
  where = '%s: ' % site if site else ''
  # A dataset.map function's error comes as autograph's error of 20 lines.
  error = traced_errors.raised(error)
  if isinstance(error, contrib_stubs.RemovedNameUsedError):
    return 'error: %s%s' % (where, error), EXIT_CANNOT_RUN
  if isinstance(error, contrib_stubs.RemovedInTF2Error):
    return 'error: %s%s' % (where, error), EXIT_FAILED
  name = tf1_name(error)
  if name:
    command = ' '.join(['python -m tf2_compat.run_slim --tf1', path] + args)
    return ('error: %s%s is TF 1.x API, which TF 2.21 does not have; run '
            'the program with --tf1: %s' % (where, name, command),
            EXIT_CANNOT_RUN)
  return None


def run(path, args, disable_eager_execution=False, tf1=False):
  """Runs the script as __main__ with sys.argv = [path] + args.

  Returns:
    The exit status for this process (0 when the script returns).
  """
  try:
    code = compile_script(path)
  except ScriptError as error:
    print('error: %s' % error, file=sys.stderr)
    return EXIT_CANNOT_RUN
  tree = program_tree.ProgramTree(path)
  script_builtins = install(tree, disable_eager_execution, tf1)
  main_module = types.ModuleType('__main__')
  main_module.__file__ = path
  main_module.__builtins__ = script_builtins
  saved_main = sys.modules.get('__main__')
  sys.modules['__main__'] = main_module
  sys.argv = [path] + list(args)
  sys.path[:] = _script_sys_path(path)
  try:
    exec(code, main_module.__dict__)  # pylint: disable=exec-used
  except (Exception, KeyboardInterrupt) as error:  # pylint: disable=broad-except
    report = _report(error, tree, path, list(args))
    if report:
      print(report[0], file=sys.stderr)
      return report[1]
    sys.stderr.flush()
    traceback.print_exception(type(error), error,
                              _script_frames(error.__traceback__, path))
    return EXIT_INTERRUPTED if isinstance(error, KeyboardInterrupt) else (
        EXIT_FAILED)
  finally:
    if saved_main is not None:
      sys.modules['__main__'] = saved_main
  return 0


def main(argv=None):
  """Reads the runner's options and runs the script; returns exit status."""
  argv = list(sys.argv[1:] if argv is None else argv)
  options = {'--disable_eager_execution': False, '--tf1': False}
  while argv and argv[0].startswith('-'):
    option = argv.pop(0)
    if option in ('-h', '--help'):
      print(USAGE)
      return 0
    if option not in options:
      print('error: unknown option %s; %s' % (option, USAGE), file=sys.stderr)
      return EXIT_CANNOT_RUN
    options[option] = True
  if not argv:
    print('error: no script given; %s' % USAGE, file=sys.stderr)
    return EXIT_CANNOT_RUN
  return run(argv[0], argv[1:], options['--disable_eager_execution'],
             options['--tf1'])


if __name__ == '__main__':
  sys.exit(main())
