"""The tests that share 127.0.0.1 run one at a time, as `make test` means.

`make test` runs two pytest-xdist workers with `--dist loadgroup`; the
cluster tests are marked xdist_group('loopback') so that one worker runs
them all, one after another. Some pairs of pytest and pytest-xdist drop
the groups without a word (pytest 9.2 with xdist 3.8: xdist writes the
group into an attribute that pytest 9 no longer reads), and the cluster
tests then run two at a time. This runs a small suite the same way, with
the versions installed, and checks that its grouped tests share a worker.
"""

import re
import subprocess
import sys

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


def test_tests_of_one_group_run_on_one_worker(tmp_path):
  (tmp_path / 'test_suite.py').write_text(GROUPED_SUITE)
  result = subprocess.run(
      [sys.executable, '-m', 'pytest', '-v', '-p', 'no:cacheprovider',
       '-n', '2', '--dist', 'loadgroup', '--rootdir', str(tmp_path),
       str(tmp_path / 'test_suite.py')],
      cwd=tmp_path, capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stdout + result.stderr
  workers = re.findall(r'\[(gw\d)\] .*PASSED .*test_grouped\[\d\](@\w+)?',
                       result.stdout)
  assert len(workers) == 6, result.stdout
  assert {suffix for _, suffix in workers} == {'@loopback'}, result.stdout
  assert len({worker for worker, _ in workers}) == 1, result.stdout
