"""A train_dir's checkpoints are never silently lost, overwritten or mixed:
a lost index is rebuilt, an unreadable checkpoint is skipped and kept,
another model is refused before anything is written, and one run at a time
holds train_dir."""

import fcntl
import glob
import os
import re
import shutil
import subprocess
import time

import pytest

from tf2_compat.slim_compat import tf
from tests.script_runner import assert_one_usage_error
from tests.script_runner import file_digests
from tests.script_runner import kill_group
from tests.script_runner import run_script
from tests.script_runner import start_script
from tests.script_runner import wait_for_log_line
from training import checkpoint_fit
from training import input_position
from training import resume_check
from training import train_dir_lock
from training.errors import UsageError

TRAIN = 'train_image_classifier.py'
EVAL = 'eval_image_classifier.py'
# "Within seconds", on two cores shared with other test runs.
REFUSAL_SECS = 60


def _flags(dataset_dir, train_dir, steps, *extra):
  """lenet on digits; with --save_interval_secs=0 a run saves its first
  and its last step."""
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=4',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=1',
          '--save_interval_secs=0', '--train_dir=%s' % train_dir] + list(
              extra)


def _eval_flags(dataset_dir, checkpoint_path, eval_dir, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--batch_size=60',
          '--checkpoint_path=%s' % checkpoint_path,
          '--eval_dir=%s' % eval_dir] + list(extra)


def _latest_step(train_dir):
  return int(tf.train.latest_checkpoint(train_dir).rsplit('-', 1)[1])


def _lines_with(output, text):
  return [line for line in output.splitlines() if text in line]


@pytest.fixture(scope='module')
def trained(digits_dir, tmp_path_factory):
  """A train_dir of lenet on digits with the checkpoints of steps 0 and 2."""
  train_dir = str(tmp_path_factory.mktemp('trained') / 'train')
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 2))
  assert result.returncode == 0, result.stdout[-3000:]
  assert sorted(glob.glob(os.path.join(train_dir, '*.index'))) == [
      os.path.join(train_dir, 'model.ckpt-%d.index' % s) for s in (0, 2)]
  return train_dir


@pytest.fixture
def train_dir(trained, tmp_path):
  """A copy of `trained` of the test's own."""
  copy = str(tmp_path / 'train')
  shutil.copytree(trained, copy)
  return copy


def _truncate(path):
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)
  return os.path.getsize(path)


# Case 1: the `checkpoint` index file is lost.


@pytest.mark.slow
@pytest.mark.parametrize('damage', ['missing', 'garbled'])
def test_a_lost_index_is_rebuilt_and_training_resumes_from_the_newest_step(
    digits_dir, train_dir, damage):
  index = os.path.join(train_dir, 'checkpoint')
  if damage == 'missing':
    os.remove(index)
  else:
    with open(index, 'w') as f:
      f.write('model_checkpoint_path: "model.ck')  # A write cut short.
  step_0 = {name: digest for name, digest in file_digests(train_dir).items()
            if name.startswith('model.ckpt-0.')}
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 3))
  assert result.returncode == 0, result.stdout[-3000:]
  rebuilt = _lines_with(result.stdout, 'its checkpoint file was')
  assert len(rebuilt) == 1, rebuilt
  assert re.search(
      r'%s: its checkpoint file was %s; resuming from model\.ckpt-2, the '
      r'newest readable checkpoint \(the checkpoint file now lists '
      r'model\.ckpt-0, model\.ckpt-2\)$' % (
          re.escape(train_dir),
          'missing' if damage == 'missing' else r'garbled \(.+\)'),
      rebuilt[0]), rebuilt[0]
  assert 'ParseError' not in result.stdout
  assert 'Restoring parameters from %s' % os.path.join(
      train_dir, 'model.ckpt-2') in result.stdout
  assert 'Saving checkpoints for 0 ' not in result.stdout
  assert _latest_step(train_dir) == 3
  assert {name: digest for name, digest in file_digests(train_dir).items()
          if name.startswith('model.ckpt-0.')} == step_0


# Case 2: resuming with another model.


@pytest.mark.slow
def test_resuming_with_another_model_is_refused_with_train_dir_untouched(
    digits_dir, train_dir):
  before = file_digests(train_dir)
  started = time.time()
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 3,
                                     '--model_name=cifarnet'))
  elapsed = time.time() - started
  latest = re.escape(os.path.join(train_dir, 'model.ckpt-2'))
  assert_one_usage_error(
      result,
      r'error: --train_dir=%s: checkpoint %s does not fit the model built '
      r'from these flags: variable CifarNet/conv1/weights is not in it '
      r'\(and \d+ more variable\(s\) differ\)\. It was trained with '
      r'--model_name=lenet: resume with that, or give another --train_dir '
      r'\(to fine-tune from it: --checkpoint_path=%s with an empty '
      r'--train_dir\)' % (re.escape(train_dir), latest, latest))
  assert elapsed < REFUSAL_SECS
  assert file_digests(train_dir) == before


def _write_checkpoint(prefix, values, layout=None):
  """A checkpoint of float variables {name: numpy value} (and a saved
  input layout)."""
  with tf.Graph().as_default():
    variables = [tf.Variable(value, name=name)
                 for name, value in values.items()]
    if layout is not None:
      variables.append(tf.Variable(layout, name=input_position.LAYOUT_NAME))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver(variables).save(session, prefix)


def test_an_inception_v1_checkpoint_names_inception_v1_not_the_video_nets():
  # i3d and s3dg share its scope, but the scripts refuse them.
  assert checkpoint_fit._model_names(
      ['InceptionV1/Logits/Conv2d_0c_1x1/weights']) == ['inception_v1']


_CHOICES = checkpoint_fit.Choices(model_name='lenet', dataset_name='flowers',
                                  labels_offset=0)


def test_another_number_of_classes_is_named_with_the_dataset_trained_on(
    tmp_path):
  checkpoint = str(tmp_path / 'model.ckpt-2')
  _write_checkpoint(checkpoint, {'LeNet/fc4/weights': [[0.0] * 10] * 3},
                    layout='dataset=digits/train batch_size=4 labels_offset=0')
  with tf.Graph().as_default():
    model = tf.Variable([[0.0] * 5] * 3, name='LeNet/fc4/weights')
    with pytest.raises(UsageError) as raised:
      checkpoint_fit.check_resume(str(tmp_path), checkpoint, [model],
                                  _CHOICES)
  assert re.search(
      r'variable LeNet/fc4/weights has shape \[3, 5\] here but \[3, 10\] in '
      r'it\. It was trained with --dataset_name=digits: resume with that',
      str(raised.value)), str(raised.value)


# Case 3: a truncated newest checkpoint.


@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_moved_aside_and_training_resumes(
    digits_dir, train_dir):
  size = _truncate(os.path.join(train_dir,
                                'model.ckpt-2.data-00000-of-00001'))
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 3))
  assert result.returncode == 0, result.stdout[-3000:]
  moved = os.path.join(train_dir, 'unreadable', 'model.ckpt-2')
  lines = _lines_with(result.stdout, 'is unreadable')
  assert len(lines) == 1, lines
  assert lines[0].endswith(
      '%s: model.ckpt-2 is unreadable (model.ckpt-2.data-00000-of-00001 is '
      'truncated: shorter than its index says), its files moved to %s; '
      'resuming from model.ckpt-0, the newest readable checkpoint (the '
      'checkpoint file now lists model.ckpt-0)' % (train_dir, moved)), lines
  assert 'Restoring parameters from %s' % os.path.join(
      train_dir, 'model.ckpt-0') in result.stdout
  assert os.path.getsize(moved + '.data-00000-of-00001') == size
  assert os.path.exists(moved + '.index')
  assert _latest_step(train_dir) == 3


@pytest.mark.slow
def test_eval_of_a_directory_evaluates_its_newest_readable_checkpoint(
    digits_dir, train_dir, tmp_path):
  _truncate(os.path.join(train_dir, 'model.ckpt-2.data-00000-of-00001'))
  before = file_digests(train_dir)
  result = run_script(EVAL, *_eval_flags(digits_dir, train_dir,
                                         tmp_path / 'eval'))
  assert result.returncode == 0, result.stdout[-3000:]
  lines = _lines_with(result.stdout, 'is unreadable')
  assert len(lines) == 1, lines
  assert lines[0].endswith(
      '%s: model.ckpt-2 is unreadable (model.ckpt-2.data-00000-of-00001 is '
      'truncated: shorter than its index says); reading model.ckpt-0, the '
      'newest readable checkpoint' % train_dir), lines
  assert re.search(r'on 360 examples \(checkpoint step 0\)', result.stdout)
  assert file_digests(train_dir) == before


@pytest.mark.slow
def test_eval_of_an_unreadable_checkpoint_names_the_readable_one(
    digits_dir, train_dir, tmp_path):
  _truncate(os.path.join(train_dir, 'model.ckpt-2.data-00000-of-00001'))
  started = time.time()
  result = run_script(EVAL, *_eval_flags(
      digits_dir, os.path.join(train_dir, 'model.ckpt-2'), tmp_path / 'eval'))
  assert_one_usage_error(result, re.escape(
      'error: --checkpoint_path=%s is unreadable: model.ckpt-2.data-00000-'
      'of-00001 is truncated: shorter than its index says; the newest '
      'readable checkpoint beside it is %s' % (
          os.path.join(train_dir, 'model.ckpt-2'),
          os.path.join(train_dir, 'model.ckpt-0'))))
  assert time.time() - started < REFUSAL_SECS


def test_a_train_dir_with_no_readable_checkpoint_is_refused_untouched(
    tmp_path):
  train_dir = str(tmp_path)
  for step in (1, 2):
    _write_checkpoint(os.path.join(train_dir, 'model.ckpt-%d' % step),
                      {'w': [float(step)] * 1000})
    _truncate(os.path.join(train_dir,
                           'model.ckpt-%d.data-00000-of-00001' % step))
  before = file_digests(train_dir)
  with pytest.raises(UsageError, match=re.escape(
      '--train_dir=%s: no checkpoint in it is readable: model.ckpt-2 is '
      'unreadable (model.ckpt-2.data-00000-of-00001 is truncated: shorter '
      'than its index says); model.ckpt-1 is unreadable' % train_dir)):
    resume_check.prepare_train_dir(train_dir, [], _CHOICES)
  assert file_digests(train_dir) == before


# Case 4: eval with the wrong --model_name.


@pytest.mark.slow
def test_eval_with_another_model_is_refused_naming_the_variable(
    digits_dir, trained, tmp_path):
  started = time.time()
  result = run_script(EVAL, *_eval_flags(digits_dir, trained,
                                         tmp_path / 'eval',
                                         '--model_name=cifarnet'))
  assert_one_usage_error(
      result,
      r'error: --checkpoint_path=%s: checkpoint %s does not fit the model '
      r'built from these flags: variable CifarNet/conv1/weights is not in '
      r'it \(and \d+ more variable\(s\) differ\)\. It was trained with '
      r'--model_name=lenet: evaluate with that, or give another '
      r'--checkpoint_path' % (re.escape(trained), re.escape(
          os.path.join(trained, 'model.ckpt-2'))))
  assert time.time() - started < REFUSAL_SECS


# Case 5: one run per train_dir.


@pytest.mark.slow
def test_of_two_runs_started_at_once_one_trains_and_the_other_is_refused(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  flags = _flags(digits_dir, train_dir, 10 ** 6)
  runs = [start_script(TRAIN, *flags), start_script(TRAIN, *flags)]
  try:
    deadline = time.time() + REFUSAL_SECS
    while all(run.poll() is None for run in runs) and time.time() < deadline:
      time.sleep(0.1)
    refused = [run for run in runs if run.poll() is not None]
    assert len(refused) == 1, '%d run(s) ended within %d s' % (
        len(refused), REFUSAL_SECS)
    refused = refused[0]
    winner = runs[1 - runs.index(refused)]
    refused_output, _ = refused.communicate(timeout=30)
    # The winner trains on; SIGTERM makes it save and stop.
    started = wait_for_log_line(winner, r'step \d+: loss')
    winner.terminate()
    rest, _ = winner.communicate(timeout=120)
    winner_output = ''.join(started) + rest
  finally:
    for run in runs:
      kill_group(run)
  assert_one_usage_error(
      subprocess.CompletedProcess(refused.args, refused.returncode,
                                  refused_output),
      r'error: --train_dir=%s is in use by another training run \(pid %d on '
      r'host .+ since .+, holding %s\); wait for it to end or stop it, or '
      r'give another --train_dir' % (
          re.escape(train_dir), winner.pid,
          re.escape(os.path.join(train_dir, 'train.lock'))))
  assert 'Saving checkpoints' not in refused_output
  assert winner.returncode == 0, winner_output[-3000:]
  saved_by_winner = set(re.findall(r'Saving checkpoints for (\d+) ',
                                   winner_output))
  in_train_dir = {re.match(r'model\.ckpt-(\d+)\.index$', name).group(1)
                  for name in os.listdir(train_dir)
                  if name.endswith('.index')}
  assert '0' in in_train_dir and in_train_dir == saved_by_winner
  assert not os.path.exists(os.path.join(train_dir, 'train.lock'))


@pytest.mark.slow
def test_the_lock_of_a_killed_run_is_taken_over_by_the_next_run(digits_dir,
                                                                  tmp_path):
  train_dir = str(tmp_path / 'train')
  killed = start_script(TRAIN, *_flags(digits_dir, train_dir, 10 ** 6,
                                       '--save_interval_secs=1'))
  try:
    wait_for_log_line(killed, r'Saving checkpoints for [1-9]')
  finally:
    kill_group(killed)  # SIGKILL: nothing runs on the way out.
  lock = os.path.join(train_dir, 'train.lock')
  with open(lock) as f:
    assert f.read().startswith('pid %d on host ' % killed.pid)
  step = _latest_step(train_dir)
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, step + 2))
  assert result.returncode == 0, result.stdout[-3000:]
  assert re.search(
      r'%s was left by a run that ended without releasing it \(pid %d on '
      r'host .+\); this run takes it over' % (re.escape(lock), killed.pid),
      result.stdout)
  assert 'Restoring parameters from %s' % os.path.join(
      train_dir, 'model.ckpt-%d' % step) in result.stdout
  assert _latest_step(train_dir) == step + 2
  assert not os.path.exists(lock)


def test_a_second_holder_is_refused_while_the_first_holds_the_lock(
    tmp_path):
  train_dir = str(tmp_path)
  with train_dir_lock.held(train_dir):
    with pytest.raises(UsageError, match=r'in use by another training run '
                       r'\(pid %d on host ' % os.getpid()):
      with train_dir_lock.held(train_dir):
        pass
  with train_dir_lock.held(train_dir):  # Released: free again.
    pass


def test_a_lock_file_unlinked_while_being_locked_is_not_trusted(
    tmp_path, monkeypatch):
  # The holder ending unlinks the file between this run's open and flock:
  # the lock must be taken on the file now at the path, which a third run
  # would open, not on the unlinked one.
  train_dir = str(tmp_path)
  path = os.path.join(train_dir, train_dir_lock.LOCK_NAME)
  real_flock = fcntl.flock
  unlinked = []

  def flock_after_the_holder_ended(fd, operation):
    if not unlinked:
      unlinked.append(os.fstat(fd).st_ino)
      os.unlink(path)
    return real_flock(fd, operation)

  monkeypatch.setattr(train_dir_lock.fcntl, 'flock',
                      flock_after_the_holder_ended)
  with train_dir_lock.held(train_dir):
    assert unlinked
    monkeypatch.setattr(train_dir_lock.fcntl, 'flock', real_flock)
    with pytest.raises(UsageError):  # The file at the path is locked.
      with train_dir_lock.held(train_dir):
        pass


def test_a_train_dir_the_lock_created_is_removed_when_nothing_was_written(
    tmp_path):
  train_dir = str(tmp_path / 'new')
  with pytest.raises(ValueError):
    with train_dir_lock.held(train_dir):
      assert os.listdir(train_dir) == [train_dir_lock.LOCK_NAME]
      raise ValueError('a graph-time error')
  assert not os.path.exists(train_dir)
