"""Offline conversions: digits, image folders, mnist/cifar10 originals."""

import collections
import gzip
import io
import os
import pickle
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import download_and_convert_data
from tests import fake_datasets
from datasets import convert_cifar10
from datasets import convert_digits
from datasets import convert_folder
from datasets import convert_mnist
from datasets import dataset_factory
from datasets import dataset_utils
from datasets import source_files

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _decoded_records(paths):
  """[(uint8 pixels as stored, label)] of every record of the files."""
  records = []
  for example in fake_datasets.read_examples(paths):
    get = lambda key, e=example: fake_datasets.feature_value(e, key)
    pixels = fake_datasets.coder().decode_rgb(get('image/encoded'))
    records.append((pixels, get('image/class/label'), get('image/format'),
                    (get('image/height'), get('image/width'))))
  return records


def test_digits_splits_hold_1437_and_360_images(digits_dir):
  counts = [len(fake_datasets.read_examples([
      os.path.join(digits_dir, 'digits_%s.tfrecord' % split)]))
            for split in ('train', 'test')]
  assert counts == [1437, 360]


def test_digits_split_is_stratified_with_all_ten_labels(digits_dir):
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  labels = {
      split: [fake_datasets.feature_value(e, 'image/class/label')
              for e in fake_datasets.read_examples(
                  [os.path.join(digits_dir, 'digits_%s.tfrecord' % split)])]
      for split in ('train', 'test')}
  assert set(labels['train']) == set(labels['test']) == set(range(10))
  source_counts = collections.Counter(load_digits().target)
  test_counts = collections.Counter(labels['test'])
  for label in range(10):
    # Stratified: each class keeps its share (360/1797) in the test split.
    assert abs(test_counts[label] - source_counts[label] * 360 / 1797) < 1
    assert (collections.Counter(labels['train'])[label] + test_counts[label]
            == source_counts[label])


# sklearn's first digit, a 0, as ink counts 0..16 (load_digits().images[0])
# and as the pixels round(v * 255 / 16) that the conversion documents.
FIRST_DIGIT_INK = [[0, 0, 5, 13, 9, 1, 0, 0],
                   [0, 0, 13, 15, 10, 15, 5, 0],
                   [0, 3, 15, 2, 0, 11, 8, 0],
                   [0, 4, 12, 0, 0, 8, 8, 0],
                   [0, 5, 8, 0, 0, 9, 8, 0],
                   [0, 4, 11, 0, 1, 12, 7, 0],
                   [0, 2, 14, 5, 10, 12, 0, 0],
                   [0, 0, 6, 13, 10, 0, 0, 0]]
FIRST_DIGIT_PIXELS = [[0, 0, 80, 207, 143, 16, 0, 0],
                      [0, 0, 207, 239, 159, 239, 80, 0],
                      [0, 48, 239, 32, 0, 175, 128, 0],
                      [0, 64, 191, 0, 0, 128, 128, 0],
                      [0, 80, 128, 0, 0, 143, 128, 0],
                      [0, 64, 175, 0, 16, 191, 112, 0],
                      [0, 32, 223, 80, 159, 191, 0, 0],
                      [0, 0, 96, 207, 159, 0, 0, 0]]


@pytest.fixture(scope='module')
def digits_records(digits_dir):
  """Every converted digit, train then test, decoded once for the module."""
  return _decoded_records(
      [os.path.join(digits_dir, 'digits_%s.tfrecord' % split)
       for split in ('train', 'test')])


def test_to_pixels_maps_ink_0_to_16_onto_0_to_255_rounded():
  pixels = convert_digits.to_pixels([0, 1, 8, 9, 15, 16])
  assert pixels.dtype == np.uint8
  assert pixels.tolist() == [0, 16, 128, 143, 239, 255]


def test_digits_are_grayscale_8x8_pngs(digits_records):
  assert {(image_format, size)
          for _, _, image_format, size in digits_records} == {
              (b'png', (8, 8))}
  for pixels, _, _, _ in digits_records:
    # decode_rgb repeats the one stored channel.
    np.testing.assert_array_equal(pixels[:, :, 1], pixels[:, :, 0])
    np.testing.assert_array_equal(pixels[:, :, 2], pixels[:, :, 0])


def test_digits_splits_together_are_every_sklearn_digit_scaled_to_255(
    digits_records):
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  source = load_digits()
  expected = collections.Counter(
      (np.round(image * 255.0 / 16.0).astype(np.uint8).tobytes(), int(label))
      for image, label in zip(source.images, source.target))
  stored = collections.Counter(
      (pixels[:, :, 0].tobytes(), label)
      for pixels, label, _, _ in digits_records)
  assert sum(stored.values()) == 1797
  assert stored == expected


def test_digits_first_sklearn_digit_is_stored_with_its_known_pixels(
    digits_records):
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  source = load_digits()
  assert source.images[0].tolist() == FIRST_DIGIT_INK
  assert source.target[0] == 0
  matches = [label for pixels, label, _, _ in digits_records
             if pixels[:, :, 0].tolist() == FIRST_DIGIT_PIXELS]
  assert matches == [0]


def test_digits_run_is_idempotent(digits_dir):
  before = {p: os.stat(p).st_mtime_ns
            for p in convert_digits.output_paths(digits_dir).values()}
  paths = convert_digits.run(digits_dir)
  assert set(paths.values()) == set(before)
  assert {p: os.stat(p).st_mtime_ns for p in paths.values()} == before


def test_folder_conversion_writes_shards_labels_and_sizes(tmp_path):
  source = tmp_path / 'photos'
  written = fake_datasets.write_image_folder(
      str(source), {'cats': 'jpeg', 'dogs': 'png', 'emus': 'jpeg'},
      per_class=4)
  out = str(tmp_path / 'records')
  paths = convert_folder.run(str(source), out, num_shards=2,
                             validation_fraction=0.25)
  assert [os.path.basename(p) for p in paths['train']] == [
      'folder_train_00000-of-00002.tfrecord',
      'folder_train_00001-of-00002.tfrecord']
  assert dataset_utils.read_label_file(out) == {0: 'cats', 1: 'dogs',
                                                2: 'emus'}
  assert dataset_utils.read_split_sizes(out) == {'train': 9,
                                                 'validation': 3}
  records = _decoded_records(paths['train'] + paths['validation'])
  assert len(records) == len(written) == 12
  labels = collections.Counter(label for _, label, _, _ in records)
  assert labels == {0: 4, 1: 4, 2: 4}
  formats = collections.Counter(fmt for _, _, fmt, _ in records)
  assert formats == {b'jpeg': 8, b'png': 4}
  # Image i of each class is 8 x (8 + i); the stored size is the image's.
  sizes = collections.Counter(size for _, _, _, size in records)
  assert sizes == {(8, 8): 3, (8, 9): 3, (8, 10): 3, (8, 11): 3}
  assert all(size == pixels.shape[:2] for pixels, _, _, size in records)
  # PNG is lossless: the dogs keep the exact pixels they were written with.
  dogs = [pixels for pixels, label, _, _ in records if label == 1]
  assert sorted(d.shape[1] for d in dogs) == [8, 9, 10, 11]
  for pixels in dogs:
    index = pixels.shape[1] - 8
    np.testing.assert_array_equal(
        pixels, fake_datasets.pattern_image(8, 8 + index, 3, seed=index))


def test_converted_folder_opens_through_the_factory(graph, tmp_path):
  del graph
  fake_datasets.write_image_folder(str(tmp_path / 'src'),
                                   {'a': 'png', 'b': 'png'}, per_class=5)
  convert_folder.run(str(tmp_path / 'src'), str(tmp_path / 'out'),
                     num_shards=3, num_validation=2)
  dataset = dataset_factory.get_dataset('folder', 'validation',
                                        str(tmp_path / 'out'))
  assert dataset.num_samples == 2 and dataset.num_classes == 2
  assert len(dataset.data_sources) == 3
  assert dataset.labels_to_names == {0: 'a', 1: 'b'}


def test_folder_conversion_names_an_undecodable_image(tmp_path):
  fake_datasets.write_image_folder(str(tmp_path / 'src'), {'a': 'png'})
  broken = tmp_path / 'src' / 'a' / 'broken.jpg'
  broken.write_bytes(b'\xff\xd8\xff not really a jpeg')
  with pytest.raises(ValueError, match='cannot decode image .*broken.jpg'):
    convert_folder.run(str(tmp_path / 'src'), str(tmp_path / 'out'),
                       num_shards=1, num_validation=1)
  assert not os.path.exists(tmp_path / 'out' / 'labels.txt')
  assert not [f for f in os.listdir(tmp_path / 'out') if 'tfrecord' in f]


def test_folder_without_class_folders_says_what_is_expected(tmp_path):
  with pytest.raises(FileNotFoundError, match='<class name>/<image files>'):
    convert_folder.run(str(tmp_path), str(tmp_path / 'out'))


def _idx_gz(path, magic, dims, values):
  header = np.array([magic] + list(dims), dtype='>i4').tobytes()
  with gzip.open(path, 'wb') as f:
    f.write(header + np.asarray(values, np.uint8).tobytes())


def test_mnist_conversion_reads_the_idx_originals(tmp_path):
  rng = np.random.RandomState(0)
  source = {'train': (rng.randint(0, 256, (3, 28, 28)), [5, 0, 4]),
            'test': (rng.randint(0, 256, (2, 28, 28)), [7, 2])}
  for split, (images, labels) in source.items():
    images_name, labels_name = convert_mnist.SOURCE_FILES[split]
    _idx_gz(tmp_path / images_name, 2051, images.shape, images)
    _idx_gz(tmp_path / labels_name, 2049, [len(labels)], labels)
  paths = convert_mnist.run(str(tmp_path / 'mnist'), str(tmp_path))
  for split, (images, labels) in source.items():
    records = _decoded_records([paths[split]])
    assert [label for _, label, _, _ in records] == labels
    for (pixels, _, _, _), image in zip(records, images):
      np.testing.assert_array_equal(pixels[:, :, 0], image)


def _cifar_batch(images, labels):
  data = np.asarray(images, np.uint8).transpose(0, 3, 1, 2).reshape(
      len(images), -1)
  return pickle.dumps({b'data': data, b'labels': list(labels)})


def test_cifar10_conversion_reads_the_python_archive(tmp_path):
  rng = np.random.RandomState(1)
  members = {'batches.meta': pickle.dumps(
      {b'label_names': [b'airplane', b'automobile', b'bird', b'cat', b'deer',
                        b'dog', b'frog', b'horse', b'ship', b'truck']})}
  images = {}
  for member in convert_cifar10.SPLITS_TO_BATCHES['train'] + ['test_batch']:
    images[member] = rng.randint(0, 256, (2, 32, 32, 3))
    members[member] = _cifar_batch(images[member], [1, 8])
  with tarfile.open(tmp_path / convert_cifar10.ARCHIVE, 'w:gz') as tar:
    for name, payload in members.items():
      info = tarfile.TarInfo('cifar-10-batches-py/' + name)
      info.size = len(payload)
      tar.addfile(info, io.BytesIO(payload))
  paths = convert_cifar10.run(str(tmp_path / 'cifar'), str(tmp_path))
  train = _decoded_records([paths['train']])
  test = _decoded_records([paths['test']])
  assert (len(train), len(test)) == (10, 2)
  np.testing.assert_array_equal(test[0][0], images['test_batch'][0])
  np.testing.assert_array_equal(train[2][0], images['data_batch_2'][0])
  assert [label for _, label, _, _ in test] == [1, 8]
  assert dataset_utils.read_label_file(paths['labels'].rsplit('/', 1)[0])[
      9] == 'truck'


def test_flowers_conversion_reads_the_tgz_in_the_upstream_names(tmp_path):
  photos = tmp_path / 'build' / 'flower_photos'
  classes = ['daisy', 'dandelion', 'roses', 'sunflowers', 'tulips']
  fake_datasets.write_image_folder(
      str(photos), {name: 'jpeg' for name in classes}, per_class=71, size=4)
  (photos / 'LICENSE.txt').write_text('not an image')
  with tarfile.open(tmp_path / 'flower_photos.tgz', 'w:gz') as tar:
    tar.add(str(photos), arcname='flower_photos')
  out = str(tmp_path / 'flowers')
  paths = download_and_convert_data.convert('flowers', out, str(tmp_path))
  assert [os.path.basename(p) for p in paths['validation']] == [
      'flowers_validation_%05d-of-00005.tfrecord' % i for i in range(5)]
  assert dataset_utils.read_split_sizes(out) == {'train': 5,
                                                 'validation': 350}
  assert dataset_utils.read_label_file(out) == dict(enumerate(classes))
  assert not [f for f in os.listdir(out) if f.startswith('.')]


@pytest.mark.parametrize('name, filename, url', [
    ('mnist', 'train-images-idx3-ubyte.gz',
     'https://storage.googleapis.com/cvdf-datasets/mnist/'
     'train-images-idx3-ubyte.gz'),
    ('cifar10', 'cifar-10-python.tar.gz',
     'https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz'),
    ('flowers', 'flower_photos.tgz',
     'http://download.tensorflow.org/example_images/flower_photos.tgz'),
])
def test_missing_originals_name_the_file_its_url_and_where_to_put_it(
    tmp_path, name, filename, url):
  source = str(tmp_path / 'originals')
  with pytest.raises(source_files.MissingSourceError) as error:
    download_and_convert_data.convert(name, str(tmp_path / 'out'), source)
  message = str(error.value)
  assert filename in message and url in message
  assert 'put them in %s' % source in message
  assert not os.path.exists(tmp_path / 'out')


def test_imagenet_is_refused_with_the_upstream_instructions(tmp_path):
  with pytest.raises(ValueError, match='download_and_convert_imagenet.sh'):
    download_and_convert_data.convert('imagenet', str(tmp_path))


def test_unknown_dataset_name_lists_the_convertible_ones(tmp_path):
  with pytest.raises(ValueError, match="'mnsit'.*cifar10, digits, flowers, "
                     'folder, mnist'):
    download_and_convert_data.convert('mnsit', str(tmp_path))


@pytest.mark.slow
def test_command_line_reports_a_missing_original_without_traceback(tmp_path):
  result = subprocess.run(
      [sys.executable, os.path.join(REPO_ROOT, 'download_and_convert_data.py'),
       '--dataset_name=cifar10', '--dataset_dir=%s' % tmp_path],
      cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), check=False)
  assert result.returncode == 2
  assert 'error: cifar10 originals missing' in result.stderr
  assert 'cifar-10-python.tar.gz' in result.stderr
  assert 'Traceback' not in result.stderr
