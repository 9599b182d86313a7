"""train_image_classifier.py and eval_image_classifier.py, end to end."""

import os
import random
import re
import shutil
import time

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from tests.script_runner import digits_accuracy
from tests.script_runner import kill_group
from tests.script_runner import run_script
from tests.script_runner import start_script
from tests.script_runner import wait_for_log_line

TRAIN = 'train_image_classifier.py'
EVAL = 'eval_image_classifier.py'



def _train_flags(dataset_dir, train_dir, steps, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--num_clones=2', '--clone_on_cpu',
          '--batch_size=16', '--optimizer=adam', '--opt_epsilon=1e-8',
          '--learning_rate=0.002',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=5',
          '--save_summaries_secs=1', '--train_dir=%s' % train_dir] + list(
              extra)


def _checkpoint_step(train_dir):
  latest = tf.train.latest_checkpoint(train_dir)
  return None if latest is None else int(latest.rsplit('-', 1)[1])


def _assert_ok(result):
  assert result.returncode == 0, result.stdout[-3000:]


def test_trains_two_clones_then_evaluates(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script(TRAIN, *_train_flags(digits_dir, train_dir, 30))
  _assert_ok(result)
  log = result.stdout
  assert ('global batch per step: 16 per clone x 2 clones = 32 examples'
          in log)
  assert 'steps per epoch: 1437 examples / 32 = 44.91' in log
  assert 'decay steps: 44.91 steps per epoch x 2 epochs = 89' in log
  assert re.search(r'step \d+: loss = [\d.]+, learning rate = 0.002, '
                   r'[\d.]+ examples/sec, \d+s left', log)
  assert _checkpoint_step(train_dir) == 30
  assert any(name.startswith('events.out.tfevents')
             for name in os.listdir(train_dir))

  result = run_script(EVAL, '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % (tmp_path / 'eval'))
  _assert_ok(result)
  match = re.search(r'digits test: accuracy ([\d.]+)% on 360 examples '
                    r'\(checkpoint step 30\)', result.stdout)
  assert match, result.stdout[-2000:]
  # 30 steps already beat chance (10%) by far.
  assert float(match.group(1)) > 40
  assert re.search(r'eval/Recall_5\[[\d.]+\]', result.stdout)
  assert os.listdir(str(tmp_path / 'eval'))


@pytest.mark.slow
def test_resumes_from_latest_checkpoint(trained_lenet, digits_dir, tmp_path):
  # Each run costs its start (the graph, the session, the first and last
  # checkpoints), not its steps: the shared LeNet's train_dir stands for a
  # first run (a copy: this one writes), and two steps show the resume.
  train_dir = str(tmp_path / 'train')
  shutil.copytree(trained_lenet, train_dir)
  step = _checkpoint_step(train_dir)
  assert step
  result = run_script(TRAIN, *_train_flags(digits_dir, train_dir, step + 2))
  _assert_ok(result)
  assert 'Restoring parameters from %s/model.ckpt-%d\n' % (
      train_dir, step) in result.stdout
  assert _checkpoint_step(train_dir) == step + 2


@pytest.mark.slow
def test_random_seed_fixes_the_trained_weights(digits_dir, tmp_path):
  """Initialisers and dropout follow --random_seed: the same seed and
  input order train the same weights, another seed other ones."""

  def weights(name, seed):
    train_dir = str(tmp_path / name)
    _assert_ok(run_script(TRAIN, *_train_flags(
        digits_dir, train_dir, 3, '--num_clones=1', '--shuffle_seed=1',
        '--random_seed=%d' % seed)))
    return tf.train.load_checkpoint(train_dir).get_tensor('LeNet/fc3/weights')

  first = weights('first', 5)
  np.testing.assert_allclose(weights('again', 5), first, rtol=0, atol=1e-6)
  assert np.abs(weights('other', 6) - first).max() > 1e-3


def _wait_for_checkpoint_after(train_dir, step, timeout=120):
  deadline = time.time() + timeout
  while time.time() < deadline:
    latest = _checkpoint_step(train_dir) if os.path.isdir(train_dir) else None
    if latest is not None and latest > step:
      return latest
    time.sleep(0.2)
  pytest.fail('no checkpoint after step %s within %d s' % (step, timeout))


def _kill_flags(dataset_dir, train_dir, steps, save_interval_secs=1):
  """One clone and a fixed shuffle seed: a resumed run reads the batches an
  uninterrupted one would; a checkpoint every second for the runs that are
  killed (0: the runs that are not save only their first and last). The
  learning rate halves every epoch (90 steps), so that the accuracy
  settles by step 400 instead of moving a point or two from one step to
  the next."""
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=16',
          '--optimizer=adam', '--opt_epsilon=1e-8', '--learning_rate=0.002',
          '--learning_rate_decay_type=exponential',
          '--num_epochs_per_decay=1', '--learning_rate_decay_factor=0.5',
          '--shuffle_seed=3',
          '--max_number_of_steps=%d' % steps, '--log_every_n_steps=100',
          '--save_interval_secs=%d' % save_interval_secs,
          '--save_summaries_secs=600', '--train_dir=%s' % train_dir]


def _wait_for_checkpoint_write_after(train_dir, step, timeout=120):
  """Returns as soon as the files of a checkpoint after `step` are being
  written (TensorFlow writes the data to a '.tempstate' file first)."""
  pattern = re.compile(r'^model\.ckpt-(\d+)\.data-.*\.tempstate')
  deadline = time.time() + timeout
  while time.time() < deadline:
    for name in os.listdir(train_dir):
      match = pattern.match(name)
      if match and int(match.group(1)) > step:
        return
    # The write lasts a fraction of a second: a coarser poll would miss it.
    time.sleep(0.002)
  pytest.fail('no checkpoint write after step %s within %d s' % (step,
                                                                 timeout))


NUM_KILLS = 10
FIRST_STEP = 20
# The accuracy of _kill_flags' schedule has settled by this step.
SETTLED_STEP = 400
# Steps the last interrupted run trains after the last kill.
STEPS_AFTER_THE_KILLS = 60


def _run_timeout(steps):
  """A bound that only stops a hung run of `steps` LeNet steps: its start,
  then 0.5 s a step (they take 10-40 ms on a loaded 2-core machine)."""
  return 120 + 0.5 * steps


@pytest.mark.slow
def test_sigkill_at_ten_random_moments_keeps_the_uninterrupted_accuracy(
    digits_dir, tmp_path):
  base = str(tmp_path / 'base')
  # Killed while starting, before any checkpoint: the next run starts over.
  process = start_script(TRAIN, *_kill_flags(digits_dir, base, 100000))
  try:
    wait_for_log_line(process, 'global batch per step')
  finally:
    kill_group(process)
  assert _checkpoint_step(base) is None
  # The interrupted and the uninterrupted run start from the same weights.
  _assert_ok(run_script(TRAIN, *_kill_flags(digits_dir, base, FIRST_STEP,
                                            save_interval_secs=0)))
  interrupted = str(tmp_path / 'interrupted')
  shutil.copytree(base, interrupted)
  previous = _kill_ten_times(digits_dir, interrupted, first_step=FIRST_STEP)
  # The killed runs train the more steps the faster the machine (365 to 535
  # seen on 2 loaded cores): the last step follows from where they ended,
  # so that the last run still trains steps of its own and both runs reach
  # the settled accuracy, without hundreds of steps past it.
  last_step = max(SETTLED_STEP, previous + STEPS_AFTER_THE_KILLS)
  # The uninterrupted run goes on beside the last interrupted one.
  uninterrupted_run = start_script(TRAIN, *_kill_flags(
      digits_dir, base, last_step, save_interval_secs=0))
  try:
    result = run_script(
        TRAIN, *_kill_flags(digits_dir, interrupted, last_step,
                            save_interval_secs=0),
        timeout=_run_timeout(last_step - previous))
    output, _ = uninterrupted_run.communicate(
        timeout=_run_timeout(last_step - FIRST_STEP))
  finally:
    kill_group(uninterrupted_run)
  _assert_ok(result)
  assert 'Restoring parameters from %s/model.ckpt-%d' % (
      interrupted, previous) in result.stdout
  assert _checkpoint_step(interrupted) == last_step
  assert uninterrupted_run.returncode == 0, output[-3000:]
  assert _checkpoint_step(base) == last_step
  # Not bit for bit: dropout draws its masks afresh after a restart.
  accuracy = digits_accuracy(digits_dir, interrupted)
  uninterrupted = digits_accuracy(digits_dir, base)
  print('step %d: %.2f%% after %d kills (the last at step %d), %.2f%% '
        'uninterrupted' % (last_step, accuracy, NUM_KILLS, previous,
                           uninterrupted))  # pytest -rP
  assert uninterrupted > 96
  # Three uninterrupted runs of this schedule to step 400: 97.78%, 98.06%,
  # 98.06%; the rate halves every 90 steps, so later steps move it little.
  assert abs(accuracy - uninterrupted) <= 1.5


def _kill_ten_times(digits_dir, train_dir, first_step):
  """SIGKILLs a run of train_dir NUM_KILLS times, each time checking the
  checkpoint it leaves; returns the step of the last one."""
  rng = random.Random(7)  # Seeded: a failure can be replayed.
  previous = first_step
  for kill in range(NUM_KILLS):
    process = start_script(TRAIN, *_kill_flags(digits_dir, train_dir, 100000))
    try:
      if kill % 4 == 3:  # Kills 4 and 8: while a checkpoint is written.
        _wait_for_checkpoint_write_after(train_dir, previous)
      else:  # The others: at a random moment after a new checkpoint.
        _wait_for_checkpoint_after(train_dir, previous)
        time.sleep(rng.uniform(0.0, 1.2))
    finally:
      kill_group(process)
    latest = _checkpoint_step(train_dir)
    # Whatever SIGKILL interrupted, the latest checkpoint is whole and no
    # older than the one the run resumed from.
    assert latest >= previous
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
    assert reader.get_tensor('global_step') == latest
    assert np.all(np.isfinite(reader.get_tensor('LeNet/fc4/weights')))
    previous = latest
  return previous


def _make_gray_folder(root, num_classes, per_class):
  rng = np.random.RandomState(0)
  with tf.Graph().as_default(), tf.Session() as sess:
    image = tf.placeholder(tf.uint8, [12, 12, 1])
    encode = tf.io.encode_png(image)
    for c in range(num_classes):
      folder = os.path.join(root, 'class_%d' % c)
      os.makedirs(folder)
      for i in range(per_class):
        pixels = (rng.rand(12, 12, 1) * 60 + 80 * c).astype(np.uint8)
        with open(os.path.join(folder, '%d.png' % i), 'wb') as f:
          f.write(sess.run(encode, {image: pixels}))


@pytest.mark.slow
def test_fine_tunes_with_other_classes_excluding_logits(trained_lenet,
                                                         tmp_path):
  from datasets import convert_folder  # pylint: disable=g-import-not-at-top
  # Any digits checkpoint: its logits have 10 classes. Only read.
  source_dir = trained_lenet
  source_step = _checkpoint_step(source_dir)
  images = str(tmp_path / 'images')
  _make_gray_folder(images, num_classes=3, per_class=8)
  folder_dir = str(tmp_path / 'folder')
  convert_folder.run(images, folder_dir, num_shards=2, num_validation=6)

  tune_dir = str(tmp_path / 'tune')
  folder_flags = ['--dataset_name=folder', '--dataset_dir=%s' % folder_dir,
                  '--model_name=lenet', '--use_grayscale', '--batch_size=4',
                  '--optimizer=sgd',
                  '--max_number_of_steps=5', '--train_dir=%s' % tune_dir,
                  '--checkpoint_path=%s' % source_dir]
  # The logits have 10 classes in the checkpoint, 3 here.
  result = run_script(TRAIN, *folder_flags)
  assert result.returncode == 2
  assert re.search(r'variable LeNet/fc4/weights has shape \[1024, 3\] in '
                   r'the model but \[1024, 10\] in checkpoint', result.stdout)
  assert not os.path.exists(tune_dir)

  result = run_script(TRAIN, *folder_flags,
                      '--checkpoint_exclude_scopes=LeNet/fc4')
  _assert_ok(result)
  assert 'fine-tuning from %s/model.ckpt-%d (6 variables)' % (
      source_dir, source_step) in result.stdout
  source = tf.train.load_checkpoint(tf.train.latest_checkpoint(source_dir))
  start = tf.train.load_checkpoint(os.path.join(tune_dir, 'model.ckpt-0'))
  for name in ('LeNet/conv1/weights', 'LeNet/conv2/biases',
               'LeNet/fc3/weights'):
    np.testing.assert_array_equal(start.get_tensor(name),
                                  source.get_tensor(name))
  assert start.get_tensor('LeNet/fc4/weights').shape == (1024, 3)
  assert _checkpoint_step(tune_dir) == 5

  # Resuming uses train_dir, not --checkpoint_path, from then on.
  result = run_script(TRAIN, *(folder_flags[:-3] + [
      '--max_number_of_steps=8', '--train_dir=%s' % tune_dir,
      '--checkpoint_path=%s' % source_dir,
      '--checkpoint_exclude_scopes=LeNet/fc4']))
  _assert_ok(result)
  assert 'fine-tuning from' not in result.stdout
  assert _checkpoint_step(tune_dir) == 8


@pytest.mark.slow
def test_trainable_scopes_freeze_the_rest(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  _assert_ok(run_script(TRAIN, *_train_flags(
      digits_dir, train_dir, 5, '--trainable_scopes=LeNet/fc4')))
  first = tf.train.load_checkpoint(os.path.join(train_dir, 'model.ckpt-0'))
  last = tf.train.load_checkpoint(os.path.join(train_dir, 'model.ckpt-5'))
  np.testing.assert_array_equal(first.get_tensor('LeNet/conv1/weights'),
                                last.get_tensor('LeNet/conv1/weights'))
  assert np.abs(first.get_tensor('LeNet/fc4/weights') -
                last.get_tensor('LeNet/fc4/weights')).max() > 0


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_last_good_checkpoint(trained_lenet,
                                                       digits_dir, tmp_path):
  # A good checkpoint to diverge from: a copy, since the run writes.
  train_dir = str(tmp_path / 'train')
  shutil.copytree(trained_lenet, train_dir)
  good_step = _checkpoint_step(train_dir)
  good = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert np.all(np.isfinite(good.get_tensor('LeNet/fc3/weights')))
  # Adam, as the checkpoint was trained: another optimizer would drop its
  # slots, and the resume is refused (tests/test_resume_drops_nothing.py).
  result = run_script(TRAIN, *_train_flags(
      digits_dir, train_dir, 500, '--learning_rate=1e12',
      '--save_interval_secs=1'))
  assert result.returncode == 3, result.stdout[-3000:]
  # Which guard stopped it: the NaN-loss hook, or FiniteWeightsGuard when
  # the weights went NaN while the loss was still finite (tests/test_hooks.py
  # checks each one alone).
  assert re.search(r'error: training stopped: (NaN loss during training|'
                   r'weights became NaN or infinite at step \d+)',
                   result.stdout), result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  latest = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  for name in ('LeNet/conv1/weights', 'LeNet/fc4/weights'):
    assert np.all(np.isfinite(latest.get_tensor(name)))
  # Only finite checkpoints were written; the newest may be a later step.
  assert latest.get_tensor('global_step') >= good_step


@pytest.mark.slow
def test_bad_flag_exits_2_with_message_and_no_traceback(tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script(TRAIN, '--dataset_name=nope',
                      '--dataset_dir=%s' % tmp_path,
                      '--train_dir=%s' % train_dir)
  assert result.returncode == 2
  assert ("error: --dataset_name=nope --dataset_split_name=train: unknown "
          "dataset name 'nope'") in (
      result.stdout)
  assert 'Traceback' not in result.stdout
  assert not os.path.exists(train_dir)


@pytest.mark.slow
def test_eval_of_missing_checkpoint_is_a_clear_error(digits_dir, tmp_path):
  result = run_script(EVAL, '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % (tmp_path / 'none'))
  assert result.returncode == 2
  assert 'does not exist' in result.stdout
  assert 'Traceback' not in result.stdout
