"""dataset_factory, dataset_spec and dataset_utils: layouts, decoding, and
errors."""

import os

import numpy as np
import pytest

from tests import fake_datasets
from datasets import dataset_factory
from datasets import dataset_utils
from tf2_compat.slim_compat import slim, tf

# name -> (fake writer, split, num_samples of the split, num_classes)
UPSTREAM_LAYOUTS = {
    'mnist': (fake_datasets.write_mnist, 'train', 60000, 10),
    'cifar10': (fake_datasets.write_cifar10, 'test', 10000, 10),
    'flowers': (fake_datasets.write_flowers, 'validation', 350, 5),
    'imagenet': (fake_datasets.write_imagenet, 'validation', 50000, 1001),
}


def _decode_first_record(dataset, items):
  """Decodes the first record of the first file with the slim decoder."""
  serialized = next(iter(tf.io.tf_record_iterator(dataset.data_sources[0])))
  tensors = dataset.decoder.decode(tf.constant(serialized), items)
  with tf.Session() as session:
    return session.run(tensors)


@pytest.mark.parametrize('name', sorted(UPSTREAM_LAYOUTS))
def test_upstream_layout_opens_with_upstream_attributes(graph, tmp_path, name):
  del graph
  write, split, num_samples, num_classes = UPSTREAM_LAYOUTS[name]
  write(str(tmp_path), split)
  dataset = dataset_factory.get_dataset(name, split, str(tmp_path))
  assert dataset.num_samples == num_samples
  assert dataset.num_classes == num_classes
  assert dataset.name == name and dataset.split_name == split
  assert dataset.reader is tf.TFRecordReader
  assert dataset.labels_to_names is None  # No labels.txt written.
  assert {'image', 'label'} <= set(dataset.items_to_descriptions)
  assert dataset.data_sources == sorted(
      os.path.join(str(tmp_path), f) for f in os.listdir(str(tmp_path)))


@pytest.mark.parametrize('name', sorted(UPSTREAM_LAYOUTS))
def test_slim_decoder_returns_the_written_image_and_label(graph, tmp_path,
                                                          name):
  del graph
  write, split, _, _ = UPSTREAM_LAYOUTS[name]
  written = write(str(tmp_path), split)
  dataset = dataset_factory.get_dataset(name, split, str(tmp_path))
  image, label = _decode_first_record(dataset, ['image', 'label'])
  pixels, expected_label, encoded = written[0][:3]
  assert label == expected_label
  assert image.dtype == np.uint8 and image.shape == pixels.shape
  # Exact for PNG; JPEG is compared with TensorFlow's own decode of the
  # same bytes, and loosely with the source pixels.
  np.testing.assert_array_equal(
      image, fake_datasets.coder().decode_rgb(encoded)[..., :pixels.shape[-1]])
  assert np.abs(image.astype(int) - pixels.astype(int)).mean() < 3


def test_imagenet_decoder_returns_boxes_and_label_text(graph, tmp_path):
  del graph
  written = fake_datasets.write_imagenet(str(tmp_path), 'train')
  dataset = dataset_factory.get_dataset('imagenet', 'train', str(tmp_path))
  boxes, text, object_labels = _decode_first_record(
      dataset, ['object/bbox', 'label_text', 'object/label'])
  np.testing.assert_allclose(boxes, [written[0][3]], rtol=1e-6)
  assert text == b'synset 1'
  assert list(object_labels) == [1]


def test_labels_txt_becomes_labels_to_names(graph, tmp_path):
  del graph
  fake_datasets.write_mnist(str(tmp_path))
  fake_datasets.write_label_names(str(tmp_path), 10)
  dataset = dataset_factory.get_dataset('mnist', 'train', str(tmp_path))
  assert dataset.labels_to_names == {i: 'class_%d' % i for i in range(10)}


def test_custom_file_pattern_replaces_the_default(graph, tmp_path):
  del graph
  fake_datasets.write_mnist(str(tmp_path), 'train')
  os.rename(tmp_path / 'mnist_train.tfrecord', tmp_path / 'my-train.rec')
  dataset = dataset_factory.get_dataset('mnist', 'train', str(tmp_path),
                                        file_pattern='my-%s.rec')
  assert dataset.data_sources == [str(tmp_path / 'my-train.rec')]


@pytest.mark.parametrize('name, channels, size, shape, image, label', [
    ('mnist', 1, 28, (28, 28, 1), 'A [28 x 28 x 1] grayscale image.',
     'A single integer between 0 and 9'),
    ('cifar10', 3, 32, (32, 32, 3), 'A [32 x 32 x 3] color image.',
     'A single integer between 0 and 9'),
    ('flowers', 3, 224, None, 'A color image of varying size.',
     'A single integer between 0 and 4'),
])
def test_a_converted_spec_follows_its_image_shape_and_classes(
    name, channels, size, shape, image, label):
  spec = dataset_factory.datasets_map[name].SPEC
  assert (spec.image_channels, spec.default_image_size, spec.image_shape) == (
      channels, size, shape)
  assert dict(spec.items_to_descriptions) == {'image': image, 'label': label}
  assert spec.convert_hint.startswith(
      'python download_and_convert_data.py --dataset_name=%s '
      '--dataset_dir=%%(dataset_dir)s (' % name)


@pytest.mark.parametrize('name, splits', [
    ('mnist', "'train' or 'test'"), ('cifar10', "'train' or 'test'"),
    ('digits', "'train' or 'test'"), ('flowers', "'train' or 'validation'"),
    ('imagenet', "'train' or 'validation'")])
def test_each_module_get_split_opens_its_own_dataset(tmp_path, name, splits):
  get_split = dataset_factory.datasets_map[name].get_split
  assert get_split.__doc__.startswith('Returns split %s of %s;' % (splits,
                                                                   name))
  with pytest.raises(ValueError, match="split 'dev' is not a split of "
                     "dataset '%s'" % name):
    get_split('dev', str(tmp_path))


def test_digits_split_sizes_and_shape(graph, digits_dir):
  del graph
  train = dataset_factory.get_dataset('digits', 'train', digits_dir)
  test = dataset_factory.get_dataset('digits', 'test', digits_dir)
  assert (train.num_samples, test.num_samples) == (1437, 360)
  assert train.num_classes == 10 and train.image_shape == (8, 8, 1)
  assert train.labels_to_names == {i: str(i) for i in range(10)}


def test_synthetic_needs_no_files_and_is_configurable(graph):
  del graph
  dataset = dataset_factory.get_dataset(
      'synthetic', 'train', None, image_size=(20, 30), channels=1,
      num_classes=7, num_samples=50)
  assert dataset.is_synthetic and dataset.data_sources == []
  assert dataset.image_shape == (20, 30, 1)
  assert (dataset.num_classes, dataset.num_samples) == (7, 50)


def test_unknown_dataset_name_lists_known_names():
  with pytest.raises(ValueError, match=r"'mnst'.*cifar10, digits, flowers, "
                     r'folder, imagenet, mnist, synthetic'):
    dataset_factory.get_dataset('mnst', 'train', '/tmp')


@pytest.mark.parametrize('name, valid', [('mnist', 'test, train'),
                                         ('flowers', 'train, validation'),
                                         ('synthetic',
                                          'train, validation, test')])
def test_unknown_split_names_the_split_and_the_valid_ones(tmp_path, name,
                                                          valid):
  with pytest.raises(ValueError, match=r"'tset'.*valid splits: " + valid):
    dataset_factory.get_dataset(name, 'tset', str(tmp_path))


def test_missing_dataset_dir_says_how_to_create_it(tmp_path):
  missing = str(tmp_path / 'nowhere')
  with pytest.raises(FileNotFoundError) as error:
    dataset_factory.get_dataset('flowers', 'train', missing)
  assert missing in str(error.value)
  assert ('download_and_convert_data.py --dataset_name=flowers '
          '--dataset_dir=%s' % missing) in str(error.value)


def test_no_matching_files_names_the_pattern_and_the_fix(tmp_path):
  fake_datasets.write_mnist(str(tmp_path), 'train')
  with pytest.raises(FileNotFoundError) as error:
    dataset_factory.get_dataset('mnist', 'test', str(tmp_path))
  assert os.path.join(str(tmp_path), 'mnist_test.tfrecord') in str(error.value)
  assert '--dataset_name=mnist' in str(error.value)


def test_imagenet_missing_files_point_to_the_upstream_converter(tmp_path):
  with pytest.raises(FileNotFoundError,
                     match='download_and_convert_imagenet.sh'):
    dataset_factory.get_dataset('imagenet', 'train', str(tmp_path))


def test_folder_dataset_without_metadata_says_how_to_create_it(tmp_path):
  with pytest.raises(FileNotFoundError,
                     match='labels.txt.*--dataset_name=folder.*--source_dir'):
    dataset_factory.get_dataset('folder', 'train', str(tmp_path))


def test_label_file_round_trips_and_has_labels(tmp_path):
  names = {0: 'daisy', 3: 'tulips: red', 1: 'roses'}
  assert not dataset_utils.has_labels(str(tmp_path))
  dataset_utils.write_label_file(names, str(tmp_path))
  assert dataset_utils.has_labels(str(tmp_path))
  assert (tmp_path / 'labels.txt').read_text() == (
      '0:daisy\n1:roses\n3:tulips: red\n')
  assert dataset_utils.read_label_file(str(tmp_path)) == names


def test_malformed_label_file_names_the_line(tmp_path):
  (tmp_path / 'labels.txt').write_text('0:zero\none\n')
  with pytest.raises(ValueError, match=r'labels.txt:2: expected "id:name"'):
    dataset_utils.read_label_file(str(tmp_path))


def test_image_to_tfexample_uses_the_upstream_keys():
  example = dataset_utils.image_to_tfexample(b'\x89PNG...', 'png', 8, 9, 4)
  get = lambda key: fake_datasets.feature_value(example, key)
  assert get('image/encoded') == b'\x89PNG...'
  assert get('image/format') == b'png'
  assert (get('image/height'), get('image/width')) == (8, 9)
  assert get('image/class/label') == 4


def test_interrupted_shard_writing_leaves_no_file(tmp_path):
  paths = [str(tmp_path / 'a.tfrecord'), str(tmp_path / 'b.tfrecord')]

  def records_then_crash():
    yield b'one record'
    raise RuntimeError('disk full')

  with pytest.raises(RuntimeError, match='disk full'):
    dataset_utils.write_tfrecord_shards([[b'x'], records_then_crash()], paths)
  assert os.listdir(str(tmp_path)) == []


def test_slim_dataset_data_provider_reads_a_converted_split(graph,
                                                            digits_dir):
  del graph
  dataset = dataset_factory.get_dataset('digits', 'test', digits_dir)
  provider = slim.dataset_data_provider.DatasetDataProvider(
      dataset, shuffle=False, num_readers=1)
  image, label = provider.get(['image', 'label'])
  with tf.Session() as session:
    coordinator = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(session, coordinator)
    image_value, label_value = session.run([image, label])
    coordinator.request_stop()
    coordinator.join(threads)
  assert image_value.shape == (8, 8, 1) and 0 <= label_value <= 9
