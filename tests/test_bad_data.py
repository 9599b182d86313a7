"""Bad data: empty splits, junk converter outputs, labels outside the
classes, unwritable or empty folders, networks without a preprocessing.

Each case stops with one 'error:' line naming the file or value and the fix
(exit status 2) and leaves --train_dir as it was, or recovers and says so
in one log line.
"""

import logging
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from datasets import convert_digits
from datasets import convert_mnist
from datasets import converted_outputs
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import input_pipeline
from datasets import source_files
from datasets import split_check
from nets import nets_factory
from preprocessing import preprocessing_factory
from tests import fake_datasets
from tests.script_runner import REPO
from tests.script_runner import assert_one_usage_error
from tests.script_runner import run_script
from tests.script_runner import script_env
from tf2_compat.slim_compat import tf

# "Within seconds", on 2 cores shared with other test runs.
PROMPT_SECS = 60


def _snapshot(directory):
  """{relative path: bytes} of every file under directory; None if absent."""
  if not os.path.exists(directory):
    return None
  files = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        files[os.path.relpath(path, directory)] = f.read()
  return files


def _run_promptly(script, *args):
  """Runs a script that should stop within PROMPT_SECS; returns its result.

  The kill comes later, so that a slow run fails on its time, not its kill.
  """
  start = time.monotonic()
  result = run_script(script, *args, timeout=2 * PROMPT_SECS)
  assert time.monotonic() - start < PROMPT_SECS, result.stdout[-3000:]
  return result


def _copy_dataset(digits_dir, directory):
  shutil.copytree(digits_dir, str(directory))
  return str(directory)


def _train_flags(dataset_dir, train_dir, *extra, dataset_name='digits'):
  return ['--dataset_name=%s' % dataset_name, '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--preprocessing_name=lenet', '--clone_on_cpu',
          '--batch_size=8', '--max_number_of_steps=2',
          '--save_summaries_secs=600', '--train_dir=%s' % train_dir,
          *extra]


def _digits_as_folder(digits_dir, directory, num_labels):
  """The digits records (labels 0..9) as a `folder` dataset whose
  labels.txt lists only num_labels classes."""
  os.makedirs(directory)
  for split, folder_split in (('train', 'train'), ('test', 'validation')):
    shutil.copy(os.path.join(digits_dir, 'digits_%s.tfrecord' % split),
                os.path.join(directory, 'folder_%s_00000-of-00001.tfrecord'
                             % folder_split))
  fake_datasets.write_label_names(directory, num_labels)
  dataset_utils.write_split_sizes({'train': 1437, 'validation': 360},
                                  directory)
  return directory


# 1. An empty split.


def test_training_on_an_empty_split_exits_2_and_writes_nothing(digits_dir,
                                                               tmp_path):
  # It used to repeat no records forever after checkpoint 0, deaf to
  # SIGTERM.
  data = _copy_dataset(digits_dir, tmp_path / 'data')
  train_file = os.path.join(data, 'digits_train.tfrecord')
  open(train_file, 'w').close()
  train_dir = str(tmp_path / 'train')
  before = _snapshot(train_dir)
  result = _run_promptly('train_image_classifier.py',
                         *_train_flags(data, train_dir))
  assert_one_usage_error(result, re.escape(
      'error: --dataset_dir=%s: split train of digits is empty: %s holds no '
      'record (0 bytes); recreate the files with: python '
      'download_and_convert_data.py --dataset_name=digits --dataset_dir=%s'
      % (data, train_file, data)) + '.*')
  assert _snapshot(train_dir) == before


def test_an_empty_shard_among_others_is_read_around_with_a_warning(
    tmp_path, caplog):
  data = str(tmp_path)
  fake_datasets.write_flowers(data, labels=(0, 4, 2, 1))
  empty = os.path.join(data, 'flowers_train_00002-of-00002.tfrecord')
  open(empty, 'w').close()
  dataset = dataset_factory.get_dataset('flowers', 'train', data)
  with caplog.at_level(logging.WARNING):
    counts = split_check.check_split(dataset)
  assert sorted(counts.values()) == [0, 2, 2]
  assert ('1 of the 3 files of split train of flowers hold no records (%s): '
          'training reads the other 2' % empty) in caplog.messages


def test_a_replica_whose_files_hold_no_record_is_refused(graph, tmp_path):
  del graph
  data = str(tmp_path)
  fake_datasets.write_flowers(data, labels=(0, 4))
  # Shard 1 of 2 holds label 4; emptied, replica 1 would read nothing.
  second = os.path.join(data, 'flowers_train_00001-of-00002.tfrecord')
  open(second, 'w').close()
  dataset = dataset_factory.get_dataset('flowers', 'train', data)
  preprocess = preprocessing_factory.get_preprocessing('lenet')
  options = dict(batch_size=1, image_size=8, is_training=True, num_shards=2)
  input_pipeline.make_dataset(dataset, preprocess, shard_index=0, **options)
  with pytest.raises(split_check.EmptySplitError, match=re.escape(
      'replica 1 of 2 reads no records of split train of flowers: %s holds '
      'no record (0 bytes)' % second)):
    input_pipeline.make_dataset(dataset, preprocess, shard_index=1, **options)


# 2. Converter outputs that exist but are not whole.


def test_converter_replaces_a_junk_output_file_and_says_so(digits_dir,
                                                           tmp_path):
  data = _copy_dataset(digits_dir, tmp_path / 'data')
  train_file = os.path.join(data, 'digits_train.tfrecord')
  with open(train_file, 'wb') as f:
    f.write(b'abcde')
  result = run_script('download_and_convert_data.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % data, timeout=2 * PROMPT_SECS)
  assert result.returncode == 0, result.stdout[-3000:]
  said = [line for line in result.stdout.splitlines()
          if 'converting again' in line]
  assert len(said) == 1, result.stdout
  assert said[0].endswith(
      'digits: the files in %s are not a whole conversion (%s holds 0 '
      'records, expected 1437); converting again' % (data, train_file))
  assert len(fake_datasets.read_examples([train_file])) == 1437


def test_converter_keeps_a_whole_conversion_and_says_so(digits_dir,
                                                        monkeypatch):
  # The line itself, whatever the logging set-up of tests run before.
  said = []
  monkeypatch.setattr(converted_outputs.logging, 'info',
                      lambda message, *args: said.append(message % args))
  before = {path: os.stat(path).st_mtime_ns
            for path in convert_digits.output_paths(digits_dir).values()}
  convert_digits.run(digits_dir)
  assert ('digits: %s already holds every file of the conversion, each '
          'record readable and counted; nothing converted' % digits_dir
          in said)
  assert {path: os.stat(path).st_mtime_ns for path in before} == before


@pytest.mark.parametrize('damage, reason', [
    ('truncate', r'corrupt TFRecord file .*digits_test\.tfrecord: .*'),
    ('cut labels', r'.*labels\.txt lists the class ids 0, 1, 2, expected '
     r'0\.\.9'),
    ('remove', r'.*digits_test\.tfrecord is missing'),
])
def test_converter_converts_again_outputs_that_are_not_whole(
    digits_dir, tmp_path, caplog, damage, reason):
  data = _copy_dataset(digits_dir, tmp_path / 'data')
  test_file = os.path.join(data, 'digits_test.tfrecord')
  labels_file = os.path.join(data, 'labels.txt')
  if damage == 'truncate':
    with open(test_file, 'r+b') as f:
      f.truncate(os.path.getsize(test_file) - 7)
  elif damage == 'cut labels':
    fake_datasets.write_label_names(data, 3)
  else:
    os.remove(test_file)
  with caplog.at_level(logging.WARNING):
    convert_digits.run(data)
  said = [m for m in caplog.messages if 'converting again' in m]
  assert len(said) == 1
  assert re.fullmatch(r'digits: the files in %s are not a whole conversion '
                      r'\(%s\); converting again' % (re.escape(data), reason),
                      said[0]), said[0]
  assert len(fake_datasets.read_examples([test_file])) == 360
  with open(labels_file) as f:
    assert len(f.read().splitlines()) == 10


def test_junk_outputs_without_originals_are_refused_naming_both(tmp_path,
                                                                caplog):
  data = str(tmp_path)
  paths = convert_mnist.output_paths(data)
  for path in paths.values():
    with open(path, 'wb') as f:
      f.write(b'abcde')
  with caplog.at_level(logging.WARNING), pytest.raises(
      source_files.MissingSourceError, match='mnist originals missing'):
    convert_mnist.run(data)
  assert [m for m in caplog.messages if m.startswith(
      'mnist: the files in %s are not a whole conversion' % data)]


# 3. Labels outside the classes, and --labels_offset.


def test_labels_beyond_a_cut_labels_file_stop_training_at_open(digits_dir,
                                                               tmp_path):
  # It used to train, exit 0, with a loss of 1.4e9.
  data = _digits_as_folder(digits_dir, str(tmp_path / 'data'), 3)
  train_dir = str(tmp_path / 'train')
  result = _run_promptly('train_image_classifier.py', *_train_flags(
      data, train_dir, dataset_name='folder'))
  assert_one_usage_error(result, (
      r'error: --dataset_dir=%(data)s: record \d+ of %(data)s/'
      r'folder_train_00000-of-00001\.tfrecord has label [3-9], outside the '
      r'3 classes \(ids 0\.\.2\) that %(data)s/labels\.txt gives dataset '
      r'folder; list every class in %(data)s/labels\.txt, or recreate the '
      r'files with: python download_and_convert_data\.py '
      r'--dataset_name=folder .*') % {'data': re.escape(data)})
  assert _snapshot(train_dir) is None


@pytest.mark.parametrize('offset, pattern', [
    (20, r'error: --labels_offset=20: dataset digits has only 10 classes '
         r'\(from datasets/digits\.py\), so none would be left; use an offset '
         r'below 10 \(1 drops a background class 0\)'),
    (1, r'error: --dataset_dir=.*: record \d+ of .*digits_train\.tfrecord '
        r'has label 0, below --labels_offset=1 .*; drop --labels_offset: the '
        r'records use class 0'),
])
def test_a_labels_offset_that_labels_do_not_fit_exits_2(digits_dir, tmp_path,
                                                        offset, pattern):
  train_dir = str(tmp_path / 'train')
  result = _run_promptly('train_image_classifier.py', *_train_flags(
      digits_dir, train_dir, '--labels_offset=%d' % offset))
  assert_one_usage_error(result, pattern)
  assert _snapshot(train_dir) is None


def _deep_bad_labels(directory, split):
  """A 3-class folder dataset whose records in `split` past those read at
  open have label 9; the other split's labels are all good."""
  good = [index % 3 for index in range(split_check.records_read_per_file(1))]
  bad = good + [9] * 16
  fake_datasets.write_folder_dataset(
      directory, bad if split == 'train' else good, 3,
      validation_labels=bad if split == 'validation' else good)
  return directory


_DEEP_LABEL = (r'error: --dataset_dir=%s: a record of split %s has label 9, '
               r'outside the 3 classes \(ids 0\.\.2\) that .*labels\.txt gives '
               r'dataset folder; .*')


def test_a_bad_label_deep_in_the_files_stops_training_with_exit_2(
    tmp_path):
  data = _deep_bad_labels(str(tmp_path / 'data'), 'train')
  train_dir = str(tmp_path / 'train')
  # A fifth of the records are bad: the first batches hold one.
  result = run_script('train_image_classifier.py', *_train_flags(
      data, train_dir, '--max_number_of_steps=50', dataset_name='folder'))
  assert_one_usage_error(result, _DEEP_LABEL % (re.escape(data), 'train'))
  assert 'model.ckpt-50.index' not in os.listdir(train_dir)


@pytest.mark.slow
def test_eval_checks_labels_at_open_and_in_the_graph(digits_dir, tmp_path):
  # A checkpoint of the 3-class network, trained on good labels.
  deep = _deep_bad_labels(str(tmp_path / 'deep'), 'validation')
  train_dir = str(tmp_path / 'train')
  result = run_script('train_image_classifier.py', *_train_flags(
      deep, train_dir, '--max_number_of_steps=1', dataset_name='folder'))
  assert result.returncode == 0, result.stdout[-3000:]
  cut = _digits_as_folder(digits_dir, str(tmp_path / 'cut'), 3)
  for dataset_dir, pattern in (
      (cut, r'error: --dataset_dir=%s: record \d+ of .*folder_validation_'
            r'00000-of-00001\.tfrecord has label [3-9], outside the 3 '
            r'classes .*' % re.escape(cut)),
      (deep, _DEEP_LABEL % (re.escape(deep), 'validation'))):
    eval_dir = str(tmp_path / 'eval')
    result = _run_promptly(
        'eval_image_classifier.py', '--dataset_name=folder',
        '--dataset_dir=%s' % dataset_dir, '--dataset_split_name=validation',
        '--model_name=lenet', '--preprocessing_name=lenet',
        '--checkpoint_path=%s' % train_dir, '--eval_dir=%s' % eval_dir)
    assert_one_usage_error(result, pattern)
    assert _snapshot(eval_dir) is None


# 4. The converter's usage errors and an unwritable --dataset_dir.


@pytest.mark.parametrize('args, line', [
    (['--dataset_name=mnsit', '--dataset_dir=DIR'],
     "error: unknown --dataset_name='mnsit'; convertible datasets: cifar10, "
     'digits, flowers, folder, mnist'),
    (['--dataset_name=digits'],
     'error: --dataset_dir is required: the folder to write the TFRecord '
     'files to'),
    (['--dataset_dir=DIR'],
     'error: --dataset_name is required (one of cifar10, digits, flowers, '
     'folder, mnist)'),
    (['--dataset_name=folder', '--dataset_dir=DIR'],
     'error: --dataset_name=folder needs --source_dir=FOLDER, a folder of '
     'class sub-folders of images'),
    (['--dataset_name=digits', '--dataset_dir=DIR', '--num_shards=many'],
     "error: flag --num_shards=many: invalid literal for int() with base "
     "10: 'many' (--helpfull lists the flags)"),
])
def test_converter_usage_errors_exit_2_with_one_line(tmp_path, args, line):
  out = str(tmp_path / 'out')
  result = _run_promptly('download_and_convert_data.py',
                         *[a.replace('DIR', out) for a in args])
  assert_one_usage_error(result, re.escape(line))
  assert not os.path.exists(out)


def test_converting_under_a_file_exits_2_naming_it(tmp_path):
  blocker = tmp_path / 'a_file'
  blocker.write_text('not a folder')
  out = str(blocker / 'digits')
  result = _run_promptly('download_and_convert_data.py',
                         '--dataset_name=digits', '--dataset_dir=%s' % out)
  assert_one_usage_error(result, re.escape(
      'error: --dataset_dir=%s cannot be created: %s is a file, not a '
      'folder; give a folder path' % (out, blocker)))


def _without_root_file_rights(argv):
  """argv, run without the capabilities that let root write into a
  read-only folder (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) when this process
  is root. It stays root, so it still reads the repository and the venv
  wherever they are (a clone in a private temporary folder: nobody could
  not)."""
  if os.geteuid() != 0:
    return argv
  setpriv = shutil.which('setpriv')
  assert setpriv, ('as root the test needs setpriv (Debian\'s util-linux) to '
                   'run the converter without root\'s file rights')
  dropped = '-dac_override,-dac_read_search'
  return [setpriv, '--bounding-set=' + dropped, '--inh-caps=' + dropped] + argv


@pytest.mark.slow
def test_converting_into_a_read_only_folder_exits_2_naming_it(tmp_path):
  read_only = str(tmp_path / 'read_only')
  os.mkdir(read_only)
  os.chmod(read_only, 0o555)
  out = os.path.join(read_only, 'digits')
  start = time.monotonic()
  result = subprocess.run(
      _without_root_file_rights([
          sys.executable, os.path.join(REPO, 'download_and_convert_data.py'),
          '--dataset_name=digits', '--dataset_dir=%s' % out]),
      cwd=REPO, env=script_env(), stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True, timeout=2 * PROMPT_SECS,
      check=False)
  assert time.monotonic() - start < PROMPT_SECS
  assert_one_usage_error(result, re.escape(
      'error: --dataset_dir=%s cannot be written: creating a file in %s '
      'failed (Permission denied); give a folder this user can write'
      % (out, read_only)))
  assert os.listdir(read_only) == []


# 5. An empty class folder.


def test_an_empty_class_folder_is_refused_naming_it(tmp_path):
  source = str(tmp_path / 'photos')
  fake_datasets.write_image_folder(source, {'cats': 'png', 'dogs': 'png'},
                                   per_class=2)
  os.mkdir(os.path.join(source, 'emus'))
  out = str(tmp_path / 'out')
  result = _run_promptly('download_and_convert_data.py',
                         '--dataset_name=folder', '--source_dir=%s' % source,
                         '--dataset_dir=%s' % out, '--num_shards=1')
  assert_one_usage_error(result, re.escape(
      'error: every class folder needs images, and %s/emus holds none (.jpg, '
      '.jpeg, .png, .gif, .bmp); add images or delete the empty folder (each '
      'sub-folder of %s is a class)' % (source, source)))
  assert not os.path.exists(out)


# 6. A preprocessing for every network.


# The video networks (i3d, s3dg) take clips, which no image preprocessing
# makes: upstream has none for them either (tests/test_preprocessing.py).
@pytest.mark.parametrize('model_name', sorted(
    name for name, network in nets_factory.networks_map.items()
    if not hasattr(network, 'default_num_frames')))
def test_every_network_has_a_default_preprocessing(graph, model_name):
  # The scripts use --preprocessing_name or, by default, --model_name; the
  # evaluation preprocessing makes an image of the network's input size.
  size = nets_factory.networks_map[model_name].default_image_size
  preprocess = preprocessing_factory.get_preprocessing(model_name)
  image = preprocess(tf.zeros([50, 60, 3], tf.uint8), size, size)
  assert image.shape.as_list() == [size, size, 3]
  assert image.dtype == tf.float32


def test_mobilenet_v1_variants_use_inception_preprocessing():
  for name in ('mobilenet_v1', 'mobilenet_v1_075', 'mobilenet_v1_050',
               'mobilenet_v1_025'):
    assert (preprocessing_factory.preprocessing_fn_map[name].__name__
            == 'preprocessing.inception_preprocessing')
