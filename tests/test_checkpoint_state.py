"""training.checkpoint_state: a copied train_dir names its own checkpoints."""

import os
import shutil

import pytest

from tf2_compat.slim_compat import tf
from training import checkpoint_state
from training.errors import UsageError


def _write_checkpoints(train_dir, steps, relative=False):
  """Checkpoints of one variable holding the step, as upstream Slim's
  Saver writes them (absolute paths) unless `relative`."""
  with tf.Graph().as_default():
    value = tf.Variable(0.0, name='value')
    step = tf.placeholder(tf.float32)
    assign = value.assign(step)
    saver = tf.train.Saver(save_relative_paths=relative)
    with tf.Session() as session:
      for s in steps:
        session.run(assign, {step: s})
        saver.save(session, os.path.join(train_dir, 'model.ckpt'),
                   global_step=s)


def _restored_value(train_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  return reader.get_tensor('value')


def test_a_copy_is_made_to_name_its_own_checkpoints(tmp_path):
  original, copy = str(tmp_path / 'original'), str(tmp_path / 'copy')
  _write_checkpoints(original, [1, 2, 3])
  shutil.copytree(original, copy)
  assert tf.train.latest_checkpoint(copy) == os.path.join(original,
                                                          'model.ckpt-3')
  checkpoint_state.check(copy)  # Every listed checkpoint has a copy.
  lines = []
  assert checkpoint_state.adopt(
      copy, log_fn=lambda *args: lines.append(args[0] % args[1:])) == original
  state = tf.train.get_checkpoint_state(copy)
  assert state.model_checkpoint_path == os.path.join(copy, 'model.ckpt-3')
  assert list(state.all_model_checkpoint_paths) == [
      os.path.join(copy, 'model.ckpt-%d' % s) for s in (1, 2, 3)]
  with open(os.path.join(copy, 'checkpoint')) as f:
    assert 'model_checkpoint_path: "model.ckpt-3"' in f.read()
  assert lines == [
      '%s was copied from %s: its checkpoint file now names the 3 '
      'checkpoint(s) here, latest model.ckpt-3, and nothing in %s is read or '
      'deleted' % (copy, original, original)]
  # The original is as it was; a second adopt has nothing to do.
  assert tf.train.latest_checkpoint(original) == os.path.join(original,
                                                              'model.ckpt-3')
  assert checkpoint_state.adopt(copy) is None


def test_checkpoints_missing_from_the_copy_are_dropped_from_its_list(
    tmp_path):
  original, copy = str(tmp_path / 'original'), str(tmp_path / 'copy')
  _write_checkpoints(original, [1, 2])
  shutil.copytree(original, copy)
  for name in os.listdir(copy):
    if name.startswith('model.ckpt-1.'):
      os.remove(os.path.join(copy, name))
  checkpoint_state.adopt(copy)
  assert list(tf.train.get_checkpoint_state(
      copy).all_model_checkpoint_paths) == [os.path.join(copy,
                                                         'model.ckpt-2')]
  assert os.path.exists(os.path.join(original, 'model.ckpt-1.index'))


def test_a_copy_without_its_latest_checkpoint_is_refused(tmp_path):
  original, copy = str(tmp_path / 'original'), str(tmp_path / 'copy')
  _write_checkpoints(original, [4])
  os.makedirs(copy)
  shutil.copy(os.path.join(original, 'checkpoint'), copy)
  latest = os.path.join(original, 'model.ckpt-4')
  with pytest.raises(UsageError) as raised:
    checkpoint_state.check(copy)
  assert str(raised.value) == (
      '--train_dir=%s: its checkpoint file names %s, in another directory '
      'and not in this one (a train_dir copied without its checkpoints?). '
      'Training here would restore it and later delete it. Copy that '
      "checkpoint's files here, or start from it with --checkpoint_path=%s "
      'and an empty --train_dir' % (copy, latest, latest))


@pytest.mark.parametrize('relative', [False, True])
def test_a_train_dir_naming_its_own_checkpoints_is_left_alone(tmp_path,
                                                              relative):
  train_dir = str(tmp_path / 'train')
  _write_checkpoints(train_dir, [7], relative=relative)
  with open(os.path.join(train_dir, 'checkpoint')) as f:
    before = f.read()
  checkpoint_state.check(train_dir)
  assert checkpoint_state.adopt(train_dir) is None
  with open(os.path.join(train_dir, 'checkpoint')) as f:
    assert f.read() == before
  assert _restored_value(train_dir) == 7.0


def test_no_train_dir_or_no_checkpoint_file_passes(tmp_path):
  checkpoint_state.check(str(tmp_path / 'absent'))
  assert checkpoint_state.adopt(str(tmp_path / 'absent')) is None
  checkpoint_state.check(str(tmp_path))
  assert checkpoint_state.adopt(str(tmp_path)) is None
