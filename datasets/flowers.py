"""The TensorFlow flowers photos in the upstream Slim TFRecord layout.

Five classes, 3,320 training and 350 validation JPEGs of varying size in
flowers_{train,validation}_0000N-of-00005.tfrecord. Created by
`download_and_convert_data.py --dataset_name=flowers` from flower_photos.tgz
or its extracted folder (see datasets/convert_folder.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.DatasetSpec(
    name='flowers',
    file_pattern='flowers_%s_*.tfrecord',
    splits_to_sizes={'train': 3320, 'validation': 350},
    num_classes=5,
    image_channels=3,
    default_image_size=224,
    image_shape=None,
    default_format='png',
    items_to_descriptions={
        'image': 'A color image of varying size.',
        'label': 'A single integer between 0 and 4',
    },
    convert_hint=dataset_spec.conversion_command(
        'flowers', '%(dataset_dir)s',
        ' (with flower_photos.tgz or its flower_photos/ folder in '
        '--source_dir)'))


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns 'train' or 'validation'; see dataset_spec.open_split."""
  return dataset_spec.open_split(SPEC, split_name, dataset_dir, file_pattern,
                                 reader)
