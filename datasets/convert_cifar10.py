"""Converts the original cifar-10-python.tar.gz to TFRecords, offline.

Writes cifar10_train.tfrecord (50,000 images from data_batch_1..5),
cifar10_test.tfrecord (10,000 from test_batch) and labels.txt (class names
from batches.meta) into dataset_dir; images are stored as 32x32x3 PNGs.
The archive is read in place, not extracted.
"""

import os
import pickle
import tarfile

import numpy as np

from datasets import cifar10
from datasets import converted_outputs
from datasets import dataset_utils
from datasets import source_files
from datasets.image_coder import ImageCoder

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


def _records(archive, coder, members):
  """Yields serialized tf.Examples of the batches, as 32x32x3 PNGs."""
  for member in members:
    images, labels = read_batch(archive, member)
    for image, label in zip(images, labels):
      yield dataset_utils.image_to_tfexample(
          coder.encode_png(image), b'png', 32, 32,
          int(label)).SerializeToString()


def output_paths(dataset_dir):
  return dataset_utils.one_file_per_split_paths(
      dataset_dir, cifar10.SPEC.file_pattern, SPLITS_TO_BATCHES)


def run(dataset_dir, source_dir=None):
  """Converts CIFAR-10 unless dataset_dir already holds it, whole.

  Args:
    dataset_dir: output folder; created if missing.
    source_dir: folder holding cifar-10-python.tar.gz; defaults to
      dataset_dir.

  Returns:
    {'train': path, 'test': path, 'labels': path}.

  Raises:
    source_files.MissingSourceError: the archive is missing (the message
      names it, its URL and where to put it).
  """
  paths = output_paths(dataset_dir)
  if converted_outputs.reuse_if_whole('cifar10', dataset_dir, paths,
                                      cifar10.SPEC.splits_to_sizes,
                                      cifar10.SPEC.num_classes):
    return paths
  source_dir = source_dir or dataset_dir
  archive_path = source_files.require_source_files(
      'cifar10', source_dir, {ARCHIVE: URL})[ARCHIVE]
  os.makedirs(dataset_dir, exist_ok=True)
  with tarfile.open(archive_path, 'r:gz') as archive, ImageCoder() as coder:
    records = [_records(archive, coder, members)
               for members in SPLITS_TO_BATCHES.values()]
    dataset_utils.write_tfrecord_shards(
        records, [paths[split] for split in SPLITS_TO_BATCHES])
    names = _unpickle(archive, 'batches.meta')[b'label_names']
  dataset_utils.write_label_file(
      {i: name.decode('utf-8') for i, name in enumerate(names)}, dataset_dir)
  return paths
