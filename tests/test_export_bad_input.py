"""export_inference_graph.py refuses bad input with one line each, before
anything is written: unknown names, flags out of range, a checkpoint of
another model or class count, outputs that exist or cannot be written, an
empty calibration split; and an artifact is written whole or not at all,
a full disk's refusal reported in one line."""

import errno
import os
import re

import pytest

from exporting import config as config_lib
from exporting import export as export_lib
from exporting import outputs
from nets import nets_factory
from tf2_compat.slim_compat import tf
from training import cli
from training.errors import UsageError
from tests.export_flags import export_flags
from tests.test_min_image_size import BATCH_SIZE_RANGE
from tests.test_min_image_size import IMAGE_SIZE_RANGE
from tests.script_runner import assert_one_usage_error
from tests.script_runner import error_lines
from tests.script_runner import run_script


@pytest.fixture(scope='module')
def untrained(tmp_path_factory):
  """A checkpoint prefix of a LeNet for digits, saved untrained: enough
  for the checks of the flags."""
  prefix = str(tmp_path_factory.mktemp('untrained') / 'model.ckpt')
  with tf.Graph().as_default():
    nets_factory.get_network_fn('lenet', 10)(
        tf.zeros([1, 28, 28, 1], tf.float32))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, prefix)
  return prefix



@pytest.mark.slow
def test_bad_flags_exit_2_with_one_line(tmp_path):
  result = run_script('export_inference_graph.py', '--model_name=lenet5',
                      '--dataset_name=digits',
                      '--output_file=%s' % (tmp_path / 'x.pb'))
  assert_one_usage_error(result, r"error: --model_name: unknown network name "
                         r"'lenet5'; known networks: .*")
  assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize('values, pattern', [
    (dict(image_size=3), r'--image_size=3 is too small for lenet: its layers '
     r'need images of at least 4x4 pixels.*'),
    (dict(output_file=''), r'nothing to export: give --output_file, '
     r'--saved_model_dir or --tflite_file'),
    (dict(tflite_file='OUT/m.tflite'), r'--tflite_file needs '
     r'--checkpoint_path: the weights it runs with'),
    (dict(tflite_file='OUT/m.tflite', checkpoint_path='CKPT',
          tflite_quantization='int8'),
     r'--dataset_name=digits --dataset_split_name=train: dataset_dir None .*'),
    (dict(representative_images=0), r'--representative_images must be >= 1, '
     r'got 0'),
    (dict(model_name='s3dg'),
     r'--model_name=s3dg is a video network: it takes clips \[batch, '
     r'frames, height, width, 3\]; export it with --is_video_model '
     r'--num_frames=N \(it was made for 64\)'),
    (dict(is_video_model=True, num_frames=4),
     r'--is_video_model with --model_name=lenet, an image network: it takes '
     r'images \[batch, height, width, channels\]; drop --is_video_model, or '
     r'export a video network \(i3d, s3dg\)'),
    (dict(model_name='i3d', is_video_model=True),
     r'--is_video_model needs --num_frames: the frames of each clip the '
     r'exported graph takes'),
    (dict(num_frames=4), r'--num_frames=4 is for video networks; add '
     r'--is_video_model, or drop --num_frames'),
    (dict(model_name='i3d', is_video_model=True, num_frames=0),
     r'--num_frames must be >= 1, got 0'),
    (dict(model_name='i3d', is_video_model=True, num_frames=4,
          checkpoint_path='CKPT', saved_model_dir='OUT/serving'),
     r'--saved_model_dir with --is_video_model: the SavedModel decodes '
     r'images and returns classes; export with --output_file instead'),
    (dict(final_endpoint='pool2', checkpoint_path='CKPT',
          saved_model_dir='OUT/serving'),
     r'--saved_model_dir with --final_endpoint=pool2: the SavedModel '
     r'decodes images and returns classes; export with --output_file '
     r'instead'),
    (dict(model_name='i3d', is_video_model=True, num_frames=4,
          quantize=True, output_file='OUT/i3d.pb'),
     r'--quantize with --is_video_model: quantization-aware networks '
     r"quantize 2-D layers, and the video networks' 3-D convolutions are "
     r'not; export the float network \(drop --quantize\)'),
    (dict(model_name='i3d', is_video_model=True, num_frames=4,
          checkpoint_path='CKPT', tflite_file='OUT/i3d.tflite'),
     r"--tflite_file with --is_video_model: TFLite's builtin ops have no "
     r"3-D pooling \(MaxPool3D, AvgPool3D\); export the clips' graph with "
     r'--output_file'),
    (dict(final_endpoint='pool2', image_size=3), r'--image_size=3 is too '
     r'small for lenet: .*'),
    (dict(model_name='i3d', is_video_model=True, final_endpoint='Mixed_3b'),
     r'--is_video_model needs --num_frames: .*'),
    (dict(final_endpoint='pool9'),
     r'--final_endpoint=pool9 is not an end point of lenet; use one of '
     r'conv1, pool1, conv2, pool2, Flatten, fc3, dropout3, Logits, '
     r'Predictions'),
])
def test_bad_export_flags_are_refused(untrained, tmp_path, values,
                                      pattern):
  values = {name: value.replace('OUT', str(tmp_path)).replace('CKPT',
                                                               untrained)
            if isinstance(value, str) else value
            for name, value in values.items()}
  values.setdefault('output_file', str(tmp_path / 'lenet.pb'))
  with pytest.raises(UsageError) as raised:
    config_lib.export_config(export_flags(**values))
  assert len(raised.value.lines) == 1, raised.value.lines
  assert re.fullmatch(pattern, raised.value.lines[0]), raised.value.lines[0]


@pytest.mark.parametrize('flags, line', [
    (['--final_endpoint=Conv2d_1a'], r'--final_endpoint=Conv2d_1a is not '
     r'an end point of lenet; use one of conv1, pool1, .*, Predictions'),
    (['--model_name=i3d'], r'--model_name=i3d is a video network: .*'),
    (['--model_name=i3d', '--is_video_model'],
     r'--is_video_model needs --num_frames: .*'),
])
def test_a_bad_clip_or_end_point_exits_2_writing_nothing(tmp_path, flags,
                                                         line):
  result = run_script('export_inference_graph.py', '--model_name=lenet',
                      '--dataset_name=digits', *flags,
                      '--output_file=%s' % (tmp_path / 'out.pb'))
  assert_one_usage_error(result, 'error: ' + line)
  assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize('flag, line', [
    ('--image_size=3000000000', 'error: --image_size must be %s, got '
     '3000000000' % IMAGE_SIZE_RANGE),
    ('--batch_size=3000000000', 'error: --batch_size must be %s, got '
     '3000000000' % BATCH_SIZE_RANGE),
    # absl refuses a number that is not whole before any check.
    ('--batch_size=3e19', 'error: flag --batch_size=3e19: not a whole number; '
     'give one %s (--helpfull lists the flags)' % BATCH_SIZE_RANGE),
    ('--image_size=3e9', 'error: flag --image_size=3e9: not a whole number; '
     'give one %s (--helpfull lists the flags)' % IMAGE_SIZE_RANGE),
])
def test_a_size_beyond_its_range_exits_2_naming_it(tmp_path, flag, line):
  result = run_script('export_inference_graph.py', '--model_name=lenet',
                      '--dataset_name=digits', flag,
                      '--output_file=%s' % (tmp_path / 'out.pb'))
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert error_lines(result.stdout) == [line]
  assert os.listdir(str(tmp_path)) == []


def test_existing_or_unwritable_outputs_are_refused(tmp_path):
  existing = tmp_path / 'lenet.pb'
  existing.write_bytes(b'kept')
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  (tmp_path / 'serving' / '1').mkdir(parents=True)
  with pytest.raises(UsageError) as raised:
    config_lib.export_config(export_flags(
        output_file=str(existing), checkpoint_path=None,
        saved_model_dir=str(tmp_path / 'serving'),
        tflite_file=str(blocker / 'm.tflite')))
  assert raised.value.lines[:3] == (
      '--output_file=%s exists; remove it or give another path' % existing,
      '--saved_model_dir=%s exists; remove it or give another path'
      % (tmp_path / 'serving' / '1'),
      '--tflite_file=%s cannot be written: %s is not a directory' % (
          blocker / 'm.tflite', blocker))
  assert existing.read_bytes() == b'kept'


# Each artifact was written, then the next one over it: one file left of
# two reported, or a traceback half-way.
@pytest.mark.parametrize('values, line', [
    (dict(output_file='OUT/m', tflite_file='OUT/m'),
     '--output_file=OUT/m and --tflite_file=OUT/m would write over each '
     'other: give each output a path of its own, none inside another'),
    (dict(output_file='OUT/d/1', saved_model_dir='OUT/d'),
     '--output_file=OUT/d/1 and --saved_model_dir=OUT/d would write over '
     'each other: give each output a path of its own, none inside another'),
    (dict(output_file='OUT/d/1/g.pb', saved_model_dir='OUT/d',
          tflite_file='OUT/m.tflite'),
     '--output_file=OUT/d/1/g.pb and --saved_model_dir=OUT/d would write '
     'over each other: give each output a path of its own, none inside '
     'another'),
    (dict(saved_model_dir='OUT/d', tflite_file='OUT/d/./1/m.tflite'),
     '--saved_model_dir=OUT/d and --tflite_file=OUT/d/./1/m.tflite would '
     'write over each other: give each output a path of its own, none '
     'inside another'),
])
def test_outputs_that_would_write_over_each_other_are_refused(
    untrained, tmp_path, values, line):
  values = {name: value.replace('OUT', str(tmp_path))
            for name, value in values.items()}
  values.setdefault('output_file', '')
  with pytest.raises(UsageError) as raised:
    config_lib.export_config(export_flags(checkpoint_path=untrained,
                                          **values))
  assert raised.value.lines == (line.replace('OUT', str(tmp_path)),)
  assert os.listdir(str(tmp_path)) == []


def test_outputs_side_by_side_are_accepted(untrained, tmp_path):
  config = config_lib.export_config(export_flags(
      checkpoint_path=untrained, output_file=str(tmp_path / 'd' / 'g.pb'),
      saved_model_dir=str(tmp_path / 'd'),
      tflite_file=str(tmp_path / 'd' / '2')))
  assert config.saved_model_path == str(tmp_path / 'd' / '1')
  assert config.tflite_file == str(tmp_path / 'd' / '2')


def test_a_new_saved_model_version_beside_the_old_is_accepted(untrained,
                                                             tmp_path):
  (tmp_path / 'serving' / '1').mkdir(parents=True)
  config = config_lib.export_config(export_flags(
      saved_model_dir=str(tmp_path / 'serving'), saved_model_version=2,
      checkpoint_path=untrained, output_file=str(tmp_path / 'g.pb')))
  assert config.saved_model_path == str(tmp_path / 'serving' / '2')


@pytest.mark.parametrize('values, pattern', [
    (dict(model_name='cifarnet', image_size=32),
     r'--checkpoint_path=.*: checkpoint .* does not fit the model built from '
     r'these flags: variable CifarNet/.* is not in it \(and \d+ more '
     r'variable\(s\) differ\). It was trained with --model_name=lenet: '
     r'export with that, or give another --checkpoint_path'),
    (dict(labels_offset=1),
     r'--checkpoint_path=.*: checkpoint .* does not fit the model built from '
     r'these flags: variable LeNet/fc4/weights has shape \[1024, 9\] here '
     r'but \[1024, 10\] in it \(and 1 more variable\(s\) differ\)\. '
     r'Export with the flags it was trained with, or give another '
     r'--checkpoint_path'),
])
def test_checkpoint_of_another_model_is_named(untrained, tmp_path, values,
                                               pattern):
  out = tmp_path / 'out'
  config = config_lib.export_config(export_flags(
      checkpoint_path=untrained, output_file=str(out / 'g.pb'), **values))
  with pytest.raises(UsageError) as raised:
    export_lib.export(config)
  assert re.fullmatch(pattern, raised.value.lines[0]), raised.value.lines[0]
  assert not out.exists()


def test_empty_representative_split_is_refused(untrained, tmp_path):
  empty_dir = tmp_path / 'empty'
  empty_dir.mkdir()
  (empty_dir / 'digits_train.tfrecord').write_bytes(b'')
  with pytest.raises(UsageError) as raised:
    config_lib.export_config(export_flags(
        checkpoint_path=untrained, dataset_dir=str(empty_dir),
        tflite_file=str(tmp_path / 'm.tflite'), tflite_quantization='int8'))
  assert re.fullmatch(r'--dataset_dir=.*: split train of digits is empty.*',
                      raised.value.lines[0]), raised.value.lines
  assert not (tmp_path / 'm.tflite').exists()


def test_written_whole_leaves_nothing_when_writing_fails(tmp_path):
  path = str(tmp_path / 'sub' / 'model.tflite')
  with pytest.raises(RuntimeError):
    with outputs.written_whole('tflite_file', path) as partial:
      with open(partial, 'wb') as f:
        f.write(b'half')
      raise RuntimeError('conversion failed')
  assert os.listdir(str(tmp_path)) == []
  with outputs.written_whole('tflite_file', path) as partial:
    with open(partial, 'wb') as f:
      f.write(b'whole')
  assert os.listdir(str(tmp_path / 'sub')) == ['model.tflite']


_NO_SPACE = os.strerror(errno.ENOSPC)


def _full_disk_graph_def(unused_graph_def, path, unused_as_text):
  """write_graph_def on a disk that fills up half-way: Python's OSError."""
  with open(path, 'wb') as f:
    f.write(b'half a graph')
  raise OSError(errno.ENOSPC, _NO_SPACE, path)


def _full_disk_saved_model(unused_model, unused_checkpoint,
                           unused_moving_average_decay, export_dir):
  """saved_model.write on a full disk: TensorFlow's error for its files."""
  os.makedirs(os.path.join(export_dir, 'variables'))
  with open(os.path.join(export_dir, 'saved_model.pb'), 'wb') as f:
    f.write(b'half a model')
  raise tf.errors.ResourceExhaustedError(
      None, None, '%s/variables/variables.data-00000-of-00001.tempstate1; '
      '%s' % (export_dir, _NO_SPACE))


# The artifact goes into folders the export makes: they go too.
@pytest.mark.parametrize('flag, value, path, writer, fake', [
    ('output_file', 'out/lenet.pb', 'out/lenet.pb',
     'exporting.graph.write_graph_def', _full_disk_graph_def),
    ('saved_model_dir', 'out/serving', 'out/serving/1',
     'exporting.saved_model.write', _full_disk_saved_model),
])
def test_a_full_disk_exits_2_with_one_line_leaving_nothing(
    untrained, tmp_path, monkeypatch, capsys, flag, value, path, writer,
    fake):
  kept = tmp_path / 'kept.pb'
  kept.write_bytes(b'kept')
  monkeypatch.setattr(writer, fake)
  config = config_lib.export_config(export_flags(
      checkpoint_path=untrained, **{flag: str(tmp_path / value)}))
  with pytest.raises(SystemExit) as exited:
    cli.run_main(lambda: export_lib.export(config))
  assert exited.value.code == 2
  assert capsys.readouterr().err.splitlines() == [
      'error: writing --%s=%s failed (No space left on device); nothing was '
      'left of it. Free space or give a path on a writable disk with room, '
      'then export again' % (flag, tmp_path / path)]
  assert os.listdir(str(tmp_path)) == ['kept.pb']
  assert kept.read_bytes() == b'kept'
