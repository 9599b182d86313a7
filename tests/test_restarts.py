"""The launcher's restarts: the policy alone, then clusters of stand-in
tasks (tests/restart_task.py, no TensorFlow: fast)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from clusters import launch
from clusters import restarts
from tests.script_runner import REPO
from tests.test_launch import _Lines

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')

TASK = os.path.join(REPO, 'tests', 'restart_task.py')


@pytest.mark.parametrize('args,train_dir,sync_replicas', [
    ([], None, False),
    (['--train_dir=/a'], '/a', False),
    (['--train_dir', '/a', '--sync_replicas'], '/a', True),
    (['-train_dir=/a', '--train_dir=/b'], '/b', False),
    (['--sync_replicas', '--nosync_replicas'], None, False),
    (['--sync_replicas=false'], None, False),
    (['--sync_replicas=True'], None, True),
    (['--', '--train_dir=/a', '--sync_replicas'], None, False),
    (['data', '--train_dir=x', 'more'], 'x', False),
])
def test_the_script_arguments_the_launcher_reads(args, train_dir,
                                                 sync_replicas):
  assert restarts.read_script_args(['train.py'] + args) == (
      restarts.ScriptArgs(train_dir, sync_replicas))


@pytest.mark.parametrize('num_ps,args,mode', [
    (0, [], restarts.ALL_REDUCE),
    (0, ['--sync_replicas'], restarts.ALL_REDUCE),
    (1, [], restarts.ASYNC_PS),
    (2, ['--sync_replicas'], restarts.SYNC_PS),
])
def test_the_training_mode_follows_from_ps_tasks_and_sync_replicas(
    num_ps, args, mode):
  script_args = restarts.read_script_args(['train.py'] + args)
  assert restarts.training_mode(num_ps, script_args) == mode


@pytest.mark.parametrize('index,step', [
    ('model_checkpoint_path: "model.ckpt-40"\n'
     'all_model_checkpoint_paths: "model.ckpt-20"\n'
     'all_model_checkpoint_paths: "model.ckpt-40"\n', 40),
    ('model_checkpoint_path: "/shared/train/model.ckpt-7"\n', 7),
    ('model_checkpoint_path: "model.ckpt"\n', None),
    ('', None),
])
def test_the_step_resumed_from_is_read_from_the_checkpoint_index(
    tmp_path, index, step):
  (tmp_path / 'checkpoint').write_text(index)
  assert restarts.latest_checkpoint_step(str(tmp_path)) == step


def test_no_checkpoint_index_is_no_step(tmp_path):
  assert restarts.latest_checkpoint_step(str(tmp_path / 'none')) is None


def _decisions(policy, failures):
  return [tuple(policy.decide(name, status)) for name, status in failures]


@pytest.mark.parametrize('mode,action', [
    (restarts.ALL_REDUCE, restarts.RESTART_CLUSTER),
    (restarts.SYNC_PS, restarts.RESTART_CLUSTER),
    (restarts.ASYNC_PS, restarts.RESTART_TASK),
])
def test_max_restarts_restart_what_the_mode_needs_then_give_up(mode, action):
  policy = restarts.RestartPolicy(mode, max_restarts=2)
  assert _decisions(policy, [('worker1', 137), ('worker0', 1),
                             ('worker1', 137)]) == [
                                 (action, '--max_restarts', 1, 2),
                                 (action, '--max_restarts', 2, 2),
                                 (restarts.GIVE_UP, '--max_restarts', 2, 2)]


def test_a_dead_ps_task_draws_on_ps_restarts_first():
  policy = restarts.RestartPolicy(restarts.SYNC_PS, max_restarts=1,
                                  ps_restarts=1)
  assert _decisions(policy, [('ps0', 137), ('ps1', 1), ('ps0', 137)]) == [
      (restarts.RESTART_TASK, '--ps_restarts', 1, 1),
      (restarts.RESTART_CLUSTER, '--max_restarts', 1, 1),
      (restarts.GIVE_UP, '--max_restarts', 1, 1)]


def test_ps_restarts_alone_restart_only_ps_tasks():
  policy = restarts.RestartPolicy(restarts.ASYNC_PS, ps_restarts=3)
  assert _decisions(policy, [('worker1', 137), ('ps0', 7)]) == [
      (restarts.GIVE_UP, '--max_restarts', 0, 0),
      (restarts.RESTART_TASK, '--ps_restarts', 1, 3)]


def test_bad_input_is_never_restarted_by_max_restarts():
  policy = restarts.RestartPolicy(restarts.ALL_REDUCE, max_restarts=5)
  assert _decisions(policy, [('worker0', 2)]) == [
      (restarts.GIVE_UP, '--max_restarts', 0, 5)]


@pytest.mark.parametrize('flag,message', [
    ('max_restarts', 'max_restarts must be >= 0, got -1; give 0 (a failed '
                     'task stops the cluster) or more'),
    ('ps_restarts', 'ps_restarts must be >= 0, got -1; give 0 (a dead ps '
                    'task stops the cluster) or more'),
])
def test_a_negative_budget_is_refused(flag, message):
  with pytest.raises(ValueError) as error:
    restarts.RestartPolicy(restarts.ALL_REDUCE, **{flag: -1})
  assert str(error.value) == message


@pytest.mark.parametrize('decision,line', [
    (restarts.Decision(restarts.GIVE_UP, '--max_restarts', 0, 0),
     '[launch] worker1 failed with exit status 137; stopping the cluster\n'),
    (restarts.Decision(restarts.GIVE_UP, '--max_restarts', 2, 2),
     '[launch] worker1 failed with exit status 137 after 2 restart(s), all '
     'that --max_restarts 2 allows; stopping the cluster\n'),
    (restarts.Decision(restarts.RESTART_CLUSTER, '--max_restarts', 1, 2),
     '[launch] worker1 failed with exit status 137; stopping every task to '
     'restart the cluster (restart 1 of --max_restarts 2)\n'),
    (restarts.Decision(restarts.RESTART_TASK, '--max_restarts', 2, 3),
     '[launch] worker1 failed with exit status 137; restarting it alone on '
     '127.0.0.1:5 (restart 2 of --max_restarts 3); the other tasks go on\n'),
])
def test_the_line_of_a_failed_task(decision, line):
  assert restarts.failure_line('worker1', 137, decision,
                               '127.0.0.1:5') == line


def test_the_line_of_bad_input_says_why_it_is_not_restarted():
  decision = restarts.Decision(restarts.GIVE_UP, '--max_restarts', 0, 3)
  assert restarts.failure_line('worker0', 2, decision, 'x') == (
      '[launch] worker0 failed with exit status 2 (bad input, which a restart'
      ' would meet again); stopping the cluster\n')


@pytest.mark.parametrize('status', [7, 0])
def test_the_ps_restarts_line_is_the_one_it_always_was(status):
  decision = restarts.Decision(restarts.RESTART_TASK, '--ps_restarts', 1, 3)
  assert restarts.failure_line('ps0', status, decision, '127.0.0.1:9') == (
      '[launch] ps0 exited with status %d; restarting it on 127.0.0.1:9 (2 '
      'more restart(s) allowed)\n' % status)


@pytest.mark.parametrize('decision,end', [
    (restarts.Decision(restarts.GIVE_UP, '--max_restarts', 0, 0),
     'failed with exit status 1; stopping the cluster'),
    (restarts.Decision(restarts.RESTART_TASK, '--max_restarts', 1, 1),
     'failed with exit status 1; restarting it alone on 127.0.0.1:9 '
     '(restart 1 of --max_restarts 1); the other tasks go on'),
])
def test_a_ps_task_that_exits_0_has_failed_with_status_1(decision, end):
  assert restarts.failure_line('ps0', 0, decision, '127.0.0.1:9') == (
      '[launch] ps0 %s\n' % end)


_LOST = [
    ('/t', 40, 47, 'step 40, the latest checkpoint in /t', '7 step(s) lost '
                   '(the workers had logged step 47)'),
    ('/t', 40, 40, 'step 40, the latest checkpoint in /t', '0 step(s) lost '
                   '(the workers had logged step 40)'),
    ('/t', None, 9, 'step 0 (no checkpoint in /t yet)', '9 step(s) lost (the '
                    'workers had logged step 9)'),
    ('/t', 40, None, 'step 40, the latest checkpoint in /t', 'no step was '
                     'logged since the last start'),
]


@pytest.mark.parametrize('train_dir,resumed,logged,where,lost', _LOST)
def test_the_line_of_a_restart_of_every_task(train_dir, resumed, logged,
                                             where, lost):
  assert restarts.every_task_line(train_dir, resumed, logged) == (
      '[launch] starting every task again on new ports: resuming from %s; '
      '%s\n' % (where, lost))


@pytest.mark.parametrize('train_dir,resumed,logged,where,lost', _LOST)
def test_the_line_of_a_chief_or_ps_task_restarted_alone(train_dir, resumed,
                                                        logged, where, lost):
  assert restarts.rollback_line(train_dir, resumed, logged) == (
      '[launch] the chief restores %s, onto the ps tasks: at least %s\n' % (
          where, lost))


def test_without_train_dir_the_lines_say_where_the_step_would_be_read():
  assert restarts.every_task_line(None, None, 47) == (
      '[launch] starting every task again on new ports: they resume from the '
      "latest checkpoint of the script's train_dir (no --train_dir among its "
      'arguments to read the step from)\n')
  assert restarts.rollback_line(None, None, 47) == (
      "[launch] the chief restores the latest checkpoint of the script's "
      'train_dir onto the ps tasks (no --train_dir among its arguments to '
      'read the step from)\n')


@pytest.mark.parametrize('task_name,rolls_back', [
    ('worker0', True), ('ps0', True), ('ps3', True), ('worker1', False),
    ('worker10', False)])
def test_the_chief_and_ps_tasks_take_the_cluster_back_when_restarted(
    task_name, rolls_back):
  assert restarts.rolls_back(task_name) == rolls_back


def test_the_step_log_counts_the_highest_of_each_tasks_latest_step():
  steps = restarts.StepLog()
  first = steps.new_start()
  for task, line in (
      ('worker0', 'INFO:tensorflow:step 12: loss = 0.5, learning rate = 1\n'),
      ('worker1', 'INFO:tensorflow:steps per epoch: 1437 examples / 8\n'),
      ('worker1', 'INFO:tensorflow:step 9: loss = 0.5\n')):
    steps.observe(first, task, line)
  assert steps.highest == 12
  # Taken back to a checkpoint: each task's latest line counts.
  steps.observe(first, 'worker0', 'INFO:tensorflow:step 5: loss = 0.5\n')
  assert steps.highest == 9
  second = steps.new_start()
  assert steps.highest is None
  steps.observe(first, 'worker0', 'INFO:tensorflow:step 30: loss = 0.5\n')
  steps.observe(second, 'worker1', 'INFO:tensorflow:step 4: loss = 0.5\n')
  assert steps.highest == 4


# Clusters of tests/restart_task.py.


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


def _run(tmp_path, mode, num_ps, max_restarts, *extra, num_workers=2):
  """Runs restart_task.py's MODE to its end; returns the LocalCluster,
  the launcher's status and its log."""
  marks = tmp_path / 'marks'
  marks.mkdir()
  train_dir = str(tmp_path / 'train')
  output = _Lines()
  cluster = launch.LocalCluster(
      [TASK, mode, str(marks), '--train_dir=%s' % train_dir] + list(extra),
      num_ps, num_workers, output=output, grace_secs=5,
      max_restarts=max_restarts)
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
      '[launch] worker1 failed with exit status 2 (bad input, which a '
      'restart would meet again); stopping the cluster')
  assert len(_started(log, 'worker1')) == 1


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
