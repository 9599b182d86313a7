"""The import paths users were told before the split still work.

The TF 2 compatibility layer moved to `tf2_compat`, the cluster tools to
`clusters`; each old module re-exports the new one's public names, and the
two old `python -m` commands still run. The server, reachability and
placement-report names that left `clusters.cluster` are still there.
"""

import importlib
import subprocess
import sys

import pytest

from tests.script_runner import REPO

OLD_TO_NEW = {
    'deployment.slim_compat': 'tf2_compat.slim_compat',
    'deployment.run_slim': 'tf2_compat.run_slim',
    'deployment.contrib_stubs': 'tf2_compat.contrib_stubs',
    'deployment.quiet': 'tf2_compat.quiet',
    'deployment.cluster': 'clusters.cluster',
    'deployment.launch': 'clusters.launch',
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


# Names that moved out of clusters.cluster to modules of their own, with
# their new homes.
MOVED_FROM_CLUSTER = {
    'start_server': 'clusters.servers',
    'check_port': 'clusters.servers',
    'serve_until_stopped': 'clusters.servers',
    'PortUnavailable': 'clusters.servers',
    'unreachable_workers': 'clusters.peers',
    'placement_report': 'deployment.device_placement',
    'placement_by_device': 'deployment.device_placement',
    'DeviceLoad': 'deployment.device_placement',
}


@pytest.mark.parametrize('old', ['clusters.cluster', 'deployment.cluster'])
@pytest.mark.parametrize('name, new', sorted(MOVED_FROM_CLUSTER.items()))
def test_names_moved_out_of_cluster_keep_their_old_paths(old, name, new):
  moved = getattr(importlib.import_module(new), name)
  assert getattr(importlib.import_module(old), name) is moved
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
