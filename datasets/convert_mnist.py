"""Converts the four original MNIST idx .gz files to TFRecords, offline.

Writes mnist_train.tfrecord (60,000 images), mnist_test.tfrecord (10,000)
and labels.txt into dataset_dir; images are stored as 28x28x1 PNGs.
"""

import gzip
import os

import numpy as np

from datasets import converted_outputs
from datasets import dataset_utils
from datasets import mnist
from datasets import source_files
from datasets.image_coder import ImageCoder

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


def _records(coder, images_path, labels_path):
  """Yields serialized tf.Examples of one split, as 28x28x1 PNGs."""
  images = read_images(images_path)
  labels = read_labels(labels_path)
  if len(images) != len(labels):
    raise ValueError('%s has %d images but %s has %d labels'
                     % (images_path, len(images), labels_path, len(labels)))
  for image, label in zip(images, labels):
    yield dataset_utils.image_to_tfexample(
        coder.encode_png(image), b'png', image.shape[0], image.shape[1],
        int(label)).SerializeToString()


def output_paths(dataset_dir):
  return dataset_utils.one_file_per_split_paths(
      dataset_dir, mnist.SPEC.file_pattern, SOURCE_FILES)


def run(dataset_dir, source_dir=None):
  """Converts MNIST unless dataset_dir already holds it, whole.

  Args:
    dataset_dir: output folder; created if missing.
    source_dir: folder holding the four .gz files; defaults to dataset_dir.

  Returns:
    {'train': path, 'test': path, 'labels': path}.

  Raises:
    source_files.MissingSourceError: a .gz file is missing (the message
      names it, its URL and where to put it).
  """
  paths = output_paths(dataset_dir)
  if converted_outputs.reuse_if_whole('mnist', dataset_dir, paths,
                                      mnist.SPEC.splits_to_sizes,
                                      mnist.SPEC.num_classes):
    return paths
  source_dir = source_dir or dataset_dir
  wanted = {name: URL_BASE + name
            for names in SOURCE_FILES.values() for name in names}
  sources = source_files.require_source_files('mnist', source_dir, wanted)
  os.makedirs(dataset_dir, exist_ok=True)
  with ImageCoder() as coder:
    records = [_records(coder, sources[images_name], sources[labels_name])
               for images_name, labels_name in SOURCE_FILES.values()]
    dataset_utils.write_tfrecord_shards(
        records, [paths[split] for split in SOURCE_FILES])
  dataset_utils.write_label_file({i: str(i) for i in range(10)}, dataset_dir)
  return paths
