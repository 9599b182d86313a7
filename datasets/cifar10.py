"""CIFAR-10 in the upstream Slim TFRecord layout: cifar10_{train,test}.tfrecord.

Created by `download_and_convert_data.py --dataset_name=cifar10` from
cifar-10-python.tar.gz (see datasets/convert_cifar10.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.DatasetSpec(
    name='cifar10',
    file_pattern='cifar10_%s.tfrecord',
    splits_to_sizes={'train': 50000, 'test': 10000},
    num_classes=10,
    image_channels=3,
    default_image_size=32,
    image_shape=(32, 32, 3),
    default_format='png',
    items_to_descriptions={
        'image': 'A [32 x 32 x 3] color image.',
        'label': 'A single integer between 0 and 9',
    },
    convert_hint=dataset_spec.conversion_command(
        'cifar10', '%(dataset_dir)s',
        ' (with cifar-10-python.tar.gz in --source_dir)'))


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns the 'train' or 'test' split; see dataset_spec.open_split."""
  return dataset_spec.open_split(SPEC, split_name, dataset_dir, file_pattern,
                                 reader)
