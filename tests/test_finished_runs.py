"""A run that finds its last step reached trains nothing, and training
stops at --max_number_of_steps."""

import os

from tests.script_runner import file_digests
from tests.script_runner import run_script

TRAIN = 'train_image_classifier.py'


def _train_flags(digits_dir, train_dir, steps, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
          '--optimizer=sgd', '--learning_rate=0.01',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=5',
          '--train_dir=%s' % train_dir] + list(extra)


def test_a_finished_run_started_again_trains_nothing_and_exits_0(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  first = run_script(TRAIN, *_train_flags(digits_dir, train_dir, 10))
  assert first.returncode == 0, first.stdout[-3000:]
  before = file_digests(train_dir)
  assert 'model.ckpt-10.index' in before
  for steps in (10, 4):  # The same command (a requeue), a lower limit.
    again = run_script(TRAIN, *_train_flags(digits_dir, train_dir, steps))
    assert again.returncode == 0, again.stdout[-3000:]
    assert ('model.ckpt-10 holds global step 10, and --max_number_of_steps '
            'is %d: nothing left to train; %s is left as it is. Raise '
            '--max_number_of_steps to train on.' % (steps, train_dir)
            in again.stdout), again.stdout[-3000:]
    assert 'step 11' not in again.stdout
    assert file_digests(train_dir) == before
  assert not os.path.exists(os.path.join(train_dir, 'train.lock'))
