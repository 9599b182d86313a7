"""Which modules of the process are the program's own, and its packages first.

`python -m tf2_compat.run_slim SCRIPT.py` runs someone else's program in a
process that also holds TensorFlow, tf-slim, tf-keras and this project. Two
things need to tell the program's modules from the rest:

  - `--tf1` gives the program's own modules TF 1.x's `tensorflow`, and only
    them (`tf2_compat.tf1_imports`);
  - a program's own `nets`, `datasets` and `preprocessing` packages win over
    this project's packages of the same names, wherever the program's
    `sys.path` puts them: programs built on research/slim bring their own
    copy (DeepLab's setup puts research/slim on PYTHONPATH, after this
    project's root in the runner's `sys.path`).

The rule is by file location. A file is the program's when it is neither
under the Python installation (the standard library, any site-packages,
where TensorFlow, tf-slim and tf-keras are) nor under this project's root;
the script's own folder is the program's even inside this project's root
(when it is not the root itself). This project's own packages
(`deployment`, ...) are always found in this project's root, even when the
program brings a copy of upstream's `deployment/`.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import site
import sys
import sysconfig

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# This project's packages that Slim programs often carry a copy of.
OWN_PACKAGES = ('nets', 'datasets', 'preprocessing')

# This project's packages that always come from its root.
PROJECT_PACKAGES = ('deployment', 'clusters', 'tf2_compat')

_LIBRARIES = ('tensorflow', 'tf_slim', 'tf_keras')


def _folder(path):
  return os.path.join(os.path.realpath(path), '')


def _library_folders():
  """The folders of the Python installation and of the libraries."""
  paths = sysconfig.get_paths()
  folders = {paths[key] for key in ('stdlib', 'platstdlib', 'purelib',
                                    'platlib') if key in paths}
  folders.update(site.getsitepackages())
  folders.add(site.getusersitepackages())
  for name in _LIBRARIES:
    spec = importlib.util.find_spec(name)
    for location in (spec and spec.submodule_search_locations) or ():
      folders.add(location)
  return tuple(sorted(_folder(folder) for folder in folders))


class ProgramTree:
  """The files of one program, told apart from libraries and this project.

  Args:
    script: the path of the program's main script.
    library_folders: folders whose files are not the program's; by default
      the Python installation's and the libraries'.
    project_root: this project's root folder.
  """

  def __init__(self, script, library_folders=None, project_root=PROJECT_ROOT):
    self._libraries = tuple(_folder(folder) for folder in (
        library_folders if library_folders is not None
        else _library_folders()))
    self._project = _folder(project_root)
    script_folder = _folder(os.path.dirname(os.path.abspath(script)))
    self._script_folder = (script_folder if script_folder != self._project
                           else None)
    self._script = os.path.realpath(script)

  @property
  def script(self):
    """The real path of the program's main script."""
    return self._script

  def contains(self, path):
    """Whether the file or folder at `path` is the program's."""
    if not path:
      return False
    if os.path.realpath(path) == self._script:
      return True
    folder = _folder(path)
    if folder.startswith(self._libraries):
      return False  # Even a virtualenv inside the script's folder.
    if self._script_folder and folder.startswith(self._script_folder):
      return True
    return not folder.startswith(self._project)

  def search_path(self):
    """The entries of `sys.path` that are the program's, in their order."""
    return [entry for entry in sys.path
            if self.contains(entry or os.getcwd())]


class _ProgramFinder(importlib.abc.MetaPathFinder):
  """Finds OWN_PACKAGES in the program's `sys.path` entries first.

  PROJECT_PACKAGES are found in this project's root only.

  With a `loader_class`, the program's source modules (wherever they are
  found) load with it; other modules are left to the finders after this
  one, which do as they always did.
  """

  def __init__(self, tree, loader_class=None):
    self.tree = tree
    self.loader_class = loader_class

  def find_spec(self, fullname, path=None, target=None):
    own = None
    if path is None and fullname in OWN_PACKAGES:
      own = importlib.machinery.PathFinder.find_spec(
          fullname, self.tree.search_path(), target)
    elif path is None and fullname in PROJECT_PACKAGES:
      own = importlib.machinery.PathFinder.find_spec(
          fullname, [PROJECT_ROOT], target)
    spec = own
    if spec is None and self.loader_class is not None:
      spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
    if (self.loader_class is not None and spec is not None
        and isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        and self.tree.contains(spec.origin)):
      spec.loader = self.loader_class(fullname, spec.origin)
      return spec
    return own


def installed_finder():
  """The finder `install` put on `sys.meta_path`, or None."""
  for finder in sys.meta_path:
    if isinstance(finder, _ProgramFinder):
      return finder
  return None


def install(tree, loader_class=None):
  """Makes the program's own OWN_PACKAGES win over this project's.

  Args:
    tree: the program's ProgramTree.
    loader_class: a `SourceFileLoader` subclass to load the program's own
      source modules with (`tf1_imports` gives them TF 1.x's tensorflow).
  """
  uninstall()
  sys.meta_path.insert(0, _ProgramFinder(tree, loader_class))


def uninstall():
  """Takes the finder away (modules already imported stay)."""
  finder = installed_finder()
  if finder is not None:
    sys.meta_path.remove(finder)
