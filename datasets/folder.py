"""A dataset converted from your own folder of class sub-folders of images.

Created by

    python download_and_convert_data.py --dataset_name=folder \
        --source_dir=IMAGES --dataset_dir=DIR [--num_shards=5] \
        [--validation_fraction=0.1]

Splits 'train' and 'validation' in folder_<split>_0000N-of-0000M.tfrecord;
their sizes come from split_sizes.txt and the classes from labels.txt,
both written by the conversion.
"""

import os

from datasets import dataset_spec
from datasets import dataset_utils


def _convert_hint():
  return dataset_spec.conversion_command(
      'folder', '%(dataset_dir)s', ' --source_dir=FOLDER_OF_CLASS_FOLDERS')


def spec_for(dataset_dir):
  """Builds the DatasetSpec from the metadata files in dataset_dir.

  Raises:
    FileNotFoundError: dataset_dir, its labels.txt or split_sizes.txt is
      missing.
  """
  for filename in (dataset_utils.LABELS_FILENAME,
                   dataset_utils.SPLIT_SIZES_FILENAME):
    path = os.path.join(dataset_dir or '', filename)
    if not dataset_dir or not os.path.isfile(path):
      raise FileNotFoundError(
          '%s not found: dataset %r is described by the files its '
          'conversion writes; create them with: %s'
          % (path, 'folder',
             _convert_hint() % {'dataset_dir': dataset_dir or 'DIR'}))
  return dataset_spec.DatasetSpec(
      name='folder',
      file_pattern='folder_%s_*.tfrecord',
      splits_to_sizes=dataset_utils.read_split_sizes(dataset_dir),
      num_classes=len(dataset_utils.read_label_file(dataset_dir)),
      image_channels=3,
      default_image_size=224,
      image_shape=None,
      default_format='jpeg',
      items_to_descriptions=dict(dataset_spec.CLASSIFICATION_ITEMS),
      convert_hint=_convert_hint(),
      num_classes_source=os.path.join(dataset_dir,
                                      dataset_utils.LABELS_FILENAME))


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns 'train' or 'validation'; see dataset_spec.open_split."""
  return dataset_spec.open_split(spec_for(dataset_dir), split_name,
                                 dataset_dir, file_pattern, reader)
