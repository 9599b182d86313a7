"""What a TFRecord dataset looks like on disk, and how to open one split.

Each dataset module (`mnist`, `cifar10`, `flowers`, `imagenet`, `digits`,
`folder`) describes its files with one `DatasetSpec` (those that
download_and_convert_data.py writes through `converted`) and opens a split
with `open_split(SPEC, ...)`, which returns the `slim.dataset.Dataset` that
both slim's `DatasetDataProvider` and this project's tf.data input
pipeline read; `split_getter(SPEC)` is a module's upstream `get_split`.
"""

import dataclasses
import os
from typing import Callable, Mapping, Optional, Tuple

from datasets import dataset_utils
from tf2_compat.slim_compat import slim, tf

CONVERT_SCRIPT = 'download_and_convert_data.py'

CLASSIFICATION_ITEMS = {
    'image': 'An image of varying size.',
    'label': 'The class id of the image.',
}


def classification_features(spec):
  """Feature spec of the records written by `image_to_tfexample`.

  The label has no default: a record without one fails to parse instead of
  silently training on class 0.
  """
  return {
      'image/encoded': tf.io.FixedLenFeature((), tf.string, default_value=''),
      'image/format': tf.io.FixedLenFeature(
          (), tf.string, default_value=spec.default_format),
      'image/class/label': tf.io.FixedLenFeature((), tf.int64),
  }


def classification_handlers(spec):
  """slim.tfexample_decoder handlers for the `image` and `label` items."""
  return {
      'image': slim.tfexample_decoder.Image(
          shape=list(spec.image_shape) if spec.image_shape else None,
          channels=spec.image_channels),
      'label': slim.tfexample_decoder.Tensor('image/class/label'),
  }


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """The layout of one dataset converted to TFRecords.

  Attributes:
    name: the dataset name used by `dataset_factory.get_dataset`.
    file_pattern: file glob relative to dataset_dir, with one `%s` for the
      split name, e.g. 'flowers_%s_*.tfrecord'.
    splits_to_sizes: number of records of each split.
    num_classes: number of classes (including a background class if any).
    image_channels: channels the images are decoded to.
    default_image_size: the side of the stored images (or a typical side
      when sizes vary).
    image_shape: (height, width, channels) when every image has that shape,
      else None.
    default_format: value of a missing `image/format` feature.
    items_to_descriptions: the items the decoder provides, described.
    convert_hint: the command that creates the files, for error messages.
    keys_to_features: returns the tf.io feature spec of one record.
    items_to_handlers: returns the slim.tfexample_decoder item handlers.
    num_classes_source: where num_classes comes from, for error messages;
      None: this dataset's module, datasets/<name>.py.
  """
  name: str
  file_pattern: str
  splits_to_sizes: Mapping[str, int]
  num_classes: int
  image_channels: int
  default_image_size: int
  image_shape: Optional[Tuple[int, int, int]]
  default_format: str
  items_to_descriptions: Mapping[str, str]
  convert_hint: str
  keys_to_features: Callable[['DatasetSpec'], dict] = classification_features
  items_to_handlers: Callable[['DatasetSpec'], dict] = classification_handlers
  num_classes_source: Optional[str] = None


def conversion_command(name, dataset_dir, extra=''):
  """The shell command that converts dataset `name` into dataset_dir."""
  return 'python %s --dataset_name=%s --dataset_dir=%s%s' % (
      CONVERT_SCRIPT, name, dataset_dir, extra)


def convert_hint_of(dataset):
  """The command that recreates a dataset's files, for error messages.

  Datasets built by hand, not by dataset_factory, may lack the hint.
  """
  return getattr(dataset, 'convert_hint', 'the conversion that wrote them')


def converted(name, file_pattern, splits_to_sizes, num_classes, image_shape,
              default_format, source, image_channels=3,
              default_image_size=None):
  """The DatasetSpec of a dataset that download_and_convert_data.py writes.

  Its records are those of `dataset_utils.image_to_tfexample`, its hint
  is the conversion command, and the items are described from the shape
  and the classes.

  Args:
    name, file_pattern, splits_to_sizes, num_classes, default_format: as
      in DatasetSpec.
    image_shape: (height, width, channels) when every image has that
      shape (the channels and the image size follow from it), else None.
    source: what the conversion reads, for the hint, e.g. 'with
      cifar-10-python.tar.gz in --source_dir'.
    image_channels, default_image_size: for images of varying size.
  """
  if image_shape is not None:
    default_image_size, _, image_channels = image_shape
  kind = 'color' if image_channels == 3 else 'grayscale'
  if image_shape is None:
    image = 'A %s image of varying size.' % kind
  else:
    image = 'A [%d x %d x %d] %s image.' % (*image_shape, kind)
  return DatasetSpec(
      name=name, file_pattern=file_pattern, splits_to_sizes=splits_to_sizes,
      num_classes=num_classes, image_channels=image_channels,
      default_image_size=default_image_size, image_shape=image_shape,
      default_format=default_format,
      items_to_descriptions={
          'image': image,
          'label': 'A single integer between 0 and %d' % (num_classes - 1)},
      convert_hint=conversion_command(name, '%(dataset_dir)s',
                                      ' (%s)' % source))


def split_getter(spec):
  """The `get_split` of a dataset module: `open_split` of `spec`.

  Returns:
    get_split(split_name, dataset_dir, file_pattern=None, reader=None),
    upstream Slim's signature.
  """

  def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    return open_split(spec, split_name, dataset_dir, file_pattern, reader)

  get_split.__doc__ = 'Returns split %s of %s; see dataset_spec.open_split.' % (
      ' or '.join(repr(split) for split in spec.splits_to_sizes), spec.name)
  return get_split


def find_split_files(spec, split_name, dataset_dir, file_pattern=None):
  """Returns the sorted files of one split.

  Raises:
    ValueError: split_name is not a split of the dataset.
    FileNotFoundError: dataset_dir does not exist or no file matches.
  """
  if split_name not in spec.splits_to_sizes:
    raise ValueError('split %r is not a split of dataset %r; valid splits: %s'
                     % (split_name, spec.name,
                        ', '.join(sorted(spec.splits_to_sizes))))
  pattern = os.path.join(dataset_dir or '',
                         (file_pattern or spec.file_pattern) % split_name)
  if not dataset_dir or not tf.io.gfile.isdir(dataset_dir):
    raise FileNotFoundError(
        'dataset_dir %r of dataset %r does not exist (expected %s); create '
        'it with: %s' % (dataset_dir, spec.name, pattern,
                         spec.convert_hint % {'dataset_dir':
                                              dataset_dir or 'DIR'}))
  files = sorted(tf.io.gfile.glob(pattern))
  if not files:
    raise FileNotFoundError(
        'no TFRecord files match %s (split %r of dataset %r); create them '
        'with: %s' % (pattern, split_name, spec.name,
                      spec.convert_hint % {'dataset_dir': dataset_dir}))
  return files


def open_split(spec, split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns a slim.dataset.Dataset for one split of a converted dataset.

  Args:
    spec: the DatasetSpec of the dataset.
    split_name: a key of spec.splits_to_sizes, e.g. 'train'.
    dataset_dir: the folder holding the TFRecord files.
    file_pattern: overrides spec.file_pattern (one `%s` for the split).
    reader: the TF reader class slim's DatasetDataProvider uses; defaults to
      tf.TFRecordReader. The tf.data input pipeline always reads TFRecords.

  Returns:
    A slim.dataset.Dataset with the upstream attributes (`data_sources`,
    `reader`, `decoder`, `num_samples`, `items_to_descriptions`,
    `num_classes`, `labels_to_names`) and `name`, `split_name`,
    `default_image_size`, `image_shape`, `image_channels`,
    `keys_to_features` for the tf.data pipeline, `num_classes_source` and
    `convert_hint` (the command that recreates the files) for messages.

  Raises:
    ValueError: split_name is not a split of the dataset.
    FileNotFoundError: dataset_dir does not exist or no file matches.
  """
  files = find_split_files(spec, split_name, dataset_dir, file_pattern)
  labels_to_names = None
  if dataset_utils.has_labels(dataset_dir):
    labels_to_names = dataset_utils.read_label_file(dataset_dir)
  keys_to_features = spec.keys_to_features(spec)
  decoder = slim.tfexample_decoder.TFExampleDecoder(
      keys_to_features, spec.items_to_handlers(spec))
  return slim.dataset.Dataset(
      data_sources=files,
      reader=reader or tf.TFRecordReader,
      decoder=decoder,
      num_samples=spec.splits_to_sizes[split_name],
      items_to_descriptions=dict(spec.items_to_descriptions),
      num_classes=spec.num_classes,
      labels_to_names=labels_to_names,
      name=spec.name,
      split_name=split_name,
      default_image_size=spec.default_image_size,
      image_shape=spec.image_shape,
      image_channels=spec.image_channels,
      keys_to_features=keys_to_features,
      is_synthetic=False,
      num_classes_source=(spec.num_classes_source
                          or 'datasets/%s.py' % spec.name),
      convert_hint=spec.convert_hint % {'dataset_dir': dataset_dir})
