"""The digits TFRecords as a slim Dataset, the way TF 1.x programs read them.

digits_train.tfrecord (1437 images) and digits_test.tfrecord (360), as
this project's `download_and_convert_data.py --dataset_name=digits` writes
them: 8x8x1 PNGs under the usual slim feature keys.
"""

import os

import tensorflow as tf

slim = tf.contrib.slim

SPLITS_TO_SIZES = {'train': 1437, 'test': 360}
NUM_CLASSES = 10


def get_split(split_name, dataset_dir):
  if split_name not in SPLITS_TO_SIZES:
    raise ValueError('split name %s was not recognized.' % split_name)
  keys_to_features = {
      'image/encoded': tf.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.FixedLenFeature((), tf.string, default_value='png'),
      'image/class/label': tf.FixedLenFeature(
          [1], tf.int64, default_value=tf.zeros([1], dtype=tf.int64)),
  }
  items_to_handlers = {
      'image': slim.tfexample_decoder.Image(shape=[8, 8, 1], channels=1),
      'label': slim.tfexample_decoder.Tensor('image/class/label', shape=[]),
  }
  decoder = slim.tfexample_decoder.TFExampleDecoder(keys_to_features,
                                                    items_to_handlers)
  return slim.dataset.Dataset(
      data_sources=os.path.join(dataset_dir, 'digits_%s.tfrecord' % split_name),
      reader=tf.TFRecordReader,
      decoder=decoder,
      num_samples=SPLITS_TO_SIZES[split_name],
      items_to_descriptions={'image': 'An 8x8 grayscale digit.',
                             'label': 'Its class, 0 to 9.'},
      num_classes=NUM_CLASSES)


def preprocess(image):
  """uint8 [8, 8, 1] to float32 in [-1, 1)."""
  return (tf.to_float(image) - 128.0) / 128.0
