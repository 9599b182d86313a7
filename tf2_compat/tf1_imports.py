"""`import tensorflow as tf` gives TF 1.x's API, in a TF 1.x program only.

A Slim program written for TF 1.x uses `tensorflow` the way TF 1.15 had it:
`tf.app.flags`, `tf.placeholder`, `tf.contrib.slim`, and names TF 2 kept
with another meaning: `tf.summary.scalar` (TF 2: writes to a default
writer and returns a bool, so `tf.summary.merge` fails), `tf.nn.dropout`'s
`keep_prob`, `tf.image.draw_bounding_boxes` without `colors`,
`tf.layers`. `install(tree)` makes `tensorflow`, as imported by the
program's own modules (those a `program_tree.ProgramTree` says are the
program's: the script, its tree, its PYTHONPATH), this module's TF1_API:

  - `tf.X` is `tf.compat.v1.X`, whose names have their TF 1.x meaning
    (`tf.summary` is `tf.compat.v1.summary`, ...);
  - `tf.contrib` is `tf2_compat.contrib_stubs`' package;
  - `tf.compat` is TensorFlow's, and a name compat.v1 lacks is the
    submodule of that name (`import tensorflow.python.ops.math_ops as m`).

How: the program's modules load with a `__builtins__` of their own whose
`__import__` hands out TF1_API where `import` would give the `tensorflow`
package. Nothing else changes: TensorFlow, tf-slim, tf-keras, this
project's modules and every other library keep the real `tensorflow`, and
`sys.modules['tensorflow']` stays the real one.
"""

import builtins
import importlib.machinery
import sys
import types

from tf2_compat import contrib_stubs
from tf2_compat import program_tree
from tf2_compat.slim_compat import tf as _tf_v1  # Imports TensorFlow quietly.

PACKAGE = 'tensorflow'


class TF1Module(types.ModuleType):
  """The `tensorflow` package as TF 1.x programs import it."""

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError('module %r has no attribute %r' % (PACKAGE, name))
    if name == 'contrib':  # Not kept: contrib_stubs.uninstall() takes it.
      return contrib_stubs.install()
    if name == 'compat':
      value = sys.modules[PACKAGE + '.compat']
    elif hasattr(_tf_v1, name):
      value = getattr(_tf_v1, name)
    elif '%s.%s' % (PACKAGE, name) in sys.modules:
      value = sys.modules['%s.%s' % (PACKAGE, name)]
    else:
      raise AttributeError('module %r (TF 1.x API) has no attribute %r'
                           % (PACKAGE, name))
    setattr(self, name, value)
    return value

  def __dir__(self):
    return sorted(set(dir(_tf_v1)) | {'contrib', 'compat'})


# The dunder names of the package that programs read (`tf.__version__`).
_VERSIONS = ('__version__', '__git_version__', '__compiler_version__')


def _tf1_api():
  module = TF1Module(PACKAGE, _tf_v1.__doc__)
  real = sys.modules[PACKAGE]
  module.__file__ = real.__file__
  for name in _VERSIONS:
    if hasattr(real, name):
      setattr(module, name, getattr(real, name))
  return module


TF1_API = _tf1_api()


def _import(name, globals=None, locals=None, fromlist=(), level=0):  # pylint: disable=redefined-builtin
  module = builtins.__import__(name, globals, locals, fromlist, level)
  if level == 0 and module is sys.modules.get(PACKAGE):
    return TF1_API
  return module


# What the program's modules see as builtins: the real ones but `__import__`.
TF1_BUILTINS = dict(vars(builtins), __import__=_import)


class ProgramLoader(importlib.machinery.SourceFileLoader):
  """Loads one of the program's source files with TF1_BUILTINS."""

  def exec_module(self, module):
    module.__builtins__ = TF1_BUILTINS
    super().exec_module(module)


def install(tree):
  """Gives the program's modules imported from now on TF1_API.

  The program's main script is not imported: run it with TF1_BUILTINS as
  its `__builtins__`. Also installs the contrib stubs (`import
  tensorflow.contrib.slim` works), and makes the program's own `nets`,
  `datasets` and `preprocessing` win, as `program_tree.install` does.

  Args:
    tree: the program's ProgramTree.
  """
  contrib_stubs.install()
  program_tree.install(tree, ProgramLoader)


def installed():
  """Whether the program's modules imported from now on get TF1_API."""
  finder = program_tree.installed_finder()
  return finder is not None and finder.loader_class is ProgramLoader
