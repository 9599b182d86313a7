"""CIFAR-10 in the upstream Slim TFRecord layout: cifar10_{train,test}.tfrecord.

Created by `download_and_convert_data.py --dataset_name=cifar10` from
cifar-10-python.tar.gz (see datasets/convert_cifar10.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.converted(
    'cifar10', 'cifar10_%s.tfrecord', {'train': 50000, 'test': 10000},
    num_classes=10, image_shape=(32, 32, 3), default_format='png',
    source='with cifar-10-python.tar.gz in --source_dir')

get_split = dataset_spec.split_getter(SPEC)
