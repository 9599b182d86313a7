"""Bad flags and files: a UsageError naming the value, nothing in train_dir."""

import os
import re
import shutil

from absl.testing import flagsaver
import pytest

from tf2_compat.op_errors import without_op_stacks
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import run_config
from training.errors import UsageError
from training.flags import FLAGS
from tests.script_runner import run_script



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
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py'])
    for name, value in values.items():
      setattr(FLAGS, name, value)
    snapshot = run_config.FlagSnapshot.of(FLAGS)
  train_image_classifier.run(run_config.from_flags(snapshot, environ={}))


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


def test_checkpoint_exclude_scopes_that_match_nothing(digits_dir, tmp_path):
  checkpoint_dir = str(tmp_path / 'pretrained')
  _run(checkpoint_dir, dataset_dir=digits_dir)
  train_dir = str(tmp_path / 'train')
  # A typo of LeNet/fc4 would otherwise restore the logits it meant to skip.
  with pytest.raises(UsageError, match=re.escape(
      '--checkpoint_exclude_scopes=LeNet/fc_4 matches no model variable; '
      'scopes look like LeNet/conv1')):
    _run(train_dir, dataset_dir=digits_dir, checkpoint_path=checkpoint_dir,
         checkpoint_exclude_scopes='LeNet/fc4,LeNet/fc_4')
  assert not os.path.exists(train_dir)


def test_a_truncated_checkpoint_to_fine_tune_from_is_named(digits_dir,
                                                           tmp_path):
  checkpoint_dir = str(tmp_path / 'pretrained')
  _run(checkpoint_dir, dataset_dir=digits_dir)
  prefix = tf.train.latest_checkpoint(checkpoint_dir)
  data_file, = tf.io.gfile.glob(prefix + '.data-*')
  with open(data_file, 'r+b') as f:
    f.truncate(os.path.getsize(data_file) // 2)
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match=re.escape(
      '--checkpoint_path=%s is unreadable: %s is truncated: shorter than its '
      'index says; the newest readable checkpoint beside it is %s' % (
          prefix, os.path.basename(data_file),
          os.path.join(checkpoint_dir, 'model.ckpt-0')))):
    _run(train_dir, dataset_dir=digits_dir, checkpoint_path=prefix)
  assert not os.path.exists(train_dir)


def test_sync_replicas_aggregating_more_than_the_workers(digits_dir,
                                                          tmp_path):
  train_dir = str(tmp_path / 'train')
  with pytest.raises(UsageError, match='--replicas_to_aggregate=3 is more '
                     'than the 2 worker'):
    _run(train_dir, dataset_dir=digits_dir, sync_replicas=True,
         replicas_to_aggregate=3, worker_replicas=2, num_ps_tasks=1)
  assert not os.path.exists(train_dir)


def test_a_train_dir_naming_checkpoints_elsewhere_is_refused(digits_dir,
                                                            tmp_path):
  # The `checkpoint` file of a copy of another train_dir, without the
  # checkpoint it names: training would restore, then delete, the other's.
  train_dir = str(tmp_path / 'copy')
  elsewhere = str(tmp_path / 'original' / 'model.ckpt-4')
  os.makedirs(train_dir)
  tf.train.update_checkpoint_state(train_dir, elsewhere)
  before = sorted(os.listdir(train_dir))
  with pytest.raises(UsageError, match=re.escape(
      '--train_dir=%s: its checkpoint file names %s, in another directory'
      % (train_dir, elsewhere))):
    _run(train_dir, dataset_dir=digits_dir)
  assert sorted(os.listdir(train_dir)) == before == ['checkpoint']


# Every case docs/training.md lists, as a user meets it: a subprocess, exit 2, one
# 'error:' line naming the value, no traceback, nothing written.
README_CASES = {
    'unknown dataset': (['--dataset_name=imagenet22k'],
                        "error: --dataset_name=imagenet22k "
                        "--dataset_split_name=train: unknown dataset name"),
    'unknown model': (['--model_name=lenet5'],
                      "error: --model_name: unknown network name 'lenet5'"),
    'unknown optimizer': (['--optimizer=adamw'],
                          'error: --optimizer=adamw is not known; use one of '
                          'adadelta, adagrad, adam, ftrl, momentum, rmsprop, '
                          'sgd'),
    'unknown decay type': (['--learning_rate_decay_type=cosine'],
                           'error: --learning_rate_decay_type=cosine is not '
                           'known; use one of exponential, fixed, '
                           'polynomial'),
    'unknown preprocessing': (['--preprocessing_name=lenet5'],
                              'error: --preprocessing_name: '),
    'missing dataset_dir': (['--dataset_dir=/nonexistent/digits'],
                            'error: --dataset_name=digits '
                            '--dataset_split_name=train: '),
    'missing split files': (['--dataset_split_name=validation'],
                            "error: --dataset_name=digits "
                            "--dataset_split_name=validation: split "
                            "'validation' is not a split of dataset 'digits'"),
    'batch_size below 1': (['--batch_size=0'],
                           'error: --batch_size must be >= 1 (examples per '
                           'clone), got 0'),
    'num_clones below 1': (['--num_clones=0'],
                           'error: --num_clones must be >= 1, got 0'),
    'accumulation_steps below 1': (['--accumulation_steps=0'],
                                   'error: --accumulation_steps must be >= 1 '
                                   '(1: no accumulation), got 0'),
    'unknown precision': (['--precision=float8'],
                          'error: --precision=float8 is not known; use one of '
                          'float32, mixed_float16, mixed_bfloat16'),
    'negative clip norm': (['--clip_gradient_norm=-1'],
                           'error: --clip_gradient_norm must be > 0 and at '
                           'most 3.402823e+38, float32\'s largest (leave it '
                           'unset for no clipping), got -1.0'),
    # Finite in float64, inf in the float32 graph: every weight went NaN.
    'clip norm beyond float32': (['--clip_gradient_norm=1e39'],
                                 'error: --clip_gradient_norm must be > 0 and '
                                 'at most 3.402823e+38, float32\'s largest '
                                 '(leave it unset for no clipping), got '
                                 '1e+39'),
    'missing checkpoint_path': (['--checkpoint_path=/nonexistent/model.ckpt-1'],
                                'error: --checkpoint_path=/nonexistent/'
                                'model.ckpt-1 does not exist'),
    'infinite learning rate': (['--learning_rate=inf'],
                               'error: --learning_rate must be a finite '
                               'number, got inf'),
    'negative weight decay': (['--weight_decay=-1'],
                              'error: --weight_decay must be >= 0 (0: no '
                              'weight decay), got -1.0'),
    # Two 2x2 poolings, VALID, leave no pixel of a 1x1 image.
    'image too small for the model': (
        ['--train_image_size=1'],
        'error: --train_image_size=1 is too small for lenet: its layers need '
        'images of at least 4x4 pixels; use --train_image_size=4 or more, or '
        "leave it unset for lenet's default, 28"),
    # LeNet's fc3 takes the whole last feature map: 500 x 500 x 64 inputs.
    'image too big for the model': (
        ['--train_image_size=2000'],
        'error: --train_image_size=2000: variable LeNet/fc3/weights of lenet '
        'would take 61.0 GiB (shape [16000000, 1024]); TensorFlow cannot '
        'initialise a variable of 2 GiB or more from a constant, as the '
        "optimizer's slots are; use a smaller image size (lenet "
        'builds at 28 by default)'),
}


def _script_flags(dataset_dir, train_dir, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % dataset_dir,
          '--model_name=lenet', '--clone_on_cpu', '--max_number_of_steps=1',
          '--train_dir=%s' % train_dir] + list(extra)


def _assert_usage_error(status, output, expected_line, train_dir):
  assert status == 2, output[-3000:]
  assert 'Traceback' not in output
  errors = [l for l in output.splitlines() if l.startswith('error: ')]
  assert len(errors) == 1, errors
  assert errors[0].startswith(expected_line), errors[0]
  assert not os.path.exists(train_dir)


@pytest.mark.parametrize('case', sorted(README_CASES))
def test_readme_bad_input_exits_2_naming_the_value(digits_dir, tmp_path,
                                                   capsys, case):
  # The script's main on its command line, in this process (each case in a
  # process of its own would cost seconds of TensorFlow start-up; two of
  # them are also run that way below).
  extra, expected_line = README_CASES[case]
  train_dir = str(tmp_path / 'train')
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    # A later flag wins, so the case's value replaces the default one.
    FLAGS(['train_image_classifier.py'] +
          _script_flags(digits_dir, train_dir) + extra)
    with pytest.raises(SystemExit) as exited:
      train_image_classifier.main(None)
  _assert_usage_error(exited.value.code, capsys.readouterr().err,
                      expected_line, train_dir)


@pytest.mark.slow
@pytest.mark.parametrize('case', ['unknown model', 'missing dataset_dir'])
def test_readme_bad_input_exits_2_in_a_subprocess(digits_dir, tmp_path, case):
  extra, expected_line = README_CASES[case]
  train_dir = str(tmp_path / 'train')
  flags = _script_flags(digits_dir, train_dir)
  result = run_script('train_image_classifier.py', *(flags + extra))
  _assert_usage_error(result.returncode, result.stdout, expected_line,
                      train_dir)


# A flag absl cannot parse: one line and exit 2, as for a bad value (absl
# alone prints 'FATAL Flags parsing error' and exits 1).
PARSE_ERRORS = {
    'unknown flag': ('--nosuch_flag=1',
                     "error: Unknown command line flag 'nosuch_flag'"),
    'not an integer': ('--batch_size=abc',
                       'error: flag --batch_size=abc: not a whole number; '
                       'give one from 1 to 2147483647 (examples per clone; '
                       "TensorFlow's int32 shapes hold no larger batch)"),
    'missing flagfile': ('--flagfile=/nonexistent/train.flags',
                         'error: Unable to open flagfile: [Errno 2] No such '
                         "file or directory: '/nonexistent/train.flags'"),
}


@pytest.mark.parametrize('script', ['train_image_classifier.py',
                                    'eval_image_classifier.py'])
@pytest.mark.parametrize('case', sorted(PARSE_ERRORS))
def test_a_flag_that_does_not_parse_exits_2_with_one_line(tmp_path, script,
                                                          case):
  flag, expected_line = PARSE_ERRORS[case]
  train_dir = str(tmp_path / 'train')
  result = run_script(script, '--train_dir=%s' % train_dir
                      if script.startswith('train') else '--eval_dir=%s'
                      % train_dir, flag, timeout=60)
  _assert_usage_error(result.returncode, result.stdout,
                      expected_line + ' (--helpfull lists the flags)',
                      train_dir)


@pytest.mark.slow
def test_corrupt_tfrecord_exits_2_naming_the_file(corrupt_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script('train_image_classifier.py',
                      *_script_flags(corrupt_dir, train_dir))
  _assert_usage_error(
      result.returncode, result.stdout,
      'error: --dataset_dir=%s: corrupt TFRecord file %s' % (
          corrupt_dir, os.path.join(corrupt_dir, 'digits_train.tfrecord')),
      train_dir)


@pytest.mark.slow
def test_several_bad_flags_are_all_reported(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script('train_image_classifier.py', *_script_flags(
      digits_dir, train_dir, '--batch_size=0', '--optimizer=adamw',
      '--num_clones=0'))
  assert result.returncode == 2
  assert [l for l in result.stdout.splitlines() if l.startswith('error: ')] == [
      'error: --batch_size must be >= 1 (examples per clone), got 0',
      'error: --num_clones must be >= 1, got 0',
      'error: --optimizer=adamw is not known; use one of adadelta, adagrad, '
      'adam, ftrl, momentum, rmsprop, sgd',
  ]
  assert not os.path.exists(train_dir)


@pytest.mark.slow
def test_eval_on_a_record_corrupt_mid_file_exits_2_naming_it(
    digits_dir, trained_lenet, tmp_path):
  train_dir = trained_lenet
  data = tmp_path / 'data'
  shutil.copytree(digits_dir, str(data))
  test_file = str(data / 'digits_test.tfrecord')
  size = os.path.getsize(test_file)
  with open(test_file, 'r+b') as f:
    f.seek(size // 2)
    f.write(b'\x00' * 64)  # Breaks a record's CRC half-way through the file.
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % data, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % (tmp_path / 'eval'))
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  errors = [l for l in result.stdout.splitlines() if l.startswith('error: ')]
  assert errors[0].startswith('error: corrupt TFRecord file(s): %s: '
                              % test_file)
  assert re.search(r'corrupted record at \d+', errors[0])
  # TensorFlow's stack of the reading op stays out of the message.
  assert 'Detected at node' not in result.stdout
  assert 'Graph execution error' not in result.stdout


def test_an_op_error_in_a_message_is_cut_to_its_reason(graph):
  value = tf.placeholder(tf.float32, [])
  checked = tf.debugging.assert_positive(value, message='value must be > 0')
  with tf.Session() as session:
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
      session.run(checked, {value: -1.0})
  message = 'reading %s failed: %s' % ('FILE', raised.value.message)
  assert 'Graph execution error' in message and '[[{{node' in message
  short = without_op_stacks(message)
  assert short.startswith('reading FILE failed: assertion failed: '
                          '[value must be > 0')
  assert '\n' not in short and 'Graph execution error' not in short
