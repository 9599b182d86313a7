"""MNIST in the upstream Slim TFRecord layout: mnist_{train,test}.tfrecord.

Created by `download_and_convert_data.py --dataset_name=mnist` from the four
original idx .gz files (see datasets/convert_mnist.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.DatasetSpec(
    name='mnist',
    file_pattern='mnist_%s.tfrecord',
    splits_to_sizes={'train': 60000, 'test': 10000},
    num_classes=10,
    image_channels=1,
    default_image_size=28,
    image_shape=(28, 28, 1),
    default_format='raw',
    items_to_descriptions={
        'image': 'A [28 x 28 x 1] grayscale image.',
        'label': 'A single integer between 0 and 9',
    },
    convert_hint=dataset_spec.conversion_command(
        'mnist', '%(dataset_dir)s',
        ' (with the four MNIST idx .gz files in --source_dir)'))


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns the 'train' or 'test' split; see dataset_spec.open_split."""
  return dataset_spec.open_split(SPEC, split_name, dataset_dir, file_pattern,
                                 reader)
