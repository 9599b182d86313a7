"""Converts a folder of class sub-folders of images into TFRecord shards.

    source_dir/
      daisy/    100080576_f52e8ee070_n.jpg ...
      roses/    ...

becomes, in dataset_dir,

    <name>_train_00000-of-00005.tfrecord ...
    <name>_validation_00000-of-00005.tfrecord ...
    labels.txt          class id:sub-folder name, ids in sorted folder order
    split_sizes.txt     train:N, validation:M

JPEG and PNG files are stored as they are; other formats TensorFlow can
decode (GIF, BMP) are re-encoded as PNG. Files that are not images by their
extension are skipped; an image that does not decode stops the conversion
with an error naming it.
"""

import os
import random

from datasets import converted_outputs
from datasets import dataset_utils
from datasets.image_coder import ImageCoder
from datasets.image_coder import image_format

IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.gif', '.bmp')
SPLITS = ('train', 'validation')


def list_images(source_dir):
  """Returns (sorted class names, [(path, class id)] sorted by path).

  Raises:
    FileNotFoundError: source_dir is not a folder or has no class folder
      with an image in it.
    ValueError: a class folder holds no image: it would be a class that
      no example teaches.
  """
  if not os.path.isdir(source_dir):
    raise FileNotFoundError('image folder %s does not exist' % source_dir)
  class_names = sorted(
      entry for entry in os.listdir(source_dir)
      if os.path.isdir(os.path.join(source_dir, entry))
      and not entry.startswith('.'))
  images = []
  empty_class_dirs = []
  for class_id, class_name in enumerate(class_names):
    class_dir = os.path.join(source_dir, class_name)
    class_images = [os.path.join(class_dir, filename)
                    for filename in sorted(os.listdir(class_dir))
                    if filename.lower().endswith(IMAGE_EXTENSIONS)]
    if not class_images:
      empty_class_dirs.append(class_dir)
    images.extend((path, class_id) for path in class_images)
  if not images:
    raise FileNotFoundError(
        'no images (%s) in class sub-folders of %s; expected '
        'source_dir/<class name>/<image files>'
        % (', '.join(IMAGE_EXTENSIONS), source_dir))
  if empty_class_dirs:
    several = len(empty_class_dirs) > 1
    raise ValueError(
        'every class folder needs images, and %s hold%s none (%s); add '
        'images or delete the empty folder%s (each sub-folder of %s is a '
        'class)' % (', '.join(empty_class_dirs), '' if several else 's',
                    ', '.join(IMAGE_EXTENSIONS), 's' if several else '',
                    source_dir))
  return class_names, images


def shard_paths(dataset_dir, name, split, num_shards):
  """<name>_<split>_0000i-of-0000n.tfrecord, the upstream shard names."""
  return [os.path.join(dataset_dir, '%s_%s_%05d-of-%05d.tfrecord'
                       % (name, split, shard, num_shards))
          for shard in range(num_shards)]


def split_images(images, num_validation, seed):
  """Shuffles with a fixed seed; the first num_validation are validation."""
  shuffled = list(images)
  random.Random(seed).shuffle(shuffled)
  return {'validation': shuffled[:num_validation],
          'train': shuffled[num_validation:]}


def _records(coder, images):
  """Yields the serialized tf.Example of each (path, class id), lazily."""
  for path, class_id in images:
    with open(path, 'rb') as f:
      image_data = f.read()
    try:
      pixels = coder.decode_rgb(image_data)
    except Exception as e:  # pylint: disable=broad-except
      raise ValueError('cannot decode image %s: %s' % (path, e)) from e
    stored_format = image_format(image_data)
    if stored_format is None:
      image_data, stored_format = coder.encode_png(pixels), b'png'
    height, width = pixels.shape[:2]
    yield dataset_utils.image_to_tfexample(
        image_data, stored_format, height, width,
        class_id).SerializeToString()


def _shards(items, num_shards):
  """Splits items into num_shards contiguous runs of near-equal length."""
  bounds = [len(items) * shard // num_shards for shard in range(num_shards + 1)]
  return [items[bounds[i]:bounds[i + 1]] for i in range(num_shards)]


def output_paths(dataset_dir, name, num_shards):
  """Every file `run` writes, by role."""
  paths = {split: shard_paths(dataset_dir, name, split, num_shards)
           for split in SPLITS}
  paths['labels'] = os.path.join(dataset_dir, dataset_utils.LABELS_FILENAME)
  paths['split_sizes'] = os.path.join(dataset_dir,
                                      dataset_utils.SPLIT_SIZES_FILENAME)
  return paths


def run(source_dir, dataset_dir, name='folder', num_shards=5,
        validation_fraction=0.1, num_validation=None, seed=0,
        overwrite=False):
  """Converts source_dir/<class>/<images> into TFRecord shards.

  Args:
    source_dir: folder of class sub-folders.
    dataset_dir: output folder; created if missing.
    name: file name prefix; `folder` is read back by
      `dataset_factory.get_dataset('folder', ...)`.
    num_shards: shards per split.
    validation_fraction: share of the images held out for 'validation'
      (rounded), used when num_validation is None.
    num_validation: exact number of validation images.
    seed: seed of the shuffle that assigns images to splits and shards.
    overwrite: convert even if dataset_dir already holds a whole
      conversion.

  Returns:
    {'train': [shard paths], 'validation': [shard paths],
     'labels': path, 'split_sizes': path}.

  Raises:
    FileNotFoundError: no images in source_dir.
    ValueError: bad num_shards/validation arguments, or an undecodable
      image (named in the message).
  """
  if num_shards < 1:
    raise ValueError('num_shards must be >= 1, got %d' % num_shards)
  paths = output_paths(dataset_dir, name, num_shards)
  if not overwrite and converted_outputs.reuse_if_whole(name, dataset_dir,
                                                       paths):
    return paths
  class_names, images = list_images(source_dir)
  if num_validation is None:
    if not 0.0 <= validation_fraction < 1.0:
      raise ValueError('validation_fraction must be in [0, 1), got %r'
                       % validation_fraction)
    num_validation = int(round(validation_fraction * len(images)))
  if not 0 <= num_validation < len(images):
    raise ValueError('num_validation must be in [0, %d) for the %d images '
                     'of %s, got %d' % (len(images), len(images), source_dir,
                                        num_validation))
  os.makedirs(dataset_dir, exist_ok=True)
  splits = split_images(images, num_validation, seed)
  output_shards, shard_records = [], []
  with ImageCoder() as coder:
    for split in SPLITS:
      for shard_images, path in zip(_shards(splits[split], num_shards),
                                    paths[split]):
        output_shards.append(path)
        shard_records.append(_records(coder, shard_images))
    # Records are made while they are written (memory holds one image),
    # and all shards of both splits appear together at the end.
    dataset_utils.write_tfrecord_shards(shard_records, output_shards)
  dataset_utils.write_label_file(dict(enumerate(class_names)), dataset_dir)
  dataset_utils.write_split_sizes(
      {split: len(splits[split]) for split in SPLITS}, dataset_dir)
  return paths
