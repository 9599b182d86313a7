"""Converts the original cifar-10-python.tar.gz to TFRecords, offline.

Writes cifar10_train.tfrecord (50,000 images from data_batch_1..5),
cifar10_test.tfrecord (10,000 from test_batch) and labels.txt (class names
from batches.meta) into dataset_dir; images are stored as 32x32x3 PNGs.
The archive is read in place, not extracted.
"""

import pickle
import tarfile

import numpy as np

from datasets import cifar10
from datasets import one_file_per_split

ARCHIVE = 'cifar-10-python.tar.gz'
URL = 'https://www.cs.toronto.edu/~kriz/' + ARCHIVE
_MEMBER_DIR = 'cifar-10-batches-py/'
SPLITS_TO_BATCHES = {
    'train': ['data_batch_%d' % i for i in range(1, 6)],
    'test': ['test_batch'],
}


def _unpickle(archive, member):
  # The archive is a published file the user chose to convert; its batches
  # are Python pickles by the dataset's own format.
  with archive.extractfile(_MEMBER_DIR + member) as f:
    return pickle.load(f, encoding='bytes')


def read_batch(archive, member):
  """Returns (uint8 images [n, 32, 32, 3], labels [n]) of one batch."""
  batch = _unpickle(archive, member)
  images = np.asarray(batch[b'data'], np.uint8).reshape(-1, 3, 32, 32)
  return images.transpose(0, 2, 3, 1), np.asarray(batch[b'labels'])


def _split_images(sources):
  """{split: (image, label) pairs}, each split read from the archive as it
  is written."""

  def images(members):
    with tarfile.open(sources[ARCHIVE], 'r:gz') as archive:
      for member in members:
        yield from zip(*read_batch(archive, member))

  return {split: images(members)
          for split, members in SPLITS_TO_BATCHES.items()}


def _class_names(sources):
  with tarfile.open(sources[ARCHIVE], 'r:gz') as archive:
    names = _unpickle(archive, 'batches.meta')[b'label_names']
  return {i: name.decode('utf-8') for i, name in enumerate(names)}


def output_paths(dataset_dir):
  return one_file_per_split.output_paths(cifar10.SPEC, dataset_dir)


def run(dataset_dir, source_dir=None):
  """Converts CIFAR-10 from cifar-10-python.tar.gz in source_dir (default:
  dataset_dir) unless dataset_dir already holds it, whole; see
  one_file_per_split.convert."""
  return one_file_per_split.convert(
      cifar10.SPEC, dataset_dir, _split_images, source_dir, {ARCHIVE: URL},
      _class_names)
