"""The import paths users were told before the split still work.

The TF 2 compatibility layer moved to `tf2_compat`, the cluster tools to
`clusters`; each old module re-exports the new one's public names, and the
two old `python -m` commands still run. The server, reachability and
placement-report names that left `clusters.cluster`, and the machine's
names `clusters.launch` re-exported, are still there. Each old path warns
with a DeprecationWarning naming the new one; all of them live in
old_paths/, and nothing else in the project uses them.
"""

import ast
import importlib
import os
import re
import subprocess
import sys

import pytest

import old_paths
from tests.script_runner import REPO

OLD_TO_NEW = {
    'deployment.slim_compat': 'tf2_compat.slim_compat',
    'deployment.run_slim': 'tf2_compat.run_slim',
    'deployment.contrib_stubs': 'tf2_compat.contrib_stubs',
    'deployment.quiet': 'tf2_compat.quiet',
    'deployment.cluster': 'clusters.cluster',
    'deployment.launch': 'clusters.launch',
    'deployment.matmul_gradient': 'deployment.cpu_gradients',
}


def public_names(module):
  return getattr(module, '__all__', None) or [
      name for name in vars(module) if not name.startswith('_')]


@pytest.mark.parametrize('old, new', sorted(OLD_TO_NEW.items()))
def test_the_old_path_gives_the_new_modules_objects(old, new):
  old_module = importlib.import_module(old)
  new_module = importlib.import_module(new)
  names = public_names(new_module)
  assert names
  assert {name: getattr(old_module, name, None) for name in names} == {
      name: getattr(new_module, name) for name in names}
  assert all(getattr(old_module, name) is getattr(new_module, name)
             for name in names)


# (old module, the old module that re-exports it, name that left it, its
# new home).
MOVED = [(old, 'deployment.' + old.split('.')[1], name, new)
         for old, names in sorted(old_paths.MOVED_NAMES.items())
         for name, new in sorted(names.items())]


def test_the_names_that_left_cluster_and_launch_are_all_kept():
  assert {name for old, _, name, _ in MOVED if old == 'clusters.cluster'} == {
      'start_server', 'check_port', 'serve_until_stopped', 'PortUnavailable',
      'unreachable_workers', 'placement_report', 'placement_by_device',
      'DeviceLoad'}
  assert {name for old, _, name, _ in MOVED if old == 'clusters.launch'} == {
      'HOST', 'TASK_MEMORY_MIB', 'LocalCluster', 'check_memory',
      'exit_status', 'free_ports', 'make_room_for_files', 'mem_available_mib',
      'tf_config'}


@pytest.mark.parametrize('old, older, name, new', MOVED)
def test_names_moved_out_keep_their_old_paths(old, older, name, new):
  moved = getattr(importlib.import_module(new), name)
  assert getattr(importlib.import_module(old), name) is moved
  assert getattr(importlib.import_module(older), name) is moved
  if callable(moved):  # Functions and classes; HOST is a str.
    assert moved.__module__ == new


def test_old_slim_compat_import_line_gives_tf_and_slim():
  from deployment.slim_compat import slim, tf  # pylint: disable=g-import-not-at-top
  from tf2_compat import slim_compat  # pylint: disable=g-import-not-at-top
  assert (slim, tf) == (slim_compat.slim, slim_compat.tf)


def _python_m(*args, cwd=REPO):
  return subprocess.run([sys.executable, '-m'] + list(args), cwd=cwd,
                        capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize('tf1', [[], ['--tf1']], ids=['tf2', 'tf1'])
def test_python_m_deployment_run_slim_still_runs_a_script(tmp_path, tf1):
  script = tmp_path / 'hello.py'
  script.write_text('import sys\nimport tensorflow as tf\n'
                    'print("hello", sys.argv[1:], hasattr(tf, "app"))\n')
  result = _python_m('deployment.run_slim', *tf1, str(script), '--x=1')
  assert result.returncode == 0, result.stderr
  assert result.stdout == "hello ['--x=1'] %s\n" % bool(tf1)


@pytest.mark.slow
def test_python_m_deployment_launch_still_prints_its_help():
  result = _python_m('deployment.launch', '--help')
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith('usage: python -m ')
  assert '--num_workers' in result.stdout


@pytest.mark.parametrize('old, new', sorted(OLD_TO_NEW.items()))
def test_an_old_module_warns_with_its_new_path(old, new):
  sys.modules.pop(old, None)
  with pytest.warns(DeprecationWarning, match=re.escape(
      '%s is an old import path; import %s instead' % (old, new))):
    importlib.import_module(old)


@pytest.mark.parametrize('old, name, new', [
    ('clusters.cluster', 'start_server', 'clusters.servers'),
    ('clusters.cluster', 'placement_report', 'deployment.device_placement'),
    ('clusters.launch', 'free_ports', 'clusters.machine'),
    ('clusters.launch', 'tf_config', 'clusters.local_cluster'),
])
def test_a_moved_name_warns_with_its_new_path(old, name, new):
  with pytest.warns(DeprecationWarning, match=re.escape(
      '%s.%s is an old import path; import %s.%s instead' % (old, name, new,
                                                            name))):
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(new), name)


def test_a_name_that_never_was_there_is_an_attribute_error():
  from clusters import cluster  # pylint: disable=g-import-not-at-top
  with pytest.raises(AttributeError, match="'clusters.cluster' has no "
                     "attribute 'no_such_name'"):
    cluster.no_such_name  # pylint: disable=pointless-statement


def _old_uses(path):
  """The old paths the Python file at `path` imports or reads."""
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  # The launcher still imports LocalCluster for its own use: not an old path.
  moved = {name for module, names in old_paths.MOVED_NAMES.items()
           for name in names
           if name not in vars(importlib.import_module(module))}
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      imported = [node.module] + ['%s.%s' % (node.module, alias.name)
                                  for alias in node.names]
    else:
      imported = []
      if (isinstance(node, ast.Attribute) and node.attr in moved
          and isinstance(node.value, ast.Name)
          and node.value.id in ('cluster', 'launch')):
        yield '%s.%s' % (node.value.id, node.attr)
    for name in imported:
      if name in OLD_TO_NEW or name.split('.')[0] == 'old_paths':
        yield name


def test_nothing_in_the_project_uses_an_old_path():
  # The two modules whose __getattr__ hands old names on, and the tests of
  # the old paths, are the only users.
  allowed = {('clusters/cluster.py', 'old_paths'),
             ('clusters/launch.py', 'old_paths')}
  uses = set()
  for folder, folders, files in os.walk(REPO):
    folders[:] = [name for name in folders
                  if not name.startswith('.') and name != 'old_paths']
    relative = os.path.relpath(folder, REPO)
    for name in files:
      path = os.path.normpath(os.path.join(relative, name))
      if name.endswith('.py') and path != 'tests/test_old_import_paths.py':
        uses.update((path, old) for old in _old_uses(os.path.join(REPO,
                                                                   path)))
  assert uses == allowed
