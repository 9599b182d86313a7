"""The tests that share 127.0.0.1 run one at a time, as `make test` means;
the tests that share a module's fixture run on one worker.

`make test` runs two pytest-xdist workers with `--dist loadgroup`; the
cluster tests are marked xdist_group('loopback') so that one worker runs
them all, one after another. Some pairs of pytest and pytest-xdist drop
the groups without a word (pytest 9.2 with xdist 3.8: xdist writes the
group into an attribute that pytest 9 no longer reads), and the cluster
tests then run two at a time. This runs a small suite the same way, with
the versions installed, and checks that its grouped tests share a worker.
"""

import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GROUPED_SUITE = '''
import os
import time

import pytest


@pytest.mark.xdist_group('loopback')
@pytest.mark.parametrize('i', range(6))
def test_grouped(i):
  time.sleep(0.1)  # Time for the other worker to ask for work.


@pytest.mark.parametrize('i', range(6))
def test_free(i):
  time.sleep(0.1)
'''


def _run_suite(directory, env=None):
  """Runs directory/test_suite.py as `make test` does; its output."""
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', '-v', '-p', 'no:cacheprovider',
       '-n', '2', '--dist', 'loadgroup', '--rootdir', str(directory),
       str(directory / 'test_suite.py')],
      cwd=directory, capture_output=True, text=True, timeout=120, env=env)
  assert result.returncode == 0, result.stdout + result.stderr
  return result


def test_tests_of_one_group_run_on_one_worker(tmp_path):
  (tmp_path / 'test_suite.py').write_text(GROUPED_SUITE)
  result = _run_suite(tmp_path)
  workers = re.findall(r'\[(gw\d)\] .*PASSED .*test_grouped\[\d\](@\w+)?',
                       result.stdout)
  assert len(workers) == 6, result.stdout
  assert {suffix for _, suffix in workers} == {'@loopback'}, result.stdout
  assert len({worker for worker, _ in workers}) == 1, result.stdout


SHARING_SUITE = '''
import os
import time

import pytest


@pytest.fixture(scope='module')
def trained():
  with open(os.environ['SETUPS_FILE'], 'a') as setups:
    setups.write('set up\\n')


@pytest.mark.parametrize('i', range(6))
def test_sharing(trained, i):
  time.sleep(0.1)


@pytest.mark.parametrize('i', range(6))
def test_free(i):
  time.sleep(0.1)
'''


def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path):
  # The suite takes the grouping hook from this project's tests/conftest.py.
  (tmp_path / 'conftest.py').write_text(
      'from tests.conftest import pytest_collection_modifyitems\n')
  (tmp_path / 'test_suite.py').write_text(SHARING_SUITE)
  setups = tmp_path / 'setups.txt'
  result = _run_suite(tmp_path, dict(os.environ, PYTHONPATH=REPO,
                                     SETUPS_FILE=str(setups)))
  workers = re.findall(r'\[(gw\d)\] .*PASSED .*test_sharing\[\d\](@\w+)?',
                       result.stdout)
  assert len(workers) == 6, result.stdout
  assert {suffix for _, suffix in workers} == {'@test_suite'}, result.stdout
  assert len({worker for worker, _ in workers}) == 1, result.stdout
  assert setups.read_text() == 'set up\n'
  free = re.findall(r'PASSED .*test_free\[\d\](@\w+)?', result.stdout)
  assert free == [''] * 6, result.stdout
