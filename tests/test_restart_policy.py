"""clusters.restarts, the launcher's restart policy, alone: the script's
arguments it reads, the training mode, the checkpoint index, what a
failure leads to, and the lines that say so."""

import pytest

from clusters import restarts


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


def _decision(action, flag, number, allowed):
  return restarts.Decision(action, flag, number, allowed)


@pytest.mark.parametrize('task,status,decision,line', [
    ('worker1', 137, _decision(restarts.GIVE_UP, '--max_restarts', 0, 0),
     'worker1 failed with exit status 137; stopping the cluster'),
    ('worker1', 137, _decision(restarts.GIVE_UP, '--max_restarts', 2, 2),
     'worker1 failed with exit status 137 after 2 restart(s), all that '
     '--max_restarts 2 allows; stopping the cluster'),
    ('worker0', 2, _decision(restarts.GIVE_UP, '--max_restarts', 0, 3),
     'worker0 failed with exit status 2, which is not restarted: the '
     'scripts exit 2 for what a restart would meet again (bad input, a full '
     'disk; see its error above); stopping the cluster'),
    ('worker1', 137, _decision(restarts.RESTART_CLUSTER, '--max_restarts', 1,
                               2),
     'worker1 failed with exit status 137; stopping every task to restart '
     'the cluster (restart 1 of --max_restarts 2)'),
    ('worker1', 137, _decision(restarts.RESTART_TASK, '--max_restarts', 2, 3),
     'worker1 failed with exit status 137; restarting it alone on '
     '127.0.0.1:5 (restart 2 of --max_restarts 3); the other tasks go on'),
    # The line of --ps_restarts is the one it always was, its status too.
    ('ps0', 7, _decision(restarts.RESTART_TASK, '--ps_restarts', 1, 3),
     'ps0 exited with status 7; restarting it on 127.0.0.1:5 (2 more '
     'restart(s) allowed)'),
    ('ps0', 0, _decision(restarts.RESTART_TASK, '--ps_restarts', 1, 3),
     'ps0 exited with status 0; restarting it on 127.0.0.1:5 (2 more '
     'restart(s) allowed)'),
    # Elsewhere a ps task that exits 0 has failed with status 1.
    ('ps0', 0, _decision(restarts.GIVE_UP, '--max_restarts', 0, 0),
     'ps0 failed with exit status 1; stopping the cluster'),
    ('ps0', 0, _decision(restarts.RESTART_TASK, '--max_restarts', 1, 1),
     'ps0 failed with exit status 1; restarting it alone on 127.0.0.1:5 '
     '(restart 1 of --max_restarts 1); the other tasks go on'),
])
def test_the_line_of_a_failed_task(task, status, decision, line):
  assert restarts.failure_line(task, status, decision, '127.0.0.1:5') == (
      '[launch] %s\n' % line)


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


def test_quick_restarts_wait_twice_as_long_each_time_up_to_30_s():
  backoff = restarts.Backoff()
  now, waits = 1000.0, []
  for _ in range(8):
    wait, _ = backoff.pause(now)
    waits.append(wait)
    now += wait + 2  # The restarted tasks fail 2 s after they start.
  assert waits == [0, 1, 2, 4, 8, 16, 30, 30]


def test_after_a_minute_without_restarts_the_next_is_made_at_once():
  backoff = restarts.Backoff()
  assert [backoff.pause(now)[0] for now in (0.0, 1.0, 3.0)] == [0, 1, 2]
  # The last restart was made at 3 + 2 s; the tasks then ran 60 s.
  assert backoff.pause(65.0)[0] == 0
  assert backoff.pause(66.0)[0] == 1


def test_the_line_of_a_wait_before_a_restart():
  backoff = restarts.Backoff()
  assert backoff.pause(100.0) == (0, None)
  assert backoff.pause(102.5) == (1, (
      '[launch] waiting 1 s before restarting: the last restart was 2.5 s '
      'ago (restarts less than 60 s apart wait 1 s, twice as long each time,'
      ' up to 30 s)\n'))
