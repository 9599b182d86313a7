"""Bad flags and files: a UsageError naming the value, nothing in train_dir."""

import os
import shutil

from absl.testing import flagsaver
import pytest

import train_image_classifier
from training.errors import UsageError
from training.flags import FLAGS



@pytest.fixture
def corrupt_dir(digits_dir, tmp_path):
  directory = tmp_path / 'corrupt'
  directory.mkdir()
  for name in os.listdir(digits_dir):
    shutil.copy(os.path.join(digits_dir, name), str(directory / name))
  with open(str(directory / 'digits_train.tfrecord'), 'r+b') as f:
    f.write(b'\xff' * 16)  # Breaks the first record's length and its CRC.
  return str(directory)


def _run(train_dir, **flag_values):
  values = dict(dataset_name='digits', model_name='lenet', clone_on_cpu=True,
                train_dir=train_dir, max_number_of_steps=1)
  values.update(flag_values)
  with flagsaver.flagsaver():
    FLAGS(['train_image_classifier.py'])
    for name, value in values.items():
      setattr(FLAGS, name, value)
    train_image_classifier.run()


@pytest.mark.parametrize('flag_values,message', [
    (dict(dataset_name='imagenet22k'),
     "--dataset_name=imagenet22k --dataset_split_name=train: unknown dataset name 'imagenet22k'; known "
     'datasets: cifar10, digits, flowers, folder, imagenet, mnist, synthetic'),
    (dict(model_name='lenet5'), "unknown network name 'lenet5'.*lenet"),
    (dict(optimizer='adamw'),
     '--optimizer=adamw is not known; use one of adadelta, adagrad, adam, '
     'ftrl, momentum, rmsprop, sgd'),
    (dict(learning_rate_decay_type='cosine'),
     '--learning_rate_decay_type=cosine is not known'),
    (dict(preprocessing_name='lenet5'), "--preprocessing_name: .*'lenet5'"),
    (dict(batch_size=0), '--batch_size must be >= 1 .*got 0'),
    (dict(num_clones=0), 'num_clones must be >= 1, got 0'),
    (dict(quantize_delay=0), '--quantize_delay=0: .*tf.contrib.quantize'),
    (dict(dataset_split_name='validation'),
     "split 'validation' is not a split of dataset 'digits'; valid splits: "
     'test, train'),
])
def test_bad_flag_is_named(digits_dir, tmp_path, flag_values, message):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match=message):
    _run(train_dir, dataset_dir=digits_dir, **flag_values)
  assert not os.path.exists(train_dir)


def test_missing_dataset_dir_says_how_to_create_it(tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError,
                     match='download_and_convert_data.py --dataset_name='
                     'digits'):
    _run(train_dir, dataset_dir=str(tmp_path / 'nowhere'))
  assert not os.path.exists(train_dir)


def test_no_dataset_dir_flag(tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match='dataset_dir'):
    _run(train_dir, dataset_dir=None)
  assert not os.path.exists(train_dir)


def test_empty_dataset_dir_names_the_pattern(tmp_path):
  train_dir = str(tmp_path / 'train')
  empty = tmp_path / 'empty'
  empty.mkdir()
  with pytest.raises(UsageError, match='digits_train.tfrecord'):
    _run(train_dir, dataset_dir=str(empty))
  assert not os.path.exists(train_dir)


def test_corrupt_tfrecord_names_the_file(corrupt_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match=os.path.join(
      corrupt_dir, 'digits_train.tfrecord')):
    _run(train_dir, dataset_dir=corrupt_dir)
  assert not os.path.exists(train_dir)


def test_missing_checkpoint_path(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  missing = str(tmp_path / 'model.ckpt-5')
  with pytest.raises(UsageError,
                     match='--checkpoint_path=%s does not exist' % missing):
    _run(train_dir, dataset_dir=digits_dir, checkpoint_path=missing)
  assert not os.path.exists(train_dir)


def test_trainable_scopes_that_match_nothing(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match='--trainable_scopes=Nothing matches '
                     'no trainable variable'):
    _run(train_dir, dataset_dir=digits_dir, trainable_scopes='Nothing')
  assert not os.path.exists(train_dir)


def test_sync_replicas_aggregating_more_than_the_workers(digits_dir,
                                                          tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match='--replicas_to_aggregate=3 is more '
                     'than the 2 worker replicas'):
    _run(train_dir, dataset_dir=digits_dir, sync_replicas=True,
         replicas_to_aggregate=3, worker_replicas=2, num_ps_tasks=1)
  assert not os.path.exists(train_dir)
