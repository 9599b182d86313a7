"""--slurm with a variable srun would not set: one line naming it, exit 2.

As in tests/test_slurm.py, the variables are set by hand, here for task 1
of a srun step of 3 tasks on one node, localhost, with one of them spoiled.
"""

import os

import pytest

from clusters import srun_step
from tests.script_runner import run_script
from tests.script_runner import script_env
from tests.test_slurm import config_of
from tests.test_slurm import srun_env
from training import slurm_eval
from training.errors import UsageError

FIX = '; start every task with srun, or drop --slurm'

# (variable, value or None to unset it, what the error line says of it).
BAD_VARIABLES = [
    ('SLURM_PROCID', '5', "SLURM_PROCID='5' is not a task of this srun step, "
     'whose 3 tasks (SLURM_STEP_NUM_TASKS) are 0 to 2'),
    ('SLURM_PROCID', '-1', "SLURM_PROCID='-1' is not a task of this srun "
     'step, whose 3 tasks (SLURM_STEP_NUM_TASKS) are 0 to 2'),
    ('SLURM_PROCID', 'one', "SLURM_PROCID='one' is not a whole number"),
    ('SLURM_STEP_NUM_TASKS', None, 'SLURM_STEP_NUM_TASKS is not set, so this '
     'process is not a task of a srun step'),
    ('SLURM_STEP_NUM_TASKS', '0', "SLURM_STEP_NUM_TASKS='0': a srun step has "
     '1 task or more'),
    ('SLURM_STEP_NODELIST', '', "SLURM_STEP_NODELIST='' names no node"),
    ('SLURM_STEP_NODELIST', 'n[1-', "SLURM_STEP_NODELIST='n[1-' is not a "
     'Slurm node list (such as n[01-04],gpu7)'),
    ('SLURM_STEP_NODELIST', 'localhost,localhost',
     "SLURM_STEP_NODELIST='localhost,localhost' names node localhost twice"),
    ('SLURM_STEP_TASKS_PER_NODE', '3(x', "SLURM_STEP_TASKS_PER_NODE='3(x' is "
     'not a Slurm tasks-per-node list (such as 2(x3),1)'),
    ('SLURM_STEP_TASKS_PER_NODE', '2,1', "SLURM_STEP_TASKS_PER_NODE='2,1' "
     "gives the task counts of 2 node(s), but SLURM_STEP_NODELIST='localhost' "
     'has 1'),
    ('SLURM_STEP_TASKS_PER_NODE', '2', "SLURM_STEP_TASKS_PER_NODE='2' makes 2 "
     "tasks, but SLURM_STEP_NUM_TASKS='3'"),
    ('SLURMD_NODENAME', 'node7', "SLURMD_NODENAME='node7' is not a node of "
     "this srun step (SLURM_STEP_NODELIST='localhost')"),
    ('SLURM_LOCALID', 'abc', "SLURM_LOCALID='abc' is not a whole number"),
    ('SLURM_LOCALID', '3', "SLURM_LOCALID='3' is not a task of node "
     'localhost, which runs 3 of its tasks (SLURM_STEP_TASKS_PER_NODE): 0 to '
     '2'),
]


SPOILED = ['%s=%s' % (variable, 'unset' if value is None else repr(value))
           for variable, value, _ in BAD_VARIABLES]


def spoiled_env(variable, value):
  """srun's variables for task 1 of 3, `variable` set to `value`."""
  env = srun_env(3, 1)
  if value is None:
    del env[variable]
  else:
    env[variable] = value
  return env


@pytest.fixture
def spoil(monkeypatch):
  for name in list(os.environ):
    if name.startswith('SLURM'):
      monkeypatch.delenv(name)

  def enter(variable, value):
    for name, text in spoiled_env(variable, value).items():
      monkeypatch.setenv(name, text)
  return enter


# How train_image_classifier.py and eval_image_classifier.py read them.
READERS = [
    pytest.param(lambda digits_dir: config_of(digits_dir, '--num_ps_tasks=1'),
                 id='train'),
    pytest.param(lambda digits_dir: slurm_eval.this_task_evaluates(True),
                 id='eval'),
]


@pytest.mark.parametrize('read', READERS)
@pytest.mark.parametrize('variable, value, says', BAD_VARIABLES,
                         ids=SPOILED)
def test_a_bad_variable_is_one_line_naming_it_its_value_and_the_fix(
    digits_dir, spoil, read, variable, value, says):
  spoil(variable, value)
  with pytest.raises(UsageError) as raised:
    read(digits_dir)
  assert raised.value.lines == ('--slurm: ' + says + FIX,)


def test_a_node_list_srun_sets_is_read_as_the_resolver_reads_it():
  env = dict(srun_env(6, 4, nodes='n[08-10]', tasks_per_node='3,2,1',
                      node='n09', local_id=1))
  step = srun_step.SrunStep(env)
  assert (step.rank, step.num_tasks) == (4, 6)
  assert step.nodes == ('n08', 'n09', 'n10')
  assert step.tasks_per_node == (3, 2, 1)
  assert (step.node, step.local_id) == ('n09', 1)


def test_without_slurmd_the_placement_variables_may_be_missing():
  env = srun_env(3, 2)
  del env['SLURMD_NODENAME'], env['SLURM_LOCALID']
  step = srun_step.SrunStep(env)
  assert (step.rank, step.node, step.local_id) == (2, None, None)


# Through the scripts: exit status 2 and the one error line.


def test_training_with_a_rank_outside_the_step_exits_2(digits_dir, tmp_path):
  result = run_script(
      'train_image_classifier.py', '--slurm', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--train_dir=%s' % (tmp_path / 'train'),
      env=dict(script_env(), **spoiled_env('SLURM_PROCID', '5')))
  assert result.returncode == 2, result.stdout
  assert [line for line in result.stdout.splitlines()
          if line.startswith('error:')] == [
              "error: --slurm: SLURM_PROCID='5' is not a task of this srun "
              'step, whose 3 tasks (SLURM_STEP_NUM_TASKS) are 0 to 2' + FIX]
  assert 'Traceback' not in result.stdout
  assert not (tmp_path / 'train').exists()


def test_evaluation_with_a_bad_local_id_exits_2(tmp_path):
  result = run_script(
      'eval_image_classifier.py', '--slurm',
      '--checkpoint_path=%s' % (tmp_path / 'none'),
      '--dataset_dir=%s' % (tmp_path / 'none'),
      env=dict(script_env(), **spoiled_env('SLURM_LOCALID', 'abc')))
  assert result.returncode == 2, result.stdout
  assert [line for line in result.stdout.splitlines()
          if line.startswith('error:')] == [
              "error: --slurm: SLURM_LOCALID='abc' is not a whole number" + FIX]
  assert 'Traceback' not in result.stdout
