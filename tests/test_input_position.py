"""A resumed run consumes exactly the batches an uninterrupted one would."""

import contextlib
import logging
import os
import shutil
import signal

from absl.testing import flagsaver
import pytest

import train_image_classifier
from tf2_compat.slim_compat import tf
from training import input_position
from training import preemption
from training import run_config
from training.flags import FLAGS

STEPS = 8


def _config(digits_dir, train_dir, steps, *extra):
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
           '--clone_on_cpu', '--batch_size=16', '--optimizer=sgd',
           '--shuffle_seed=3', '--save_interval_secs=600',
           '--max_number_of_steps=%d' % steps, '--train_dir=%s' % train_dir]
          + list(extra))
    return run_config.from_flags(run_config.FlagSnapshot.of(FLAGS), {})


class LabelRecorder(tf.train.SessionRunHook):
  """Records the labels of every batch a step consumes; may send SIGTERM."""

  def __init__(self, sigterm_after=None):
    self.labels = []
    self._sigterm_after = sigterm_after

  def begin(self):
    get_next = [op for op in tf.get_default_graph().get_operations()
                if op.type == 'IteratorGetNext']
    assert len(get_next) == 1
    self._labels = get_next[0].outputs[1]

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._labels)

  def after_run(self, run_context, run_values):
    self.labels.append(tuple(run_values.results))
    if len(self.labels) == self._sigterm_after:
      os.kill(os.getpid(), signal.SIGTERM)


def _train(digits_dir, train_dir, steps, *extra, sigterm_after=None):
  recorder = LabelRecorder(sigterm_after)
  with preemption.SignalStop() as stop:
    train_image_classifier.train(
        _config(digits_dir, train_dir, steps, *extra), '', stop,
        extra_hooks=[recorder])
  return recorder.labels


def _checkpoint_step(train_dir):
  return int(tf.train.latest_checkpoint(train_dir).rsplit('-', 1)[1])


@pytest.fixture(scope='module')
def uninterrupted(digits_dir, tmp_path_factory):
  return _train(digits_dir, str(tmp_path_factory.mktemp('whole')), STEPS)


@pytest.mark.slow
def test_sigterm_then_resume_continues_the_batch_sequence(
    digits_dir, tmp_path, uninterrupted):
  train_dir = str(tmp_path)
  before = _train(digits_dir, train_dir, STEPS, sigterm_after=3)
  stopped_at = _checkpoint_step(train_dir)
  assert stopped_at == 3 == len(before)
  after = _train(digits_dir, train_dir, STEPS)
  assert len(after) == STEPS - stopped_at
  assert before + after == uninterrupted


def test_resume_from_a_checkpoint_continues_the_batch_sequence(
    digits_dir, tmp_path, uninterrupted):
  # What a SIGKILL after the checkpoint of step 5 leaves behind.
  train_dir = str(tmp_path)
  before = _train(digits_dir, train_dir, 5)
  after = _train(digits_dir, train_dir, STEPS)
  assert before + after == uninterrupted
  # Without the saved position the resumed run would repeat the epoch's
  # start: the test has power only if those batches differ.
  assert after != uninterrupted[:STEPS - 5]


@pytest.mark.slow
def test_random_augmentation_saves_and_resumes_the_example_order(
    digits_dir, tmp_path):
  # Inception preprocessing crops and flips at random: its random ops keep
  # state tf.data cannot save, which once failed the first checkpoint.
  augmenting = ('--preprocessing_name=inception_v1', '--train_image_size=28')
  whole = _train(digits_dir, str(tmp_path / 'whole'), STEPS, *augmenting)
  train_dir = str(tmp_path / 'resumed')
  before = _train(digits_dir, train_dir, 5, *augmenting)
  assert _checkpoint_step(train_dir) == 5
  after = _train(digits_dir, train_dir, STEPS, *augmenting)
  assert before + after == whole
  assert after != whole[:STEPS - 5]


@pytest.mark.slow
def test_another_batch_size_restarts_the_data_order_and_says_so(
    digits_dir, tmp_path, capsys):
  train_dir = str(tmp_path)
  _train(digits_dir, train_dir, 2)
  with _logged_warnings() as warnings:
    labels = _train(digits_dir, train_dir, 4, '--batch_size=8')
  assert len(labels) == 2 and len(labels[0]) == 8
  assert any(w.startswith('input position not restored: %s/model.ckpt-2 was '
                          'saved reading dataset=digits/train batch_size=16'
                          % train_dir) for w in warnings), warnings
  assert _checkpoint_step(train_dir) == 4
  del capsys


@pytest.mark.slow
def test_other_files_are_read_from_their_beginning_and_it_is_said(
    digits_dir, tmp_path, uninterrupted):
  train_dir = str(tmp_path / 'train')
  _train(digits_dir, train_dir, 2)
  # The same records in another folder: the old position would go on with
  # batch 3 of the epoch.
  copy = str(tmp_path / 'copy')
  shutil.copytree(digits_dir, copy)
  with _logged_warnings() as warnings:
    labels = _train(copy, train_dir, 4)
  assert labels == uninterrupted[:2]
  size = os.path.getsize(os.path.join(copy, 'digits_train.tfrecord'))
  assert ('input position not restored: %s/model.ckpt-2 was saved reading 1 '
          'file, %d bytes, in %s; this run reads 1 file, %d bytes, in %s. The '
          'model and optimizer are restored; the new files are read from '
          'their beginning.' % (train_dir, size, os.path.realpath(digits_dir),
                                size, os.path.realpath(copy))) in warnings
  assert _checkpoint_step(train_dir) == 4


@pytest.mark.slow
def test_a_checkpoint_saved_before_files_were_named_resumes_its_position(
    digits_dir, tmp_path, uninterrupted, monkeypatch):
  train_dir = str(tmp_path)
  saver = input_position.PositionedBatches.saver
  with monkeypatch.context() as older_version:
    # What the version before saved: no record of the files.
    older_version.setattr(
        input_position.PositionedBatches, 'saver',
        lambda self, saved_instead=None, **kwargs: tf.train.Saver(
            [v for v in saver(self, **kwargs)._var_list  # pylint: disable=protected-access
             if v is not self.files_variable], **kwargs))
    before = _train(digits_dir, train_dir, 5)
  assert not tf.train.load_checkpoint(tf.train.latest_checkpoint(
      train_dir)).has_tensor(input_position.FILES_NAME)
  after = _train(digits_dir, train_dir, STEPS)
  assert before + after == uninterrupted


@contextlib.contextmanager
def _logged_warnings():
  """The messages TensorFlow's logger gets in the body."""
  warnings = []
  logger = tf.get_logger()
  handler = _ListHandler(warnings)
  # Earlier tests may leave the logger above WARNING.
  level = logger.level
  logger.setLevel(logging.INFO)
  logger.addHandler(handler)
  try:
    yield warnings
  finally:
    logger.removeHandler(handler)
    logger.setLevel(level)


class _ListHandler:
  """A logging handler that keeps the messages."""

  level = 0

  def __init__(self, messages):
    self._messages = messages

  def handle(self, record):
    self._messages.append(record.getMessage())
