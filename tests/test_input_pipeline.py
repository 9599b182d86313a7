"""The tf.data input pipeline, the batch queue and corrupt-file naming."""

import importlib.util
import os

import numpy as np
import pytest

from datasets import convert_folder
from datasets import dataset_factory
from datasets import input_pipeline
from datasets import split_check
from datasets import tfrecord_check
from tf2_compat.slim_compat import tf
from preprocessing import cropping
from preprocessing import image_ops
from preprocessing import preprocessing_factory
from preprocessing import two_stage
from tests import fake_datasets

BENCHMARKS_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks')

LENET_EVAL = preprocessing_factory.get_preprocessing('lenet')


def _run(tensors):
  with tf.Session() as session:
    return session.run(tensors)


def _all_batches(batches):
  """Every (images, labels) of a finite pipeline, in order."""
  next_batch = input_pipeline.batch_queue(batches).next_batch()
  values = []
  with tf.Session() as session:
    while True:
      try:
        values.append(session.run(next_batch))
      except tf.errors.OutOfRangeError:
        return values


def _digits(digits_dir, split='test'):
  return dataset_factory.get_dataset('digits', split, digits_dir)


def test_training_batches_have_a_static_shape(graph, digits_dir):
  del graph
  batches = input_pipeline.make_dataset(
      _digits(digits_dir, 'train'),
      preprocessing_factory.get_preprocessing('lenet', is_training=True),
      batch_size=16, image_size=28, is_training=True)
  images, labels = input_pipeline.batch_queue(batches).next_batch()
  assert images.shape.as_list() == [16, 28, 28, 1]
  assert labels.shape.as_list() == [16] and labels.dtype == tf.int64
  image_values, label_values = _run([images, labels])
  assert image_values.min() >= -1.0 and image_values.max() <= 0.9921875
  assert set(label_values) <= set(range(10))


def test_eval_reads_every_record_once_in_file_order(graph, digits_dir):
  del graph
  written = [fake_datasets.feature_value(e, 'image/class/label')
             for e in fake_datasets.read_examples(
                 [os.path.join(digits_dir, 'digits_test.tfrecord')])]
  batches = input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, batch_size=100, image_size=8,
      is_training=False, num_epochs=1)
  values = _all_batches(batches)
  assert [len(labels) for _, labels in values] == [100, 100, 100, 60]
  assert np.concatenate([labels for _, labels in values]).tolist() == written


def test_eval_pixels_are_the_stored_pixels_preprocessed(graph, digits_dir):
  del graph
  example = fake_datasets.read_examples(
      [os.path.join(digits_dir, 'digits_test.tfrecord')])[0]
  stored = fake_datasets.coder().decode_rgb(
      fake_datasets.feature_value(example, 'image/encoded'))[:, :, :1]
  batches = input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, batch_size=1, image_size=8,
      is_training=False, num_epochs=1)
  images, _ = _all_batches(batches)[0]
  np.testing.assert_array_equal(images[0], (stored - 128.0) / 128.0)


def test_labels_offset_is_subtracted(graph, digits_dir):
  del graph
  options = dict(batch_size=360, image_size=8, is_training=False,
                 num_epochs=1)
  plain = input_pipeline.make_dataset(_digits(digits_dir), LENET_EVAL,
                                      **options)
  shifted = input_pipeline.make_dataset(_digits(digits_dir), LENET_EVAL,
                                        labels_offset=1, **options)
  (_, plain_labels), = _all_batches(plain)
  (_, shifted_labels), = _all_batches(shifted)
  np.testing.assert_array_equal(shifted_labels, plain_labels - 1)


def test_one_hot_labels_have_num_classes_minus_offset_columns(graph,
                                                              digits_dir):
  del graph
  options = dict(batch_size=360, image_size=8, is_training=False,
                 num_epochs=1, labels_offset=1)
  (_, ids), = _all_batches(input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, **options).take(1))
  (_, one_hot), = _all_batches(input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, one_hot=True, **options).take(1))
  assert one_hot.shape == (360, 9) and one_hot.dtype == np.float32
  # Offset labels are -1..8; tf.one_hot encodes -1 as all zeros.
  expected = np.array([np.eye(9)[i] if i >= 0 else np.zeros(9) for i in ids])
  np.testing.assert_array_equal(one_hot, expected)
  assert ids.min() == -1 and ids.max() == 8


def test_two_next_batch_calls_give_different_batches(graph, digits_dir):
  del graph
  batches = input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, batch_size=8, image_size=8,
      is_training=False, num_epochs=1)
  queue = input_pipeline.batch_queue(batches, device='/cpu:0')
  first, second = queue.next_batch(), queue.next_batch()
  (images_1, _), (images_2, _) = _run([first, second])
  assert not np.array_equal(images_1, images_2)
  assert queue.dequeue.__func__ is queue.next_batch.__func__


def test_get_next_fn_returns_the_batch_maker(graph, digits_dir):
  del graph
  batches = input_pipeline.make_dataset(
      _digits(digits_dir), LENET_EVAL, batch_size=2, image_size=8,
      is_training=False)
  images, labels = input_pipeline.get_next_fn(batches)()
  assert images.shape.as_list() == [None, 8, 8, 1]
  assert labels.shape.as_list() == [None]


def _write_numbered_shards(directory, num_files, records_per_file):
  """A 'folder' dataset whose labels number the records 0, 1, 2, ..."""
  coder = fake_datasets.coder()
  png = coder.encode_png(np.zeros([4, 4, 3], np.uint8))
  label = 0
  for index in range(num_files):
    examples = []
    for _ in range(records_per_file):
      examples.append(fake_datasets.dataset_utils.image_to_tfexample(
          png, b'png', 4, 4, label))
      label += 1
    fake_datasets.write_records(
        os.path.join(directory, 'folder_train_%05d-of-%05d.tfrecord'
                     % (index, num_files)), examples)
  fake_datasets.write_label_names(directory, label)
  fake_datasets.dataset_utils.write_split_sizes({'train': label}, directory)
  return dataset_factory.get_dataset('folder', 'train', directory)


def _shard_labels(dataset, num_shards, shard_index):
  batches = input_pipeline.make_dataset(
      dataset, LENET_EVAL, batch_size=100, image_size=4, is_training=False,
      num_epochs=1, num_shards=num_shards, shard_index=shard_index)
  return sorted(np.concatenate(
      [labels for _, labels in _all_batches(batches)]).tolist())


def test_sharding_gives_each_replica_whole_files(graph, tmp_path):
  del graph
  dataset = _write_numbered_shards(str(tmp_path), num_files=4,
                                   records_per_file=3)
  shards = [_shard_labels(dataset, 2, index) for index in range(2)]
  assert shards == [[0, 1, 2, 6, 7, 8], [3, 4, 5, 9, 10, 11]]


def test_fewer_files_than_replicas_shards_records(graph, tmp_path):
  del graph
  dataset = _write_numbered_shards(str(tmp_path), num_files=1,
                                   records_per_file=6)
  shards = [_shard_labels(dataset, 3, index) for index in range(3)]
  assert shards == [[0, 3], [1, 4], [2, 5]]


def test_bad_shard_index_is_refused(graph, digits_dir):
  del graph
  with pytest.raises(ValueError, match=r'shard_index must be in \[0, '
                     r'num_shards=2\), got 2'):
    input_pipeline.make_dataset(_digits(digits_dir), LENET_EVAL, 4, 8, True,
                                num_shards=2, shard_index=2)


@pytest.mark.parametrize('is_training', [True, False])
def test_inception_preprocessing_reads_mixed_jpeg_and_png(graph, tmp_path,
                                                          is_training):
  del graph
  fake_datasets.write_image_folder(str(tmp_path / 'src'),
                                   {'a': 'jpeg', 'b': 'png'}, per_class=3,
                                   size=40)
  convert_folder.run(str(tmp_path / 'src'), str(tmp_path / 'out'),
                     num_shards=1, num_validation=1)
  dataset = dataset_factory.get_dataset('folder', 'train',
                                        str(tmp_path / 'out'))
  preprocess = preprocessing_factory.get_preprocessing('inception',
                                                       is_training)
  # Training folds the crop into JPEG decoding; PNGs are cut after decoding.
  assert preprocess.fold_into_decode == is_training
  batches = input_pipeline.make_dataset(dataset, preprocess, batch_size=5,
                                        image_size=24, is_training=is_training,
                                        num_epochs=1)
  (images, labels), = _all_batches(batches)
  assert images.shape == (5, 24, 24, 3)
  assert images.min() >= -1.0 and images.max() <= 1.0
  assert sorted(labels.tolist()) in ([0, 0, 1, 1, 1], [0, 0, 0, 1, 1])


def test_decode_crop_gives_the_same_pixels_as_decode_then_crop(graph,
                                                               tmp_path):
  del graph
  fake_datasets.write_image_folder(str(tmp_path / 'src'), {'a': 'jpeg'},
                                   per_class=2, size=32)
  convert_folder.run(str(tmp_path / 'src'), str(tmp_path / 'out'),
                     num_shards=1, num_validation=1)
  dataset = dataset_factory.get_dataset('folder', 'train',
                                        str(tmp_path / 'out'))
  # A fixed window: rows 3..19, columns 5..21.
  crop_only = cropping.CroppingPreprocessor(
      lambda unused_shape, height, width, unused_bbox: tf.constant(
          [3, 5, height, width]),
      lambda image, unused_height, unused_width: tf.cast(image, tf.float32))
  whole_then_crop = lambda image, height, width: crop_only(image, height,
                                                           width)
  values = []
  for preprocess in (crop_only, whole_then_crop):
    batches = input_pipeline.make_dataset(dataset, preprocess, 1, 16, False,
                                          num_epochs=1)
    values.append(_all_batches(batches)[0][0])
  np.testing.assert_array_equal(values[0], values[1])


def test_raw_format_mnist_records_decode(graph, tmp_path):
  del graph
  pixels = np.arange(784, dtype=np.uint8).reshape(28, 28, 1)
  example = fake_datasets.dataset_utils.image_to_tfexample(
      pixels.tobytes(), b'raw', 28, 28, 7)
  fake_datasets.write_records(str(tmp_path / 'mnist_train.tfrecord'),
                              [example])
  dataset = dataset_factory.get_dataset('mnist', 'train', str(tmp_path))
  batches = input_pipeline.make_dataset(dataset, LENET_EVAL, 1, 28, False,
                                        num_epochs=1)
  (images, labels), = _all_batches(batches)
  np.testing.assert_array_equal(images[0], (pixels - 128.0) / 128.0)
  assert labels.tolist() == [7]


def test_synthetic_batches_need_no_files_and_repeat_per_index(graph):
  del graph
  dataset = dataset_factory.get_dataset('synthetic', 'train', None,
                                        image_size=12, num_classes=5,
                                        num_samples=6)
  preprocess = preprocessing_factory.get_preprocessing('lenet')
  batches = input_pipeline.make_dataset(dataset, preprocess, 3, 10, False,
                                        num_epochs=2)
  values = _all_batches(batches)
  assert [images.shape for images, _ in values] == [(3, 10, 10, 3)] * 4
  labels = np.concatenate([labels for _, labels in values])
  assert labels.min() >= 0 and labels.max() < 5
  # Image i is the same in every epoch: seeded by (seed, i).
  np.testing.assert_array_equal(values[0][0], values[2][0])
  assert not np.array_equal(values[0][0], values[1][0])


def _corrupt_copy(source, target, offset):
  data = bytearray(open(source, 'rb').read())
  data[offset] ^= 0xFF
  open(target, 'wb').write(bytes(data))


def test_validate_names_a_file_with_a_corrupt_first_record(tmp_path,
                                                           digits_dir):
  bad = str(tmp_path / 'digits_test.tfrecord')
  _corrupt_copy(os.path.join(digits_dir, 'digits_test.tfrecord'), bad, 5)
  good = os.path.join(digits_dir, 'digits_train.tfrecord')
  assert tfrecord_check.validate_tfrecord_files([good]) == {good: 1}
  with pytest.raises(tf.errors.DataLossError,
                     match='corrupt TFRecord file %s' % bad):
    tfrecord_check.validate_tfrecord_files([good, bad])


def test_validate_names_a_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match='gone.tfrecord'):
    tfrecord_check.validate_tfrecord_files([str(tmp_path / 'gone.tfrecord')])


def test_make_dataset_refuses_a_corrupt_file_by_name(graph, tmp_path,
                                                     digits_dir):
  del graph
  _corrupt_copy(os.path.join(digits_dir, 'digits_test.tfrecord'),
                str(tmp_path / 'digits_test.tfrecord'), 0)
  dataset = _digits(str(tmp_path))
  with pytest.raises(tf.errors.DataLossError, match='digits_test.tfrecord'):
    input_pipeline.make_dataset(dataset, LENET_EVAL, 8, 8, True)


def test_corruption_deep_in_a_file_is_named_when_training_hits_it(
    graph, tmp_path, digits_dir):
  del graph
  bad = str(tmp_path / 'digits_test.tfrecord')
  source = os.path.join(digits_dir, 'digits_test.tfrecord')
  _corrupt_copy(source, bad, os.path.getsize(source) // 2)
  dataset = _digits(str(tmp_path))
  batches = input_pipeline.make_dataset(dataset, LENET_EVAL, 360, 8, False,
                                        num_epochs=1)  # First record is fine.
  with pytest.raises(tf.errors.DataLossError) as error:
    with tfrecord_check.naming_corrupt_files(dataset.data_sources):
      _all_batches(batches)
  assert 'corrupt TFRecord file(s): %s' % bad in str(error.value)
  assert 'corrupted record' in str(error.value)


def _write_image_records(directory, encoded_images, image_format, shape):
  """A one-file 'folder' dataset of the encoded images, labels 0, 1, ..."""
  examples = [fake_datasets.dataset_utils.image_to_tfexample(
      encoded, image_format, shape[0], shape[1], label)
              for label, encoded in enumerate(encoded_images)]
  fake_datasets.write_records(
      os.path.join(directory, 'folder_train_00000-of-00001.tfrecord'),
      examples)
  fake_datasets.write_label_names(directory, len(examples))
  fake_datasets.dataset_utils.write_split_sizes({'train': len(examples)},
                                                directory)
  return dataset_factory.get_dataset('folder', 'train', directory)


def _write_pngs(directory, images):
  coder = fake_datasets.coder()
  return _write_image_records(directory,
                              [coder.encode_png(image) for image in images],
                              b'png', images[0].shape)


def _scaled(pixels):
  """[-1, 1] as the per-image float code computes it."""
  return pixels.astype(np.float32) * np.float32(2.0 / 255.0) - np.float32(1)


def _top_left_crop(image, height, width):
  return image[:height, :width]


def _scale_batch(images):
  return image_ops.uint8_to_range(images, -1.0, 1.0)


def test_two_stage_images_are_uint8_until_the_batch_stage(graph, tmp_path):
  del graph
  dataset = _write_pngs(str(tmp_path), [
      fake_datasets.pattern_image(10, 12, 3, seed) for seed in range(4)])
  dtypes = {}

  def image_fn(image, height, width):
    dtypes['decoded'] = image.dtype
    crop = _top_left_crop(image, height, width)
    crop.set_shape([height, width, 3])
    dtypes['image stage'] = crop.dtype
    return crop

  def batch_fn(images):
    dtypes['batch stage input'] = images.dtype
    batch_shapes.append(images.shape.as_list())
    return _scale_batch(images)

  batch_shapes = []
  batches = input_pipeline.make_dataset(
      dataset, two_stage.TwoStagePreprocessor(image_fn, batch_fn),
      batch_size=4, image_size=8, is_training=True)
  assert dtypes == {'decoded': tf.uint8, 'image stage': tf.uint8,
                    'batch stage input': tf.uint8}
  assert batch_shapes == [[4, 8, 8, 3]]  # Once, on whole batches.
  assert tf.data.get_output_types(batches)[0] == tf.float32


def test_scaling_after_batching_gives_the_per_image_float_values(graph,
                                                                 tmp_path):
  del graph
  pixels = [fake_datasets.pattern_image(10, 12, 3, seed) for seed in range(5)]
  dataset = _write_pngs(str(tmp_path), pixels)
  per_image = lambda image, height, width: tf.cast(
      _top_left_crop(image, height, width), tf.float32) * (2.0 / 255.0) - 1.0
  batched = two_stage.TwoStagePreprocessor(_top_left_crop, _scale_batch)
  values = []
  for preprocess in (per_image, batched):
    batches = input_pipeline.make_dataset(dataset, preprocess, 2, 8, False,
                                          num_epochs=1)
    values.append(np.concatenate([images for images, _ in
                                  _all_batches(batches)]))
  np.testing.assert_array_equal(values[0], values[1])
  np.testing.assert_array_equal(values[1],
                                _scaled(np.stack(pixels)[:, :8, :8]))


def test_random_flip_is_drawn_per_image_within_a_batch(graph, tmp_path):
  del graph
  pixels = fake_datasets.pattern_image(6, 8, 3, seed=1)  # Not symmetric.
  dataset = _write_pngs(str(tmp_path), [pixels] * 32)
  whole_image = lambda shape, unused_height, unused_width, unused_bbox: (
      tf.stack([0, 0, shape[0], shape[1]]))
  flip = lambda image, unused_height, unused_width: image_ops.random_flip(
      image)
  preprocess = cropping.CroppingPreprocessor(whole_image, flip,
                                             batch_fn=_scale_batch)
  batches = input_pipeline.make_dataset(dataset, preprocess, 32, (6, 8),
                                        False, num_epochs=1)
  (images, _), = _all_batches(batches)
  mirrored = [np.array_equal(image, _scaled(pixels[:, ::-1]))
              for image in images]
  kept = [np.array_equal(image, _scaled(pixels)) for image in images]
  assert all(m != k for m, k in zip(mirrored, kept))  # Exactly one of them.
  # Fails with probability 2 * 2**-32 if the flips are drawn per image.
  assert 0 < sum(mirrored) < 32


def _load_benchmark():
  """benchmarks/input_pipeline.py, which imports modules next to it."""
  spec = importlib.util.spec_from_file_location(
      'input_pipeline_benchmark',
      os.path.join(BENCHMARKS_DIR, 'input_pipeline.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize('row', ['per-image float', 'uint8 until the batch',
                                 'decode_and_crop_jpeg'])
def test_benchmark_rows_deliver_a_flipped_or_kept_crop_scaled_exactly(
    graph, tmp_path, monkeypatch, row):
  del graph
  monkeypatch.syspath_prepend(BENCHMARKS_DIR)
  benchmark = _load_benchmark()
  preprocess = {
      'per-image float': benchmark.per_image_crop_flip_scale,
      'uint8 until the batch': benchmark.crop_flip_then_scale(False),
      'decode_and_crop_jpeg': benchmark.crop_flip_then_scale(True),
  }[row]
  jpeg = fake_datasets.coder().encode_jpeg(
      fake_datasets.pattern_image(12, 10, 3, seed=2))
  dataset = _write_image_records(str(tmp_path), [jpeg] * 32, b'jpeg',
                                 (12, 10))
  batches = input_pipeline.make_dataset(dataset, preprocess, 32, 8, True,
                                        num_epochs=1)
  (images, _), = _all_batches(batches)
  decoded = _run(tf.io.decode_jpeg(jpeg, channels=3))
  # Every 8x8 window of the 12x10 image, kept or mirrored, scaled.
  candidates = {}
  for y in range(5):
    for x in range(3):
      crop = decoded[y:y + 8, x:x + 8]
      candidates[(y, x, False)] = _scaled(crop)
      candidates[(y, x, True)] = _scaled(crop[:, ::-1])
  drawn = [[key for key, value in candidates.items()
            if np.array_equal(image, value)] for image in images]
  assert all(len(keys) == 1 for keys in drawn)
  assert len({keys[0] for keys in drawn}) > 1


def test_counts_read_at_open_spare_reading_the_files_again(digits_dir,
                                                           monkeypatch):
  dataset = _digits(digits_dir)
  counts = split_check.check_split(dataset)

  def read_again(paths, max_records_per_file=1):
    raise AssertionError('read %s again' % paths)

  monkeypatch.setattr(tfrecord_check, 'validate_tfrecord_files', read_again)
  input_pipeline.make_dataset(dataset, LENET_EVAL, 4, 8, False,
                              record_counts=counts)
  # The counts still decide: files without records are refused.
  with pytest.raises(split_check.EmptySplitError, match='split test of '
                     'digits is empty'):
    input_pipeline.make_dataset(dataset, LENET_EVAL, 4, 8, False,
                                record_counts={path: 0 for path in counts})
