"""tf2_compat.tf1_imports and program_tree: TF 1.x's tensorflow, for a program.

Each test writes a small program into tmp_path, installs the import hook
for it in this process, imports the program's modules and removes them
again afterwards.
"""

import importlib
import os
import sys
import textwrap

import numpy as np
import pytest

from tf2_compat import contrib_stubs
from tf2_compat import program_tree
from tf2_compat import tf1_imports
from tf2_compat.slim_compat import slim, tf

REAL_TENSORFLOW = sys.modules['tensorflow']


class Program:
  """A program's folder: its script's, holding its modules."""

  def __init__(self, root):
    self.root = root
    self.tree = program_tree.ProgramTree(str(root / 'main.py'))

  def write(self, relative, source):
    path = self.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def program(tmp_path, monkeypatch):
  """A program on sys.path (last), with TF 1.x's tensorflow installed."""
  root = tmp_path / 'program'
  root.mkdir()
  monkeypatch.setattr(sys, 'path', sys.path + [str(root)])
  for name in list(sys.modules):  # Ours come back after the test.
    if name.split('.')[0] in program_tree.OWN_PACKAGES:
      monkeypatch.delitem(sys.modules, name)
  had_contrib_stubs = contrib_stubs.installed()
  tf1_imports.install(Program(root).tree)
  yield Program(root)
  program_tree.uninstall()
  if not had_contrib_stubs:  # Other test modules never see them.
    contrib_stubs.uninstall()
  for name, module in list(sys.modules.items()):
    if str(getattr(module, '__file__', '') or '').startswith(str(tmp_path)):
      del sys.modules[name]


def _import(name):
  importlib.invalidate_caches()
  return importlib.import_module(name)


# 1. TF 1.x names TF 2 dropped from `tensorflow`.


@pytest.mark.parametrize('name', ['app', 'layers', 'placeholder', 'Session',
                                  'get_variable', 'to_float', 'GraphKeys'])
def test_a_tf1_name_is_there_for_the_program(program, name):
  program.write('uses_tf1.py', 'import tensorflow as tf\n')
  module = _import('uses_tf1')
  assert not hasattr(REAL_TENSORFLOW, name)
  assert getattr(module.tf, name) is getattr(tf, name)


def test_version_is_tensorflows(program):
  program.write('prints_version.py', 'import tensorflow as tf\n')
  assert _import('prints_version').tf.__version__ == REAL_TENSORFLOW.__version__


def test_contrib_is_the_stubs_package(program):
  program.write('uses_contrib.py', '''\
      import tensorflow as tf
      import tensorflow.contrib.slim as imported_slim
      slim = tf.contrib.slim
      ''')
  module = _import('uses_contrib')
  assert module.slim is slim
  assert module.imported_slim is slim


def test_compat_v1_imports_as_tensorflows_own(program):
  program.write('uses_compat.py', 'import tensorflow.compat.v1 as tf\n')
  assert _import('uses_compat').tf is tf


def test_a_submodule_import_gets_the_real_submodule(program):
  program.write('uses_internals.py', '''\
      import tensorflow.python.ops.math_ops as math_ops
      from tensorflow.python.framework import ops
      ''')
  module = _import('uses_internals')
  assert module.math_ops is sys.modules['tensorflow.python.ops.math_ops']
  assert module.ops is sys.modules['tensorflow.python.framework.ops']


def test_a_name_tf1_never_had_is_an_attribute_error(program):
  program.write('uses_nothing.py', 'import tensorflow as tf\n')
  with pytest.raises(AttributeError, match="'no_such_name'"):
    _import('uses_nothing').tf.no_such_name  # pylint: disable=expression-not-assigned


# 2. Names TF 2 kept with another meaning: TF 1.x's, for the program.


TF1_CALLS = '''\
    import numpy as np
    import tensorflow as tf

    def summary_merge(value):
      scalar = tf.summary.scalar('loss', value)
      return scalar, tf.summary.merge([scalar])

    def dropout(inputs, keep_prob):
      return tf.nn.dropout(inputs, keep_prob=keep_prob)

    def boxes(images, boxes):
      return tf.image.draw_bounding_boxes(images, boxes)

    def layers_dropout(inputs):
      return tf.layers.dropout(inputs, rate=0.5, training=True)
    '''


def _run(fetch):
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    return session.run(fetch)


def test_summary_scalar_is_a_tensor_that_merge_merges(program, graph):
  program.write('tf1_calls.py', TF1_CALLS)
  scalar, merged = _import('tf1_calls').summary_merge(tf.constant(0.25))
  assert scalar.dtype == tf.string
  summary = tf.Summary.FromString(_run(merged))
  assert [(v.tag, v.simple_value) for v in summary.value] == [('loss', 0.25)]


def test_nn_dropout_takes_keep_prob(program, graph):
  program.write('tf1_calls.py', TF1_CALLS)
  kept = _run(_import('tf1_calls').dropout(tf.ones([1000]), keep_prob=0.8))
  # Kept units are scaled by 1 / keep_prob, the others are 0.
  assert set(np.round(kept, 4)) == {0.0, 1.25}
  assert 0.7 < np.mean(kept > 0) < 0.9


def test_image_draw_bounding_boxes_needs_no_colors(program, graph):
  program.write('tf1_calls.py', TF1_CALLS)
  drawn = _run(_import('tf1_calls').boxes(
      tf.zeros([1, 8, 8, 3]), tf.constant([[[0.0, 0.0, 1.0, 1.0]]])))
  assert drawn.shape == (1, 8, 8, 3)
  assert drawn[0, 0, 0].tolist() == [1.0, 1.0, 0.0]  # TF 1.x's first colour.
  assert drawn[0, 4, 4].tolist() == [0.0, 0.0, 0.0]


def test_layers_dropout_is_tf1_layers(program, graph):
  program.write('tf1_calls.py', TF1_CALLS)
  dropped = _run(_import('tf1_calls').layers_dropout(tf.ones([1000])))
  assert set(np.round(dropped, 4)) == {0.0, 2.0}


# Only the program's modules: the rest of the process keeps the real one.


def _imports_in(module):
  """What `import tensorflow` gives inside `module`."""
  namespace = dict(vars(module))
  exec('import tensorflow as imported', namespace)  # pylint: disable=exec-used
  return namespace['imported']


@pytest.mark.parametrize('name', [
    'tensorflow.python.ops.nn_ops', 'tf_slim.layers.layers',
    'tf_keras.src.legacy_tf_layers.core', 'deployment.model_deploy',
    'training.lookup'])
def test_libraries_and_this_project_keep_the_real_tensorflow(program, name):
  program.write('own_module.py', 'import tensorflow as tf\n')
  assert _import('own_module').tf is tf1_imports.TF1_API
  assert _imports_in(importlib.import_module(name)) is REAL_TENSORFLOW


def test_sys_modules_keeps_the_real_tensorflow(program):
  program.write('own_module.py', 'import tensorflow as tf\n')
  _import('own_module')
  assert sys.modules['tensorflow'] is REAL_TENSORFLOW
  assert REAL_TENSORFLOW.summary.scalar is not tf.summary.scalar


@pytest.mark.parametrize('where, program_s', [
    ('program/main.py', True),
    ('program/pkg/module.py', True),
    ('elsewhere/on_pythonpath.py', True),
    ('project/nets/lenet.py', False),
    ('project/tests/other/module.py', False),
    ('site-packages/tensorflow/__init__.py', False),
    ('program/venv/site-packages/absl/flags.py', False),
])
def test_program_files_are_told_by_location(tmp_path, where, program_s):
  tree = program_tree.ProgramTree(
      str(tmp_path / 'program' / 'main.py'),
      library_folders=[tmp_path / 'site-packages',
                       tmp_path / 'program' / 'venv' / 'site-packages'],
      project_root=str(tmp_path / 'project'))
  assert tree.contains(str(tmp_path / where)) is program_s


def test_a_script_folder_inside_the_project_is_the_programs(tmp_path):
  tree = program_tree.ProgramTree(
      str(tmp_path / 'project' / 'tests' / 'tf1' / 'train.py'),
      library_folders=[], project_root=str(tmp_path / 'project'))
  assert tree.contains(str(tmp_path / 'project' / 'tests' / 'tf1' / 'x.py'))
  assert not tree.contains(str(tmp_path / 'project' / 'tests' / 'x.py'))


def test_a_script_in_the_project_root_leaves_the_project_alone(tmp_path):
  tree = program_tree.ProgramTree(
      str(tmp_path / 'project' / 'train.py'), library_folders=[],
      project_root=str(tmp_path / 'project'))
  assert tree.contains(str(tmp_path / 'project' / 'train.py'))
  assert not tree.contains(str(tmp_path / 'project' / 'nets' / 'lenet.py'))


# 4. The program's own nets, datasets and preprocessing win.


@pytest.mark.parametrize('package', program_tree.OWN_PACKAGES)
def test_the_programs_own_package_wins_from_the_end_of_sys_path(program,
                                                                package):
  program.write('%s/__init__.py' % package, '')
  program.write('%s/sub/__init__.py' % package, '''\
      import tensorflow as tf
      WHOSE = 'program'
      ''')
  submodule = _import('%s.sub' % package)
  assert submodule.WHOSE == 'program'
  assert submodule.tf is tf1_imports.TF1_API
  assert sys.modules[package].__file__ == str(
      program.root / package / '__init__.py')


def test_without_a_package_of_its_own_the_program_gets_the_projects(program):
  program.write('uses_nets.py', 'from nets import nets_factory\n')
  factory = _import('uses_nets').nets_factory
  assert factory.__file__ == os.path.join(program_tree.PROJECT_ROOT, 'nets',
                                          'nets_factory.py')


def test_the_projects_deployment_wins_over_the_programs(program):
  program.write('deployment/__init__.py', '')
  program.write('deployment/model_deploy.py', 'raise ImportError("copy")\n')
  program.write('uses_deploy.py', 'from deployment import model_deploy\n')
  model_deploy = _import('uses_deploy').model_deploy
  assert model_deploy.__file__ == os.path.join(
      program_tree.PROJECT_ROOT, 'deployment', 'model_deploy.py')


@pytest.mark.parametrize('package', program_tree.PROJECT_PACKAGES)
def test_the_projects_packages_are_found_in_its_root_first(
    program, monkeypatch, package):
  program.write('%s/__init__.py' % package, 'raise ImportError("copy")\n')
  monkeypatch.setattr(sys, 'path', [str(program.root)] + sys.path)
  spec = program_tree.installed_finder().find_spec(package)
  assert spec.origin == os.path.join(program_tree.PROJECT_ROOT, package,
                                     '__init__.py')


def test_uninstall_leaves_later_imports_alone(program):
  program_tree.uninstall()
  program.write('after.py', 'import tensorflow as tf\n')
  assert _import('after').tf is REAL_TENSORFLOW
  assert not tf1_imports.installed()
