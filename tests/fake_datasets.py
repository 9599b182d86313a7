"""Tiny datasets in the upstream Slim TFRecord layouts, made in the test.

Each `write_*` function writes a few records with known pixels and labels
into a folder and returns what it wrote, so tests can assert decoded values.
"""

import os

import numpy as np

from datasets import dataset_utils
from datasets.image_coder import ImageCoder
from tf2_compat.slim_compat import tf

_CODER = None
_DIGITS_DIR = None


def coder():
  """One ImageCoder for the whole test run (it owns a TF session)."""
  global _CODER
  if _CODER is None:
    _CODER = ImageCoder()
  return _CODER


def pattern_image(height, width, channels, seed):
  """A smooth uint8 gradient (JPEG keeps it close) that differs per seed."""
  y, x = np.mgrid[0:height, 0:width]
  planes = [15 * seed + 25 * c + 80.0 * x / width + 60.0 * y / height
            for c in range(channels)]
  return np.clip(np.stack(planes, axis=-1), 0, 255).astype(np.uint8)


def write_records(path, examples):
  with tf.io.TFRecordWriter(path) as writer:
    for example in examples:
      writer.write(example.SerializeToString())


def _write_classification(dataset_dir, shard_paths, shape, image_format,
                          labels):
  """Writes one record per label, round-robin over the shards."""
  height, width, channels = shape
  written = []
  per_shard = [[] for _ in shard_paths]
  for index, label in enumerate(labels):
    pixels = pattern_image(height, width, channels, seed=index)
    encoded = (coder().encode_png(pixels) if image_format == b'png'
               else coder().encode_jpeg(pixels))
    per_shard[index % len(shard_paths)].append(
        dataset_utils.image_to_tfexample(encoded, image_format, height,
                                         width, label))
    written.append((pixels, label, encoded))
  for path, examples in zip(shard_paths, per_shard):
    write_records(os.path.join(dataset_dir, path), examples)
  return written


def write_mnist(dataset_dir, split='train', labels=(3, 1, 4)):
  return _write_classification(dataset_dir, ['mnist_%s.tfrecord' % split],
                               (28, 28, 1), b'png', labels)


def write_cifar10(dataset_dir, split='train', labels=(9, 2, 6)):
  return _write_classification(dataset_dir, ['cifar10_%s.tfrecord' % split],
                               (32, 32, 3), b'png', labels)


def write_flowers(dataset_dir, split='train', labels=(0, 4, 2, 1)):
  shards = ['flowers_%s_%05d-of-00002.tfrecord' % (split, shard)
            for shard in range(2)]
  return _write_classification(dataset_dir, shards, (24, 32, 3), b'jpeg',
                               labels)


def write_imagenet(dataset_dir, split='train', labels=(1, 1000)):
  """ImageNet records with the bbox and text features of build_imagenet_data."""
  written = []
  examples = []
  for index, label in enumerate(labels):
    pixels = pattern_image(30, 40, 3, seed=index)
    encoded = coder().encode_jpeg(pixels)
    box = [0.1 * (index + 1), 0.2, 0.5 + 0.1 * index, 0.9]  # y/x min/max
    feature = dataset_utils.image_to_tfexample(
        encoded, b'jpeg', 30, 40, label).features.feature
    feature['image/class/text'].bytes_list.value.append(
        b'synset %d' % label)
    for key, value in zip(('ymin', 'xmin', 'ymax', 'xmax'), box):
      feature['image/object/bbox/' + key].float_list.value.append(value)
    feature['image/object/class/label'].int64_list.value.append(label)
    examples.append(tf.train.Example(
        features=tf.train.Features(feature=feature)))
    written.append((pixels, label, encoded, box))
  write_records(os.path.join(dataset_dir, '%s-00000-of-00001' % split),
                examples)
  return written


def write_label_names(dataset_dir, num_classes):
  dataset_utils.write_label_file(
      {i: 'class_%d' % i for i in range(num_classes)}, dataset_dir)


def write_image_folder(source_dir, classes_to_formats, per_class=3, size=8):
  """SOURCE/<class>/<i>.png|jpg of small images; returns {path: class}."""
  paths = {}
  for class_name, image_format in classes_to_formats.items():
    os.makedirs(os.path.join(source_dir, class_name), exist_ok=True)
    for index in range(per_class):
      pixels = pattern_image(size, size + index, 3, seed=index)
      if image_format == 'png':
        encoded, extension = coder().encode_png(pixels), '.png'
      else:
        encoded, extension = coder().encode_jpeg(pixels), '.jpg'
      path = os.path.join(source_dir, class_name, '%d%s' % (index, extension))
      with open(path, 'wb') as f:
        f.write(encoded)
      paths[path] = class_name
  return paths


def read_examples(paths):
  """Parses every record of the files into tf.train.Example protos."""
  examples = []
  for path in paths:
    # Works with or without a default graph (eager is off inside `graph`).
    for record in tf.io.tf_record_iterator(path):
      examples.append(tf.train.Example.FromString(record))
  return examples


def feature_value(example, key):
  feature = example.features.feature[key]
  kind = feature.WhichOneof('kind')
  values = list(getattr(feature, kind).value)
  return values[0] if len(values) == 1 else values


def write_folder_dataset(dataset_dir, train_labels, num_classes,
                         validation_labels=(0,)):
  """A `folder` dataset of 8x8 PNGs, one shard per split, with a labels.txt
  of num_classes lines (whatever the labels) and split_sizes.txt."""
  os.makedirs(dataset_dir, exist_ok=True)
  for split, labels in (('train', train_labels),
                        ('validation', validation_labels)):
    _write_classification(dataset_dir,
                          ['folder_%s_00000-of-00001.tfrecord' % split],
                          (8, 8, 3), b'png', labels)
  write_label_names(dataset_dir, num_classes)
  dataset_utils.write_split_sizes(
      {'train': len(train_labels), 'validation': len(validation_labels)},
      dataset_dir)
