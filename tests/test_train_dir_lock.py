"""train_dir/train.lock is never written through, never blocks, and says
what it found: a link, a directory, a FIFO or a hard link at its path is
refused and left as it is; a file system without flock is refused naming
--train_dir_lock=none, which trains without the lock; a left lock file of
any bytes shows as one short printable line."""

import errno
import fcntl
import os
import random
import re

import pytest

from tests.script_runner import run_script
from training import train_dir_lock
from training.errors import UsageError

TRAIN = 'train_image_classifier.py'
PRECIOUS = 'a file outside train_dir\n'


def _read(path):
  with open(path) as f:
    return f.read()


def _refusal(train_dir, what, fix):
  path = os.path.join(train_dir, 'train.lock')
  return re.escape(
      '--train_dir=%s: its lock file %s %s; it was left as it is and nothing '
      'was written to it. To train there, %s and run again, or give another '
      '--train_dir' % (train_dir, path, what, fix.replace('PATH', path)))


@pytest.mark.parametrize('target_exists', [True, False],
                         ids=['to_a_file', 'dangling'])
def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_not_followed(
    tmp_path, target_exists):
  train_dir = str(tmp_path / 'train')
  os.mkdir(train_dir)
  target = str(tmp_path / 'outside')
  if target_exists:
    with open(target, 'w') as f:
      f.write(PRECIOUS)
  lock = os.path.join(train_dir, 'train.lock')
  os.symlink(target, lock)
  with pytest.raises(UsageError, match=_refusal(
      train_dir, 'is a symbolic link (to %s)' % target,
      'remove the link (rm PATH; its target is not touched)')):
    with train_dir_lock.held(train_dir):
      pass
  assert os.readlink(lock) == target
  if target_exists:
    assert _read(target) == PRECIOUS
  else:
    assert not os.path.lexists(target)


def test_a_lock_file_with_another_hard_link_is_refused_and_not_written(
    tmp_path):
  train_dir = str(tmp_path)
  other = str(tmp_path / 'elsewhere')
  with open(other, 'w') as f:
    f.write(PRECIOUS)
  os.link(other, os.path.join(train_dir, 'train.lock'))
  with pytest.raises(UsageError, match=_refusal(
      train_dir, 'has 2 hard links: the same file is also elsewhere',
      'remove this name of it (rm PATH; its other names keep the file)')):
    with train_dir_lock.held(train_dir):
      pass
  assert _read(other) == PRECIOUS
  assert os.stat(other).st_nlink == 2


@pytest.mark.parametrize('kind, make, what, fix', [
    ('directory', os.mkdir, 'is a directory', 'move it away or remove it'),
    ('fifo', os.mkfifo, 'is a FIFO, not a regular file', 'remove it (rm PATH)'),
], ids=['directory', 'fifo'])
def test_a_lock_path_that_is_no_regular_file_is_refused_and_kept(
    tmp_path, kind, make, what, fix):
  train_dir = str(tmp_path)
  lock = os.path.join(train_dir, 'train.lock')
  make(lock)
  with pytest.raises(UsageError, match=_refusal(train_dir, what, fix)):
    with train_dir_lock.held(train_dir):
      pass
  is_kind = os.path.isdir if kind == 'directory' else (
      lambda p: os.path.exists(p) and not os.path.isfile(p)
      and not os.path.isdir(p))
  assert is_kind(lock)


@pytest.mark.parametrize('code', [errno.ENOLCK, errno.EOPNOTSUPP],
                         ids=errno.errorcode.get)
@pytest.mark.parametrize('existing', [True, False],
                         ids=['existing_dir', 'new_dir'])
def test_a_file_system_without_flock_is_refused_naming_the_flag_to_run_there(
    tmp_path, monkeypatch, code, existing):
  def no_flock(unused_fd, unused_operation):
    raise OSError(code, os.strerror(code))

  monkeypatch.setattr(train_dir_lock.fcntl, 'flock', no_flock)
  train_dir = str(tmp_path / 'train')
  if existing:
    os.mkdir(train_dir)
  with pytest.raises(UsageError) as raised:
    with train_dir_lock.held(train_dir):
      pass
  assert raised.value.lines == (
      '--train_dir=%s: its file system does not support flock (%s: %s), '
      'which keeps a second run off a train_dir; pass --train_dir_lock=none '
      'to train there without the lock (then make sure one run at a time '
      'uses it), or give a --train_dir on a local disk'
      % (train_dir, os.path.join(train_dir, 'train.lock'),
         os.strerror(code)),)
  # No empty train.lock left; a train_dir the lock made is gone again.
  assert os.listdir(train_dir) == [] if existing else not os.path.exists(
      train_dir)


def test_with_the_lock_off_nothing_is_locked_or_written(tmp_path):
  train_dir = str(tmp_path)
  lock = os.path.join(train_dir, 'train.lock')
  lines = []
  with train_dir_lock.held(train_dir):  # Another run's, as far as it knows.
    holder = _read(lock)
    with train_dir_lock.held(train_dir, train_dir_lock.NONE,
                             log_fn=lambda fmt, *args: lines.append(
                                 fmt % args)):
      assert _read(lock) == holder
  assert lines == [
      "--train_dir_lock=none: %s is not locked; a second run started on it "
      "would mix its checkpoints with this one's" % train_dir]


def test_a_run_ending_leaves_the_lock_another_run_made_meanwhile(tmp_path):
  # Its own file was removed while it trained, and another run made and
  # holds a new one: that one is the other run's lock, not this run's.
  train_dir = str(tmp_path)
  lock = os.path.join(train_dir, 'train.lock')
  with train_dir_lock.held(train_dir):
    os.unlink(lock)
    with open(lock, 'w') as other:
      other.write('pid 1 on host elsewhere\n')
  assert _read(lock) == 'pid 1 on host elsewhere\n'


def _taken_over_from(train_dir, content):
  """What the takeover line shows of a left lock file holding `content`."""
  with open(os.path.join(train_dir, 'train.lock'), 'wb') as f:
    f.write(content)
  lines = []
  with train_dir_lock.held(train_dir,
                           log_fn=lambda fmt, *args: lines.append(fmt % args)):
    pass
  assert len(lines) == 1, lines
  return re.fullmatch(r'.* was left by a run that ended without releasing it '
                      r'\((.*)\); this run takes it over', lines[0],
                      re.S).group(1)


def test_a_left_lock_file_of_control_bytes_shows_as_its_first_line_escaped(
    tmp_path):
  shown = _taken_over_from(str(tmp_path), b'\x1b[2J\x00pid\xff' + b'A' * 5000
                           + b'\nsecond line')
  assert shown == (r'\x1b[2J\x00pid\xff' + 'A' * 200)[:200] + '...'


def test_a_left_lock_file_of_random_bytes_shows_as_one_short_printable_line(
    tmp_path):
  shown = _taken_over_from(str(tmp_path), random.Random(26).randbytes(4096))
  assert 0 < len(shown) <= 203
  assert shown.isprintable()  # No line break, no terminal control.


@pytest.mark.slow
def test_with_train_dir_lock_none_a_run_trains_beside_a_held_lock(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  lock = os.path.join(train_dir, 'train.lock')
  with train_dir_lock.held(train_dir):
    holder = _read(lock)
    result = run_script(
        TRAIN, '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
        '--model_name=lenet', '--clone_on_cpu', '--batch_size=4',
        '--max_number_of_steps=2', '--save_interval_secs=0',
        '--train_dir=%s' % train_dir, '--train_dir_lock=none')
    assert _read(lock) == holder
  assert result.returncode == 0, result.stdout[-3000:]
  assert re.search(r'--train_dir_lock=none: %s is not locked' % re.escape(
      train_dir), result.stdout)
  assert os.path.exists(os.path.join(train_dir, 'model.ckpt-2.index'))
