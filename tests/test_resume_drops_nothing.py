"""A resume loses nothing of the checkpoint it starts from: it is refused
when its flags build fewer variables than the checkpoint holds, and the
checkpoint it restored is never written again."""

import os
import re
import shutil

from tests.conftest import TRAINED_LENET_FLAGS
from tests.script_runner import assert_one_usage_error
from tests.script_runner import file_digests
from tests.script_runner import run_script
from tf2_compat.slim_compat import tf

TRAIN = 'train_image_classifier.py'
# One step of LeNet, the moving averages of its weights kept.
AVERAGED = ('--dataset_name=digits', '--model_name=lenet', '--clone_on_cpu',
            '--optimizer=sgd', '--max_number_of_steps=1',
            '--save_interval_secs=0', '--moving_average_decay=0.99')


def test_a_resume_that_would_drop_the_moving_averages_is_refused(
    digits_dir, tmp_path):
  # Before, it trained as plain float and saved its checkpoints without
  # the averages, which eval --moving_average_decay then refused.
  train_dir = str(tmp_path / 'train')
  first = run_script(TRAIN, '--dataset_dir=%s' % digits_dir,
                     '--train_dir=%s' % train_dir, *AVERAGED)
  assert first.returncode == 0, first.stdout[-3000:]
  before = file_digests(train_dir)
  flags = [flag for flag in AVERAGED if 'moving_average' not in flag]
  result = run_script(TRAIN, '--dataset_dir=%s' % digits_dir,
                      '--train_dir=%s' % train_dir,
                      *(flags + ['--max_number_of_steps=3']))
  checkpoint = os.path.join(train_dir, 'model.ckpt-1')
  assert_one_usage_error(result, re.escape(
      'error: --train_dir=%s: checkpoint %s holds 8 variable(s) that these '
      'flags do not build (LeNet/conv1/biases/ExponentialMovingAverage, '
      '...); resuming would save the next checkpoints without them. It was '
      'trained with --moving_average_decay: resume with it, or give another '
      '--train_dir' % (train_dir, checkpoint)))
  assert file_digests(train_dir) == before


def test_a_resume_with_another_optimizer_is_refused_naming_the_first(
    trained_lenet, digits_dir, tmp_path):
  # Its slots would be dropped from every later checkpoint.
  train_dir = str(tmp_path / 'train')
  shutil.copytree(trained_lenet, train_dir)
  before = file_digests(train_dir)
  flags = [flag for flag in TRAINED_LENET_FLAGS
           if not flag.startswith(('--optimizer', '--opt_epsilon'))]
  result = run_script(TRAIN, '--dataset_dir=%s' % digits_dir,
                      '--train_dir=%s' % train_dir, *flags,
                      '--optimizer=sgd')
  assert_one_usage_error(result, (
      r'error: --train_dir=.*: checkpoint .*model\.ckpt-\d+ holds \d+ '
      r'variable\(s\) that these flags do not build \(LeNet/conv1/biases/'
      r'Adam, \.\.\.\); resuming would save the next checkpoints without '
      r'them\. It was trained with --optimizer=adam: resume with it, or give '
      r'another --train_dir'))
  assert file_digests(train_dir) == before


def test_a_resume_leaves_the_checkpoint_it_restored_as_it_was(
    trained_lenet, digits_dir, tmp_path):
  # The saver's save at the session's start wrote the restored step's
  # files again, a graph of fewer variables without the others.
  train_dir = str(tmp_path / 'train')
  shutil.copytree(trained_lenet, train_dir)
  restored = tf.train.latest_checkpoint(train_dir)
  step = int(restored.rsplit('-', 1)[1])
  files = {name: digest for name, digest in file_digests(train_dir).items()
           if name.startswith('model.ckpt-%d.' % step)}
  assert len(files) == 3  # .data, .index and .meta.
  stamps = {name: os.stat(os.path.join(train_dir, name)).st_mtime_ns
            for name in files}
  flags = [flag for flag in TRAINED_LENET_FLAGS
           if not flag.startswith('--max_number_of_steps')]
  result = run_script(TRAIN, '--dataset_dir=%s' % digits_dir,
                      '--train_dir=%s' % train_dir, *flags,
                      '--max_number_of_steps=%d' % (step + 1))
  assert result.returncode == 0, result.stdout[-3000:]
  assert 'Restoring parameters from %s\n' % restored in result.stdout
  assert 'Saving checkpoints for %d ' % step not in result.stdout
  assert 'Saving checkpoints for %d ' % (step + 1) in result.stdout
  after = file_digests(train_dir)
  assert {name: after[name] for name in files} == files
  assert {name: os.stat(os.path.join(train_dir, name)).st_mtime_ns
          for name in files} == stamps
