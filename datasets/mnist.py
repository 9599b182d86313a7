"""MNIST in the upstream Slim TFRecord layout: mnist_{train,test}.tfrecord.

Created by `download_and_convert_data.py --dataset_name=mnist` from the four
original idx .gz files (see datasets/convert_mnist.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.converted(
    'mnist', 'mnist_%s.tfrecord', {'train': 60000, 'test': 10000},
    num_classes=10, image_shape=(28, 28, 1), default_format='raw',
    source='with the four MNIST idx .gz files in --source_dir')

get_split = dataset_spec.split_getter(SPEC)
