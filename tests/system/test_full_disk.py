"""Training on a disk that fills up, as root: a small tmpfs of its own.

The failed save exits 2 (a restart would meet the same full disk), names
the reason, keeps the previous checkpoint the latest and leaves no
temporary file; once the disk has room, the same command resumes.
"""

import os
import re
import subprocess

import pytest

from tests.script_runner import error_lines
from tests.script_runner import run_script
from tf2_compat.slim_compat import tf

TRAIN = 'train_image_classifier.py'
# LeNet's checkpoint with plain SGD is 13 MB: the first save fits in 20 MB
# (with the graph and the events), the second does not.
SMALL, LARGE = '20m', '64m'


@pytest.fixture
def disk(tmp_path):
  """A 20 MB tmpfs mounted for the test, unmounted afterwards."""
  assert os.geteuid() == 0, (
      'tests/system/test_full_disk.py mounts a tmpfs: run it as root, with '
      'make test-system')
  mount_point = str(tmp_path / 'disk')
  os.mkdir(mount_point)
  subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=' + SMALL, 'tmpfs',
                  mount_point], check=True)
  try:
    yield mount_point
  finally:
    subprocess.run(['umount', mount_point], check=True)


def _flags(digits_dir, train_dir, steps):
  return ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=4',
          '--optimizer=sgd', '--max_number_of_steps=%d' % steps,
          '--save_interval_secs=0', '--train_dir=%s' % train_dir]


def test_a_full_disk_exits_2_without_temporary_files_then_resumes(
    disk, digits_dir):
  train_dir = os.path.join(disk, 'train')
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 3))
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  step_0 = os.path.join(train_dir, 'model.ckpt-0')
  assert error_lines(result.stdout) == [
      'error: writing the checkpoint of step 3 to %s failed (No space left '
      'on device); the latest checkpoint is still %s. Free space or fix the '
      'directory, then resume.' % (train_dir, step_0)]
  assert re.search(r'removed the temporary files of the failed save of step '
                   r'3 from .*: model\.ckpt-3\.data-00000-of-00001\.tempstate'
                   r'\d+$', result.stdout, re.M)
  assert sorted(name for name in os.listdir(train_dir)
                if name.startswith(('model.ckpt', 'checkpoint'))) == [
                    'checkpoint', 'model.ckpt-0.data-00000-of-00001',
                    'model.ckpt-0.index', 'model.ckpt-0.meta']
  assert tf.train.latest_checkpoint(train_dir) == step_0

  subprocess.run(['mount', '-o', 'remount,size=' + LARGE, disk], check=True)
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 3))
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'Restoring parameters from %s' % step_0 in result.stdout
  assert tf.train.latest_checkpoint(train_dir) == os.path.join(
      train_dir, 'model.ckpt-3')
