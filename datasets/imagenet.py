"""ILSVRC-2012 in the upstream Slim TFRecord layout (train-*, validation-*).

1001 classes: label 0 is the background class, ImageNet's 1000 synsets are
1..1000. This project cannot create these files (ImageNet needs a login to
download); build them with tensorflow/models' research/slim
datasets/download_and_convert_imagenet.sh and point --dataset_dir at the
folder holding train-00000-of-01024 ... and validation-00000-of-00128 ....
Class names are read from labels.txt in that folder when present.
"""

from datasets import dataset_spec
from tf2_compat.slim_compat import slim, tf

_BBOX_PREFIX = 'image/object/bbox/'


def _keys_to_features(spec):
  features = {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature(
          (), tf.string, default_value=spec.default_format),
      'image/class/label': tf.io.FixedLenFeature((), tf.int64),
      'image/class/text': tf.io.FixedLenFeature(
          (), tf.string, default_value=''),
      'image/object/class/label': tf.io.VarLenFeature(tf.int64),
  }
  for coordinate in ('xmin', 'ymin', 'xmax', 'ymax'):
    features[_BBOX_PREFIX + coordinate] = tf.io.VarLenFeature(tf.float32)
  return features


def _items_to_handlers(spec):
  return {
      'image': slim.tfexample_decoder.Image('image/encoded', 'image/format',
                                            channels=spec.image_channels),
      'label': slim.tfexample_decoder.Tensor('image/class/label'),
      'label_text': slim.tfexample_decoder.Tensor('image/class/text'),
      'object/bbox': slim.tfexample_decoder.BoundingBox(
          ['ymin', 'xmin', 'ymax', 'xmax'], _BBOX_PREFIX),
      'object/label': slim.tfexample_decoder.Tensor(
          'image/object/class/label'),
  }


SPEC = dataset_spec.DatasetSpec(
    name='imagenet',
    file_pattern='%s-*',
    splits_to_sizes={'train': 1281167, 'validation': 50000},
    num_classes=1001,
    image_channels=3,
    default_image_size=224,
    image_shape=None,
    default_format='jpeg',
    items_to_descriptions={
        'image': 'A color image of varying height and width.',
        'label': 'The label id of the image, integer between 0 and 1000',
        'label_text': 'The text of the label.',
        'object/bbox': 'A list of bounding boxes.',
        'object/label': 'A list of labels, one per each object.',
    },
    convert_hint=(
        "tensorflow/models' research/slim/datasets/"
        'download_and_convert_imagenet.sh (ImageNet needs a login, so '
        'download_and_convert_data.py cannot fetch it); put '
        'train-00000-of-01024 ... and validation-00000-of-00128 ... in '
        '%(dataset_dir)s'),
    keys_to_features=_keys_to_features,
    items_to_handlers=_items_to_handlers)

get_split = dataset_spec.split_getter(SPEC)
