"""Converts the TensorFlow flower photos to TFRecords, offline.

Accepts flower_photos.tgz or its extracted flower_photos/ folder in
source_dir. Writes 5 shards per split, 350 validation images and the rest
(3,320 of the published 3,670) for training, in the upstream Slim names
flowers_{train,validation}_0000N-of-00005.tfrecord, plus labels.txt.
"""

import os
import shutil
import tarfile
import tempfile

from absl import logging

from datasets import converted_outputs
from datasets import convert_folder
from datasets import dataset_utils
from datasets import flowers
from datasets import source_files

ARCHIVE = 'flower_photos.tgz'
FOLDER = 'flower_photos'
URL = 'http://download.tensorflow.org/example_images/' + ARCHIVE
NUM_SHARDS = 5
NUM_VALIDATION = flowers.SPEC.splits_to_sizes['validation']


def run(dataset_dir, source_dir=None):
  """Converts the flowers unless dataset_dir already holds them, whole.

  Args:
    dataset_dir: output folder; created if missing.
    source_dir: folder holding flower_photos.tgz or flower_photos/;
      defaults to dataset_dir.

  Returns:
    The paths dict of `convert_folder.run`.

  Raises:
    source_files.MissingSourceError: neither the archive nor the folder is
      there (the message names the archive, its URL and where to put it).
  """
  source_dir = source_dir or dataset_dir
  paths = convert_folder.output_paths(dataset_dir, 'flowers', NUM_SHARDS)
  if converted_outputs.reuse_if_whole('flowers', dataset_dir, paths,
                                      num_classes=flowers.SPEC.num_classes):
    return paths
  folder = os.path.join(source_dir, FOLDER)
  if os.path.isdir(folder):
    return _convert(folder, dataset_dir)
  archive = source_files.require_source_files(
      'flowers', source_dir, {ARCHIVE: URL})[ARCHIVE]
  os.makedirs(dataset_dir, exist_ok=True)
  extract_dir = tempfile.mkdtemp(prefix='.flower_photos-', dir=dataset_dir)
  try:
    with tarfile.open(archive, 'r:gz') as tar:
      tar.extractall(extract_dir, filter='data')
    return _convert(os.path.join(extract_dir, FOLDER), dataset_dir)
  finally:
    shutil.rmtree(extract_dir, ignore_errors=True)


def _convert(folder, dataset_dir):
  paths = convert_folder.run(folder, dataset_dir, name='flowers',
                             num_shards=NUM_SHARDS,
                             num_validation=NUM_VALIDATION, seed=0,
                             overwrite=True)
  sizes = dataset_utils.read_split_sizes(dataset_dir)
  if sizes != dict(flowers.SPEC.splits_to_sizes):
    # flowers.py declares the published sizes (as upstream does), so an
    # edited photo folder would make num_samples, and epochs, wrong.
    logging.warning(
        'converted flowers split sizes %s differ from the published %s that '
        'datasets/flowers.py declares; use --dataset_name=folder for a '
        'modified photo folder', sizes, dict(flowers.SPEC.splits_to_sizes))
  return paths
