"""Training on a disk that fills up, as root: a small tmpfs of its own.

The failed save exits 2 (a restart would meet the same full disk), names
the reason, keeps the previous checkpoint the latest and leaves no
temporary file; once the disk has room, the same command resumes. An
export to a full disk exits 2 too, with one line, leaving nothing of its
artifact and the disk's other files as they were.
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


EXPORT = 'export_inference_graph.py'
# LeNet's weights take 13 MB, frozen into the graph or in the SavedModel's
# variables: with 10 MB of the disk taken, neither fits.
FILLER_BYTES = 10 << 20


@pytest.mark.parametrize('flag, value, path', [
    ('output_file', 'out/lenet.pb', 'out/lenet.pb'),
    ('saved_model_dir', 'out/serving', 'out/serving/1'),
])
def test_an_export_to_a_full_disk_exits_2_leaving_nothing(
    disk, digits_dir, tmp_path, flag, value, path):
  train_dir = str(tmp_path / 'train')
  result = run_script(TRAIN, *_flags(digits_dir, train_dir, 1))
  assert result.returncode == 0, result.stdout[-3000:]
  filler = os.path.join(disk, 'filler')
  with open(filler, 'wb') as f:
    f.write(b'\1' * FILLER_BYTES)
  result = run_script(EXPORT, '--model_name=lenet', '--dataset_name=digits',
                      '--checkpoint_path=%s' % train_dir,
                      '--%s=%s' % (flag, os.path.join(disk, value)))
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert error_lines(result.stdout) == [
      'error: writing --%s=%s failed (No space left on device); nothing was '
      'left of it. Free space or give a path on a writable disk with room, '
      'then export again' % (flag, os.path.join(disk, path))]
  assert os.listdir(disk) == ['filler']
  with open(filler, 'rb') as f:
    assert f.read() == b'\1' * FILLER_BYTES
