"""Bad images in the records: bytes that do not decode, an image of another
size than the dataset's, one too large to decode.

Each stops the scripts with one 'error:' line naming the file and the
record (counted from 1) and exit status 2; an image read when the dataset
is opened stops them before anything is written to --train_dir.
"""

import io
import os
import re
import shutil
import struct
import zlib

import numpy as np
from PIL import Image
import pytest

from datasets import dataset_factory
from datasets import image_check
from datasets import input_pipeline
from datasets import split_check
from preprocessing import preprocessing_factory
from tests import fake_datasets
from tests.script_runner import assert_one_usage_error
from tests.script_runner import run_script
from tf2_compat.slim_compat import tf


def _png_header(height, width):
  """The first chunks of an RGB PNG of height x width: what its decoder
  reads before it allocates the pixels."""

  def chunk(kind, data):
    return (struct.pack('>I', len(data)) + kind + data +
            struct.pack('>I', zlib.crc32(kind + data)))

  return (b'\x89PNG\r\n\x1a\n' +
          chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
          + chunk(b'IEND', b''))


def _pillow_image(image_format, height, width, **options):
  pixels = fake_datasets.pattern_image(height, width, 3, seed=1)
  encoded = io.BytesIO()
  Image.fromarray(pixels).save(encoded, image_format, **options)
  return encoded.getvalue()


BAD_IMAGES = {
    'not an image': b'GIF? no: text',
    'cut short': fake_datasets.coder().encode_jpeg(
        fake_datasets.pattern_image(8, 8, 1, seed=0))[:30],
    'of another size': fake_datasets.coder().encode_png(
        fake_datasets.pattern_image(10, 12, 1, seed=0)),
    '20000x20000': _png_header(20000, 20000),
}


def _problem(case, data):
  """What the error line says of record N of a digits copy in `data`."""
  fix = ('recreate the files with: python download_and_convert_data.py '
         '--dataset_name=digits --dataset_dir=%s (offline: the digits ship '
         'with scikit-learn)' % data)
  return {
      'not an image': "holds bytes beginning b'GIF? no:', not a JPEG, PNG, "
                      'GIF, BMP or WebP image; ' + fix,
      'cut short': 'holds an image that does not decode (Invalid JPEG data, '
                   'size 30); ' + fix,
      'of another size': 'holds a 10x12 image, but every image of dataset '
                         'digits is 8x8 (datasets/digits.py); ' + fix,
      '20000x20000': 'holds a 20000x20000 image: 400,000,000 pixels, more '
                     'than --max_image_pixels=67108864 (decoded to 1 '
                     'channel(s) it would take 0.4 GiB); leave the image out '
                     'of the files, or raise --max_image_pixels',
  }[case]


def _with_image(path, index, encoded):
  """Rewrites the TFRecord file with record `index` (from 0) holding
  `encoded` as its image."""
  records = list(tf.io.tf_record_iterator(path))
  example = tf.train.Example.FromString(records[index])
  example.features.feature['image/encoded'].bytes_list.value[0] = encoded
  records[index] = example.SerializeToString()
  with tf.io.TFRecordWriter(path) as writer:
    for record in records:
      writer.write(record)


def _digits_with_image(digits_dir, directory, split, index, encoded):
  shutil.copytree(digits_dir, str(directory))
  path = os.path.join(str(directory), 'digits_%s.tfrecord' % split)
  _with_image(path, index, encoded)
  return str(directory), path


@pytest.mark.parametrize('image_format, options', [
    ('JPEG', {}), ('PNG', {}), ('GIF', {}), ('BMP', {}),
    ('WEBP', {'lossless': False}), ('WEBP', {'lossless': True}),
    ('WEBP', {'exif': b'Exif\x00\x00'}),  # The extended header, VP8X.
])
def test_header_size_reads_height_and_width_of_each_format(
    graph, image_format, options):
  del graph
  encoded = _pillow_image(image_format, 37, 53, **options)
  with tf.Session() as session:
    assert list(session.run(image_check.header_size(encoded))) == [37, 53]
    # What decoding gives, too.
    decoded = tf.io.decode_image(encoded, expand_animations=False)
    assert session.run(tf.shape(decoded)).tolist() == [37, 53, 3]


@pytest.mark.parametrize('encoded', [
    b'', b'abc', b'\x89PNG\r\n\x1a\n' + b'\x00' * 20, BAD_IMAGES['not an image']])
def test_header_size_of_bytes_of_no_format_is_unknown(graph, encoded):
  del graph
  with tf.Session() as session:
    assert list(session.run(image_check.header_size(encoded))) == [-1, -1]


@pytest.mark.parametrize('case', sorted(BAD_IMAGES))
def test_a_bad_image_read_at_open_is_named_with_its_record(digits_dir,
                                                          tmp_path, case):
  data, path = _digits_with_image(digits_dir, tmp_path / 'data', 'train', 3,
                                  BAD_IMAGES[case])
  dataset = dataset_factory.get_dataset('digits', 'train', data)
  with pytest.raises(image_check.BadImageError) as refused:
    split_check.check_split(dataset, 0, image_check.DEFAULT_MAX_IMAGE_PIXELS)
  assert str(refused.value) == 'record 4 of %s %s' % (path,
                                                      _problem(case, data))


def test_max_image_pixels_refuses_a_larger_image_before_decoding(digits_dir):
  dataset = dataset_factory.get_dataset('digits', 'train', digits_dir)
  split_check.check_split(dataset, 0, max_image_pixels=64)
  with pytest.raises(image_check.BadImageError, match=re.escape(
      'record 1 of %s holds a 8x8 image: 64 pixels, more than '
      '--max_image_pixels=63 (' % dataset.data_sources[0])):
    split_check.check_split(dataset, 0, max_image_pixels=63)


@pytest.mark.parametrize('case', sorted(BAD_IMAGES))
def test_a_bad_image_deep_in_a_file_is_named_after_the_pipeline_fails(
    digits_dir, tmp_path, case):
  # Record 701: past the 64 read at open.
  data, path = _digits_with_image(digits_dir, tmp_path / 'data', 'train', 700,
                                  BAD_IMAGES[case])
  dataset = dataset_factory.get_dataset('digits', 'train', data)
  split_check.check_split(dataset, 0, image_check.DEFAULT_MAX_IMAGE_PIXELS)
  with tf.Graph().as_default():
    batches = input_pipeline.make_dataset(
        dataset, preprocessing_factory.get_preprocessing('lenet'),
        batch_size=100, image_size=8, is_training=False, num_epochs=1)
    images = tf.data.make_one_shot_iterator(batches).get_next()[0]
    with tf.Session() as session, pytest.raises(
        image_check.BadImageError) as refused, \
        image_check.naming_bad_images(dataset,
                                      image_check.DEFAULT_MAX_IMAGE_PIXELS):
      while True:
        session.run(images)
  assert str(refused.value) == 'record 701 of %s %s' % (path,
                                                        _problem(case, data))


def test_an_input_failure_without_a_bad_image_is_not_reworded(digits_dir):
  dataset = dataset_factory.get_dataset('digits', 'train', digits_dir)
  with tf.Graph().as_default():
    failing = tf.data.Dataset.from_tensors(np.float32(-1)).map(
        lambda value: tf.debugging.check_numerics(tf.math.log(value), 'log'))
    value = tf.data.make_one_shot_iterator(failing).get_next()
    with tf.Session() as session, pytest.raises(
        tf.errors.InvalidArgumentError):
      with image_check.naming_bad_images(dataset, 1 << 26):
        session.run(value)


def _train_flags(data, train_dir, steps, dataset_name='digits'):
  return ['--dataset_name=%s' % dataset_name, '--dataset_dir=%s' % data,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
          '--save_summaries_secs=600', '--max_number_of_steps=%d' % steps,
          '--train_dir=%s' % train_dir]


@pytest.mark.slow
def test_training_on_a_bad_image_read_at_open_exits_2_writing_nothing(
    digits_dir, tmp_path):
  data, path = _digits_with_image(digits_dir, tmp_path / 'data', 'train', 3,
                                  BAD_IMAGES['20000x20000'])
  train_dir = str(tmp_path / 'train')
  result = run_script('train_image_classifier.py',
                      *_train_flags(data, train_dir, 2))
  assert_one_usage_error(result, re.escape('error: --dataset_dir=%s: record 4 '
                                           'of %s %s' % (
                                               data, path, _problem(
                                                   '20000x20000', data))))
  assert not os.path.exists(train_dir)


@pytest.mark.slow
def test_training_on_a_bad_image_deep_in_the_files_exits_2_naming_it(
    tmp_path):
  # 64 good records (those read at open), then 16 that are not images.
  data = str(tmp_path / 'data')
  fake_datasets.write_folder_dataset(data, [i % 3 for i in range(80)], 3)
  path = os.path.join(data, 'folder_train_00000-of-00001.tfrecord')
  for index in range(64, 80):
    _with_image(path, index, BAD_IMAGES['not an image'])
  train_dir = str(tmp_path / 'train')
  result = run_script('train_image_classifier.py', *_train_flags(
      data, train_dir, 50, dataset_name='folder'))
  assert_one_usage_error(result, re.escape(
      "error: --dataset_dir=%s: record 65 of %s holds bytes beginning b'GIF? "
      "no:', not a JPEG, PNG, GIF, BMP or WebP image; recreate the files "
      'with: python download_and_convert_data.py --dataset_name=folder '
      % (data, path)) + '.*')
  # What the chief had written is whole: the checkpoint of step 0.
  assert tf.train.latest_checkpoint(train_dir) == os.path.join(
      train_dir, 'model.ckpt-0')
  assert 'LeNet/conv1/weights' in tf.train.load_checkpoint(
      train_dir).get_variable_to_shape_map()
  assert not [name for name in os.listdir(train_dir)
              if name.startswith('model.ckpt-') and '-0.' not in name]


@pytest.mark.slow
def test_eval_on_a_bad_image_deep_in_the_files_exits_2_naming_it(
    digits_dir, trained_lenet, tmp_path):
  train_dir = trained_lenet
  # Record 101 of 360: past the 64 read at open.
  data, path = _digits_with_image(digits_dir, tmp_path / 'data', 'test', 100,
                                  BAD_IMAGES['of another size'])
  eval_dir = str(tmp_path / 'eval')
  result = run_script(
      'eval_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % data, '--model_name=lenet',
      '--checkpoint_path=%s' % train_dir, '--eval_dir=%s' % eval_dir)
  assert_one_usage_error(result, re.escape(
      'error: --dataset_dir=%s: record 101 of %s %s' % (
          data, path, _problem('of another size', data))))
  assert not os.path.exists(eval_dir)
