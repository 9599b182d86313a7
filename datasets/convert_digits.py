"""Converts scikit-learn's embedded UCI digits to TFRecords, offline.

    from datasets import convert_digits
    paths = convert_digits.run('/tmp/digits')  # skips work already done
"""

import numpy as np

from datasets import digits
from datasets import one_file_per_split

# sklearn's digits hold ink counts 0..16 per 4x4 block of the original
# 32x32 bitmaps.
_MAX_SOURCE_VALUE = 16.0
_SPLIT_SEED = 0


def to_pixels(source_images):
  """sklearn digit values 0..16 -> uint8 pixels 0..255 (rounded)."""
  scaled = np.asarray(source_images, np.float64) * (255.0 / _MAX_SOURCE_VALUE)
  return np.round(scaled).astype(np.uint8)


def load_split_source():
  """Returns {'train': (images, labels), 'test': (images, labels)}.

  images are sklearn's float arrays [n, 8, 8] with values 0..16. The split
  is stratified by label with a fixed seed, so it is the same on every
  machine with the pinned scikit-learn.
  """
  # Imported here: only conversion needs scikit-learn, reading does not.
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  from sklearn.model_selection import train_test_split  # pylint: disable=g-import-not-at-top
  source = load_digits()
  train_images, test_images, train_labels, test_labels = train_test_split(
      source.images, source.target, test_size=digits.NUM_TEST,
      stratify=source.target, random_state=_SPLIT_SEED)
  return {'train': (train_images, train_labels),
          'test': (test_images, test_labels)}


def _split_images(unused_sources):
  """{split: (8x8x1 uint8 image, label) pairs} of the fixed split."""
  images_and_labels = {}
  for split, (images, labels) in load_split_source().items():
    if len(images) != digits.SPEC.splits_to_sizes[split]:
      raise AssertionError('digits %s split has %d images, expected %d'
                           % (split, len(images),
                              digits.SPEC.splits_to_sizes[split]))
    images_and_labels[split] = [
        (to_pixels(image)[:, :, np.newaxis], label)
        for image, label in zip(images, labels)]
  return images_and_labels


def output_paths(dataset_dir):
  """The files `run` writes: {'train': ..., 'test': ..., 'labels': ...}."""
  return one_file_per_split.output_paths(digits.SPEC, dataset_dir)


def run(dataset_dir):
  """Writes the digits TFRecords and labels.txt unless already there, whole.

  Args:
    dataset_dir: the folder to write to; created if missing.

  Returns:
    The dict of `output_paths(dataset_dir)`.
  """
  return one_file_per_split.convert(digits.SPEC, dataset_dir, _split_images)
