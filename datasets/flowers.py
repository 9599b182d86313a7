"""The TensorFlow flowers photos in the upstream Slim TFRecord layout.

Five classes, 3,320 training and 350 validation JPEGs of varying size in
flowers_{train,validation}_0000N-of-00005.tfrecord. Created by
`download_and_convert_data.py --dataset_name=flowers` from flower_photos.tgz
or its extracted folder (see datasets/convert_folder.py).
"""

from datasets import dataset_spec

SPEC = dataset_spec.converted(
    'flowers', 'flowers_%s_*.tfrecord', {'train': 3320, 'validation': 350},
    num_classes=5, image_shape=None, default_image_size=224,
    default_format='png',
    source='with flower_photos.tgz or its flower_photos/ folder in '
    '--source_dir')

get_split = dataset_spec.split_getter(SPEC)
