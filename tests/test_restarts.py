"""The launcher's restarts with clusters of a stand-in task
(tests/restart_task.py, no TensorFlow: fast): what is restarted, on which
ports, and when the launcher gives up."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from clusters import launch
from clusters import restarts
from tests.script_runner import REPO
from tests.stand_in_tasks import write_task
from tests.test_launch import _Lines
from tests.test_launch import _kill_all
from tests.test_launch import _start_launcher
from tests.test_launch import _task_pids

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')

TASK = os.path.join(REPO, 'tests', 'restart_task.py')


def _starts(log):
  """[(task, pid, TF_CONFIG)] of the launcher's '<task>: pid' lines."""
  return [(m.group(1), int(m.group(2)), json.loads(m.group(3)))
          for m in re.finditer(r'^\[launch\] (\w+): pid (\d+), (.*)$', log,
                               re.M)]


def _launch_lines(log):
  """The launcher's own lines (the tasks' are relayed in between)."""
  return re.findall(r'^\[launch\] .*$', log, re.M)


def _last_launch_line(log):
  return _launch_lines(log)[-1]


def _started(log, name):
  return [start for start in _starts(log) if start[0] == name]


def _run(tmp_path, mode, num_ps, max_restarts, *extra, num_workers=2,
         **options):
  """Runs restart_task.py's MODE to its end, with LocalCluster's `options`
  added; returns the LocalCluster, the launcher's status and its log."""
  marks = tmp_path / 'marks'
  marks.mkdir()
  train_dir = str(tmp_path / 'train')
  output = _Lines()
  cluster = launch.LocalCluster(
      [TASK, mode, str(marks), '--train_dir=%s' % train_dir] + list(extra),
      num_ps, num_workers, output=output, grace_secs=5,
      max_restarts=max_restarts, **options)
  try:
    cluster.start()
    status = cluster.wait(timeout=60)
  finally:
    cluster.stop()
  return cluster, status, output.getvalue()


def test_all_reduce_a_killed_worker_restarts_every_task_on_new_ports(
    tmp_path):
  cluster, status, log = _run(tmp_path, 'dies_once', 0, 1)
  assert status == 0, log
  train_dir = str(tmp_path / 'train')
  assert _launch_lines(log)[2:4] == [
      '[launch] worker1 failed with exit status 137; stopping every task to '
      'restart the cluster (restart 1 of --max_restarts 1)',
      '[launch] starting every task again on new ports: resuming from step 3,'
      ' the latest checkpoint in %s; 4 step(s) lost (the workers had logged '
      'step 7)' % train_dir]
  # Worker0 failed too, as an all-reduce does when a peer dies: that was
  # part of the restart, not a failure of its own (one restart was enough).
  assert '[worker0] worker 1 stopped: the all-reduce failed\n' in log
  assert '[launch] worker0 failed' not in log
  first, second = _starts(log)[:2], _starts(log)[2:]
  assert [s[0] for s in first] == [s[0] for s in second] == [
      'worker0', 'worker1']
  old_hosts = first[0][2]['cluster']['worker']
  new_hosts = second[0][2]['cluster']['worker']
  assert [s[2]['cluster']['worker'] for s in second] == [new_hosts] * 2
  assert new_hosts == cluster.worker_hosts
  for index, address in enumerate(new_hosts):
    assert '[worker%d] worker%d start 1 on %s\n' % (index, index,
                                                    address) in log
  assert old_hosts != new_hosts
  assert sorted(re.findall(r'^\[(\w+)\] done$', log, re.M)) == [
      'worker0', 'worker1']


def test_async_ps_a_killed_worker_is_restarted_alone_on_its_address(
    tmp_path):
  cluster, status, log = _run(tmp_path, 'dies_once', 1, 1)
  assert status == 0, log
  address = cluster.worker_hosts[1]
  assert ('[launch] worker1 failed with exit status 137; restarting it '
          'alone on %s (restart 1 of --max_restarts 1); the other tasks go '
          'on\n' % address) in log
  assert 'starting every task again' not in log
  assert [len(_started(log, name)) for name in ('ps0', 'worker0',
                                                'worker1')] == [1, 1, 2]
  first, second = _started(log, 'worker1')
  assert first[2] == second[2] and first[1] != second[1]
  assert '[worker1] worker1 start 1 on %s\n' % address in log
  assert {name: process.returncode
          for name, process in cluster.processes.items()} == {
              'ps0': 0, 'worker0': 0, 'worker1': 0}


def test_async_ps_a_restarted_chief_says_the_cluster_goes_back(tmp_path):
  cluster, status, log = _run(tmp_path, 'chief_dies_once', 1, 1)
  assert status == 0, log
  assert _launch_lines(log)[3:5] == [
      '[launch] worker0 failed with exit status 137; restarting it alone on '
      '%s (restart 1 of --max_restarts 1); the other tasks go on'
      % cluster.worker_hosts[0],
      '[launch] the chief restores step 3, the latest checkpoint in %s, onto '
      'the ps tasks: at least 4 step(s) lost (the workers had logged step 7)'
      % (tmp_path / 'train')]
  assert [len(_started(log, name)) for name in ('ps0', 'worker0',
                                                'worker1')] == [1, 2, 1]


def test_sync_ps_a_killed_worker_restarts_every_task_ps_included(tmp_path):
  _, status, log = _run(tmp_path, 'dies_once', 1, 1, '--sync_replicas')
  assert status == 0, log
  assert ('[launch] worker1 failed with exit status 137; stopping every task'
          ' to restart the cluster (restart 1 of --max_restarts 1)\n') in log
  assert [len(_started(log, name)) for name in ('ps0', 'worker0',
                                                'worker1')] == [2, 2, 2]


def test_after_max_restarts_the_failing_task_is_named_with_its_status(
    tmp_path):
  cluster, status, log = _run(tmp_path, 'always_fails', 0, 2)
  assert status == 3, log
  assert re.findall(r'^\[launch\] worker1 failed with exit status 3; '
                    r'stopping every task to restart the cluster \(restart '
                    r'(\d) of --max_restarts 2\)$', log, re.M) == ['1', '2']
  assert log.count(
      '[launch] starting every task again on new ports: resuming from step '
      '0 (no checkpoint in %s yet); no step was logged since the last start'
      '\n' % (tmp_path / 'train')) == 2
  assert _last_launch_line(log) == (
      '[launch] worker1 failed with exit status 3 after 2 restart(s), all '
      'that --max_restarts 2 allows; stopping the cluster')
  assert len(_started(log, 'worker1')) == 3
  assert {name: process.returncode
          for name, process in cluster.processes.items()} == {
              'worker0': -signal.SIGTERM, 'worker1': 3}


def test_the_timeout_counts_the_restarts(tmp_path):
  marks = tmp_path / 'marks'
  marks.mkdir()
  output = _Lines()
  cluster = launch.LocalCluster(
      [TASK, 'always_fails', str(marks), '--train_dir=%s' % tmp_path], 0, 2,
      output=output, grace_secs=5, max_restarts=1000)
  try:
    cluster.start()
    started = time.monotonic()
    status = cluster.wait(timeout=3)
    waited = time.monotonic() - started
  finally:
    cluster.stop()
  log = output.getvalue()
  assert status == 124, log
  assert 3 <= waited < 3 + 10
  assert len(_started(log, 'worker1')) >= 2
  assert _last_launch_line(log) == (
      '[launch] timeout after 3 s; stopping the cluster')


def test_bad_input_stops_the_cluster_without_a_restart(tmp_path):
  _, status, log = _run(tmp_path, 'bad_input', 1, 3)
  assert status == 2, log
  assert _last_launch_line(log) == (
      '[launch] worker1 failed with exit status 2, which is not restarted: '
      'the scripts exit 2 for what a restart would meet again (bad input, a '
      'full disk; see its error above); stopping the cluster')
  assert len(_started(log, 'worker1')) == 1


# Worker1 cannot save its checkpoint, as train_image_classifier.py on a
# full disk: it says so and exits 2. Worker0 sleeps.
DISK_FULL_TASK = textwrap.dedent("""\
    import json, os, sys, time
    if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 1:
      print('error: could not write the checkpoint: [Errno 28] No space '
            'left on device', file=sys.stderr)
      sys.exit(2)
    time.sleep(600)
""")


def test_a_task_that_exits_2_on_a_full_disk_is_not_restarted(tmp_path):
  script, _ = write_task(tmp_path, 'disk_full_task.py', DISK_FULL_TASK)
  result = subprocess.run(
      [sys.executable, '-m', 'clusters.launch', '--num_ps', '0',
       '--num_workers', '2', '--max_restarts', '3', '--timeout', '60',
       '--grace_secs', '5', '--', script],
      cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=120)
  log = result.stdout
  assert result.returncode == 2, log
  assert ('[worker1] error: could not write the checkpoint: [Errno 28] No '
          'space left on device\n') in log
  assert _last_launch_line(log) == (
      '[launch] worker1 failed with exit status 2, which is not restarted: '
      'the scripts exit 2 for what a restart would meet again (bad input, a '
      'full disk; see its error above); stopping the cluster')
  assert [name for name, _, _ in _starts(log)] == ['worker0', 'worker1']


@pytest.mark.parametrize('module,options,status', [
    ('clusters.launch', [], 137),
    ('deployment.launch', ['--max_restarts', '0'], 137),
    ('clusters.launch', ['--max_restarts', '1'], 0),
    ('deployment.launch', ['--max_restarts', '1'], 0),
])
def test_both_entries_restart_only_with_max_restarts(tmp_path, module,
                                                     options, status):
  marks = tmp_path / 'marks'
  marks.mkdir()
  result = subprocess.run(
      [sys.executable, '-m', module, '--num_ps', '0', '--num_workers', '2',
       '--timeout', '60', '--grace_secs', '5'] + options + [
           '--', TASK, 'dies_once', str(marks),
           '--train_dir=%s' % (tmp_path / 'train')],
      cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      timeout=120)
  log = result.stdout
  assert result.returncode == status, log
  if status:  # Today's behaviour: the failed task's status, others stopped.
    assert _last_launch_line(log) == (
        '[launch] worker1 failed with exit status 137; stopping the cluster')
    assert len(_starts(log)) == 2
  else:
    assert 'stopping every task to restart the cluster' in log
    assert len(_starts(log)) == 4


def test_a_negative_max_restarts_exits_2_with_one_line(capsys):
  assert launch.main(['--max_restarts', '-1', '--', 'x.py']) == 2
  assert capsys.readouterr().err == (
      'error: max_restarts must be >= 0, got -1; give 0 (a failed task stops '
      'the cluster) or more\n')


def test_quick_restarts_wait_longer_each_time(tmp_path):
  started = time.monotonic()
  _, status, log = _run(tmp_path, 'always_fails', 0, 4,
                        restart_backoff=restarts.Backoff(first_secs=0.2,
                                                         max_secs=0.4))
  assert status == 3, log
  # The first restart is made at once; the next ones follow it quickly.
  assert re.findall(r'^\[launch\] waiting ([\d.]+) s before restarting: '
                    r'the last restart was [\d.]+ s ago \(restarts less than '
                    r'60 s apart wait 0.2 s, twice as long each time, up to '
                    r'0.4 s\)$', log, re.M) == ['0.2', '0.4', '0.4']
  assert len(_started(log, 'worker1')) == 5
  assert time.monotonic() - started >= 1.0


@pytest.mark.slow
@pytest.mark.parametrize('signum,status', [(signal.SIGINT, 130),
                                           (signal.SIGTERM, 143)])
def test_a_signal_ends_the_wait_before_a_restart_at_once(tmp_path, signum,
                                                         status):
  marks = tmp_path / 'marks'
  marks.mkdir()
  process, reader = _start_launcher(
      '--num_ps', '0', '--num_workers', '2', '--max_restarts', '10',
      '--grace_secs', '5', '--timeout', '120', '--', TASK, 'always_fails',
      str(marks), '--train_dir=%s' % (tmp_path / 'train'))
  pids = []
  try:
    # Waits of 0, 1 and 2 s came before this one.
    lines = reader.until(r'^\[launch\] waiting 4 s before restarting',
                         timeout=60)
    pids = _task_pids(lines)
    signalled = time.monotonic()
    process.send_signal(signum)
    process.wait(timeout=30)
    took = time.monotonic() - signalled
    rest = reader.rest()
    assert process.returncode == status, ''.join(lines) + rest
    assert took < 2, took
    assert rest == ('[launch] interrupted by signal %d; every task is '
                    'stopped\n' % signum)
    assert len(pids) == 8  # 2 workers, 4 starts: no restart after it.
  finally:
    _kill_all(process, reader, pids)
