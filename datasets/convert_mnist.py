"""Converts the four original MNIST idx .gz files to TFRecords, offline.

Writes mnist_train.tfrecord (60,000 images), mnist_test.tfrecord (10,000)
and labels.txt into dataset_dir; images are stored as 28x28x1 PNGs.
"""

import gzip

import numpy as np

from datasets import mnist
from datasets import one_file_per_split

URL_BASE = 'https://storage.googleapis.com/cvdf-datasets/mnist/'
SOURCE_FILES = {
    'train': ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
    'test': ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'),
}
_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049


def _read_idx(path, magic, header_ints):
  with gzip.open(path, 'rb') as f:
    content = f.read()
  header = np.frombuffer(content, dtype='>i4', count=header_ints)
  if header[0] != magic:
    raise ValueError('%s is not an MNIST idx file: magic number %d, expected '
                     '%d' % (path, header[0], magic))
  return header, np.frombuffer(content, dtype=np.uint8,
                               offset=4 * header_ints)


def read_images(path):
  """idx3 .gz -> uint8 array [n, rows, cols, 1]."""
  header, pixels = _read_idx(path, _IMAGES_MAGIC, 4)
  count, rows, cols = (int(v) for v in header[1:])
  return pixels.reshape(count, rows, cols, 1)


def read_labels(path):
  """idx1 .gz -> uint8 array [n]."""
  header, labels = _read_idx(path, _LABELS_MAGIC, 2)
  return labels[:int(header[1])]


def _images_and_labels(images_path, labels_path):
  """Yields the (image, label) pairs of one split."""
  images = read_images(images_path)
  labels = read_labels(labels_path)
  if len(images) != len(labels):
    raise ValueError('%s has %d images but %s has %d labels'
                     % (images_path, len(images), labels_path, len(labels)))
  yield from zip(images, labels)


def _split_images(sources):
  return {split: _images_and_labels(sources[images_name],
                                    sources[labels_name])
          for split, (images_name, labels_name) in SOURCE_FILES.items()}


def output_paths(dataset_dir):
  return one_file_per_split.output_paths(mnist.SPEC, dataset_dir)


def run(dataset_dir, source_dir=None):
  """Converts MNIST from the four .gz files in source_dir (default:
  dataset_dir) unless dataset_dir already holds it, whole; see
  one_file_per_split.convert."""
  originals = {name: URL_BASE + name
               for names in SOURCE_FILES.values() for name in names}
  return one_file_per_split.convert(mnist.SPEC, dataset_dir, _split_images,
                                    source_dir, originals)
