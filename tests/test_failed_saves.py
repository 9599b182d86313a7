"""A failed checkpoint write leaves no temporary file behind (only that
save's are removed), names the operating system's reason, and is lasting
(exit 2, never restarted) when a restart would meet it again."""

import os
import resource

import pytest

from tf2_compat.slim_compat import tf
import train_image_classifier
from training import failed_saves
from training import hooks
from training.errors import ScriptError

HEX = '0123456789abcdef' * 2  # 32 hex digits, as uuid4().hex.


def _listing(directory):
  return sorted(os.listdir(directory))


def test_a_save_cut_short_by_the_file_size_limit_leaves_no_temporary_file(
    graph, tmp_path):
  train_dir = str(tmp_path)
  for index in range(8):  # 1 MB each: the data file outgrows the limit.
    tf.Variable(tf.zeros([1 << 18]), name='w%d' % index)
  tf.train.get_or_create_global_step()
  hook = hooks.CheckpointSaverHook(train_dir, save_steps=1,
                                   saver=tf.train.Saver())
  hook.begin()
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    hook.after_create_session(session, None)  # Saves step 0, whole.
    before = _listing(train_dir)
    # Python ignores SIGXFSZ: a write past the limit fails with EFBIG.
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
      with pytest.raises(hooks.CheckpointWriteError) as raised:
        hook._save(session, 1)  # pylint: disable=protected-access
    finally:
      resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
  assert _listing(train_dir) == before
  assert 'model.ckpt-0.index' in before
  assert str(raised.value) == (
      'writing the checkpoint of step 1 to %s failed (File too large); the '
      'latest checkpoint is still %s. Free space or fix the directory, then '
      'resume.' % (train_dir, os.path.join(train_dir, 'model.ckpt-0')))
  assert raised.value.lasting


def _touch(directory, name):
  path = os.path.join(directory, name)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, 'w') as f:
    f.write('x')


def test_only_the_temporary_files_of_the_failed_save_are_removed(tmp_path):
  train_dir = str(tmp_path)
  left_before = ['model.ckpt-4.data-00000-of-00001.tempstate11',
                 'model.ckpt-3.index.tempstate12']
  for name in left_before:
    _touch(train_dir, name)
  attempt = failed_saves.SaveAttempt(os.path.join(train_dir, 'model.ckpt'), 4)
  its_own = ['checkpoint.tmp' + HEX,
             'model.ckpt-4.data-00000-of-00001.tempstate2568420042364819206',
             'model.ckpt-4.index.tempstate77',
             'model.ckpt-4.meta.tmp' + HEX,
             'model.ckpt-4_temp']
  others = ['model.ckpt-4.data-00000-of-00001',  # Whole: renamed already.
            'model.ckpt-40.index.tempstate5',  # Another step's.
            'model.ckpt-4.meta.tmpnothex',
            'notes.tmp' + HEX]
  for name in its_own[:-1] + others:
    _touch(train_dir, name)
  _touch(train_dir, 'model.ckpt-4_temp/part-00000-of-00001.index.tempstate3')
  assert attempt.remove_temporary_files() == its_own
  assert _listing(train_dir) == sorted(left_before + others)


TF_FAILURES = {
    # As TensorFlow 2.21 raises them (the first two seen on a full tmpfs
    # and under ulimit -f); the reason ends the line naming the file.
    'ENOSPC': tf.errors.ResourceExhaustedError(None, None, (
        'Graph execution error:\n\nDetected at node \'save/SaveV2\'\n'
        'train/model.ckpt-0.data-00000-of-00001.tempstate25684; No space '
        'left on device\n\t [[{{node save/SaveV2}}]]\nHint: If you want to '
        'see a list of allocated tensors when OOM happens, add '
        'report_tensor_allocations_upon_oom to RunOptions for current '
        'allocation info.')),
    'EFBIG': tf.errors.OutOfRangeError(None, None, (
        'Graph execution error:\n\ntrain/model.ckpt-2.data-00000-of-00001.'
        'tempstate43822; File too large\n\t [[{{node save/SaveV2}}]]')),
    'EROFS': tf.errors.FailedPreconditionError(
        None, None, 'train/checkpoint.tmp%s; Read-only file system' % HEX),
    'EDQUOT': OSError(122, 'Disk quota exceeded'),
    'EIO': tf.errors.UnknownError(
        None, None, 'train/model.ckpt-2.index.tempstate9; Input/output error'),
}


@pytest.mark.parametrize('name, reason, exit_code', [
    ('ENOSPC', 'No space left on device', 2),
    ('EFBIG', 'File too large', 2),
    ('EROFS', 'Read-only file system', 2),
    ('EDQUOT', 'Disk quota exceeded', 2),
    ('EIO', 'Input/output error', 1),
])
def test_a_write_failure_a_restart_would_meet_again_exits_2(
    monkeypatch, tmp_path, name, reason, exit_code):
  def failing_save(unused_self, unused_session, unused_step):
    raise TF_FAILURES[name]

  monkeypatch.setattr(tf.train.CheckpointSaverHook, '_save', failing_save)
  hook = hooks.CheckpointSaverHook(str(tmp_path), save_steps=1)
  with pytest.raises(ScriptError) as raised:
    with train_image_classifier.stopping_on_divergence(config=None):
      hook._save(None, 5)  # pylint: disable=protected-access
  assert raised.value.lines == (
      'writing the checkpoint of step 5 to %s failed (%s); the latest '
      'checkpoint is still none. Free space or fix the directory, then '
      'resume.' % (tmp_path, reason),)
  assert raised.value.exit_code == exit_code
