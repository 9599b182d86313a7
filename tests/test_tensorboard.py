"""TensorBoard reads what docs/training.md promises from a training run and an eval.

Read with TensorBoard's own event loader, the one `make tensorboard` serves
(`--load_fast=false`), not with TensorFlow's summary iterator.
"""

import math
import os
import re

import pytest
from tensorboard.backend.event_processing import event_accumulator

from tests.script_runner import run_script

LEARNING_RATE = 0.002
STEPS = 150
TRAIN_SCALARS = ['total_loss', 'learning_rate', 'Losses/clone_0/clone_loss',
                 'Losses/clone_1/clone_loss']
EVAL_SCALARS = ['eval/Accuracy', 'eval/Recall_5']


def _scalars(directory):
  """{tag: [(step, value), ...]} of the event files in `directory`."""
  # size_guidance 0: keep every event, TensorBoard would sample them.
  accumulator = event_accumulator.EventAccumulator(
      directory, size_guidance={event_accumulator.SCALARS: 0})
  accumulator.Reload()
  return {tag: [(event.step, event.value)
                for event in accumulator.Scalars(tag)]
          for tag in accumulator.Tags()[event_accumulator.SCALARS]}


@pytest.fixture(scope='module')
def run_dirs(digits_dir, tmp_path_factory):
  """A 2-clone training run (summaries every second) and its evaluation."""
  train_dir = str(tmp_path_factory.mktemp('tensorboard') / 'train')
  eval_dir = os.path.join(train_dir, 'eval')
  result = run_script(
      'train_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--num_clones=2', '--clone_on_cpu', '--batch_size=16',
      '--optimizer=adam', '--opt_epsilon=1e-8',
      '--learning_rate=%g' % LEARNING_RATE,
      '--learning_rate_decay_type=fixed',
      '--max_number_of_steps=%d' % STEPS, '--save_summaries_secs=1',
      '--train_dir=%s' % train_dir, timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  result = run_script(
      'eval_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--dataset_split_name=test',
      '--model_name=lenet', '--checkpoint_path=%s' % train_dir,
      '--eval_dir=%s' % eval_dir)
  assert result.returncode == 0, result.stdout[-3000:]
  return train_dir, eval_dir, result.stdout


@pytest.mark.slow
def test_training_scalars_are_written_at_increasing_steps(run_dirs):
  scalars = _scalars(run_dirs[0])
  missing = [tag for tag in TRAIN_SCALARS if tag not in scalars]
  assert not missing, 'missing %s; the run has %s' % (missing, sorted(scalars))
  for tag in TRAIN_SCALARS:
    steps = [step for step, _ in scalars[tag]]
    assert len(steps) >= 3, (tag, steps)
    assert steps == sorted(set(steps)), (tag, steps)
    assert steps[-1] <= STEPS
    assert all(math.isfinite(value) for _, value in scalars[tag])


@pytest.mark.slow
def test_learning_rate_scalar_is_the_flag(run_dirs):
  values = [value for _, value in _scalars(run_dirs[0])['learning_rate']]
  assert values == pytest.approx([LEARNING_RATE] * len(values))


@pytest.mark.slow
def test_total_loss_curve_goes_down(run_dirs):
  losses = [value for _, value in _scalars(run_dirs[0])['total_loss']]
  assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.slow
def test_eval_metrics_are_written_at_the_checkpoint_step(run_dirs):
  _, eval_dir, eval_log = run_dirs
  scalars = _scalars(eval_dir)
  assert sorted(scalars) == sorted(EVAL_SCALARS)
  assert [step for step, _ in scalars['eval/Accuracy']] == [STEPS]
  assert [step for step, _ in scalars['eval/Recall_5']] == [STEPS]
  accuracy = scalars['eval/Accuracy'][0][1]
  recall_5 = scalars['eval/Recall_5'][0][1]
  assert 0.0 <= accuracy <= recall_5 <= 1.0
  # The number in TensorBoard is the one the script printed.
  printed = re.search(r'accuracy ([\d.]+)% on 360 examples', eval_log)
  assert printed, eval_log[-2000:]
  assert accuracy * 100 == pytest.approx(float(printed.group(1)), abs=0.006)
