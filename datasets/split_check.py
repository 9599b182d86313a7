"""Checks a split's records before training reads them: some exist, their
labels are classes of the network, and their images decode
(datasets/image_check.py).

Two faults that tf.data does not report:

  * a split whose files hold no record: the training pipeline repeats it
    forever, so the first step never comes (nor does a SIGTERM's
    checkpoint, which waits for the step);
  * a label outside [labels_offset, num_classes): `tf.one_hot` makes it a
    row of zeros and training goes on with a meaningless loss.

When a script opens its dataset, `check_split(dataset, labels_offset)`
reads the first records of every file (`RECORDS_READ` in all, at least one
per file) and raises EmptySplitError, BadLabelError or
image_check.BadImageError naming the file. For
labels deeper in the files, `input_pipeline.make_dataset(...,
check_labels=True)` asserts on every batch, and `naming_bad_labels` turns
that assert's failure into a BadLabelError with the same wording:

    split_check.check_split(dataset, labels_offset)
    with split_check.naming_bad_labels(dataset, labels_offset):
      session.run(train_op)
"""

import contextlib
import os
import re

from absl import logging
from google.protobuf import message

from datasets import dataset_spec
from datasets import image_check
from datasets import tfrecord_check
from tf2_compat.slim_compat import tf

LABEL_KEY = 'image/class/label'

# Records read at open over all files (at least one per file), and at most
# this many from one file: bounded work even for 1,024 ImageNet shards.
RECORDS_READ = 256
MAX_RECORDS_PER_FILE = 64

_ASSERT_MARKER = 'label outside the classes:'


class EmptySplitError(ValueError):
  """The files of a split (or of one replica's share) hold no record."""


class BadLabelError(ValueError):
  """A record's label is not a class of the network."""


def records_read_per_file(num_files):
  """How many records check_split reads from each of num_files files."""
  return min(MAX_RECORDS_PER_FILE, max(1, RECORDS_READ // max(num_files, 1)))


def classes_after_offset(dataset, labels_offset):
  """The network's number of classes: the dataset's minus labels_offset.

  Raises:
    ValueError: no class would be left.
  """
  num_classes = dataset.num_classes - labels_offset
  if num_classes < 1:
    raise ValueError(
        'dataset %s has only %d classes (from %s), so none would be left; '
        'use an offset below %d (1 drops a background class 0)'
        % (dataset.name, dataset.num_classes, _classes_source(dataset),
           dataset.num_classes))
  return num_classes


def check_split(dataset, labels_offset=0, max_image_pixels=None):
  """Reads the first records of each file of a split and checks them.

  A file without records among others is only warned about: the pipeline
  reads the rest.

  Args:
    dataset: a slim.dataset.Dataset from dataset_factory.get_dataset
      (synthetic datasets pass unread).
    labels_offset: subtracted from every label; labels below it are errors.
    max_image_pixels: decode the images read, refusing any of more pixels
      (image_check); None: the images are not checked.

  Returns:
    {path: records read}.

  Raises:
    FileNotFoundError, tf.errors.DataLossError: a file is missing or
      corrupt (named).
    EmptySplitError: no file of the split holds a record.
    BadLabelError: a record read has no label, or one outside
      [labels_offset, dataset.num_classes).
    image_check.BadImageError: an image read does not decode, or is of
      another size than the dataset's or larger than max_image_pixels.
  """
  if getattr(dataset, 'is_synthetic', False):
    return {}
  files = list(dataset.data_sources)
  records = tfrecord_check.first_records(files,
                                         records_read_per_file(len(files)))
  counts = {path: len(file_records) for path, file_records in records.items()}
  require_records(dataset, counts)
  empty = [path for path, count in counts.items() if not count]
  if empty:
    logging.warning('%d of the %d files of split %s of %s hold no records '
                    '(%s): training reads the other %d',
                    len(empty), len(files), dataset.split_name, dataset.name,
                    _some_paths(empty), len(files) - len(empty))
  for path, file_records in records.items():
    for index, record in enumerate(file_records):
      where = 'record %d of %s' % (index + 1, path)
      label = _label(record, where, dataset)
      if not labels_offset <= label < dataset.num_classes:
        raise BadLabelError(describe_bad_label(dataset, label, labels_offset,
                                               where))
  if max_image_pixels is not None:
    image_check.check_records(dataset, records, max_image_pixels)
  return counts


def require_records(dataset, counts, replica=None):
  """Raises EmptySplitError unless one of the files counted holds a record.

  Args:
    dataset: the slim.dataset.Dataset the files belong to.
    counts: {path: records read} of the files one reader reads.
    replica: (index, count of replicas) when the files are one replica's
      share of the split's files; None for the whole split.
  """
  if any(counts.values()):
    return
  paths = sorted(counts)
  if replica is None:
    whose = 'split %s of %s is empty' % (dataset.split_name, dataset.name)
  else:
    whose = ('replica %d of %d reads no records of split %s of %s'
             % (replica[0], replica[1], dataset.split_name, dataset.name))
  if len(paths) == 1:
    files = '%s holds no record (%d bytes)' % (
        paths[0], tf.io.gfile.stat(paths[0]).length)
  else:
    files = 'none of its %d files holds a record (%s)' % (
        len(paths), _some_paths(paths))
  raise EmptySplitError('%s: %s; recreate the files with: %s'
                        % (whose, files,
                           dataset_spec.convert_hint_of(dataset)))


def describe_bad_label(dataset, label, labels_offset, where):
  """One line: which label is wrong, against which classes, and the fix.

  Args:
    dataset: the slim.dataset.Dataset the label came from.
    label: the label as stored in the record.
    labels_offset: the offset training subtracts.
    where: the record, e.g. 'record 3 of /data/digits_train.tfrecord'.
  """
  if label < 0:
    return ('%s has label %d, but class ids start at 0; recreate the files '
            'with: %s' % (where, label,
                          dataset_spec.convert_hint_of(dataset)))
  if label < labels_offset:
    return ('%s has label %d, below --labels_offset=%d (the network\'s '
            'classes are the labels minus the offset, from 0); %s'
            % (where, label, labels_offset,
               'use --labels_offset=%d or less' % label if label
               else 'drop --labels_offset: the records use class 0'))
  source = _classes_source(dataset)
  list_classes = ('list every class in %s, or ' % source
                  if os.path.basename(source) == 'labels.txt' else '')
  return ('%s has label %d, outside the %d classes (ids 0..%d) that %s gives '
          'dataset %s; %srecreate the files with: %s'
          % (where, label, dataset.num_classes, dataset.num_classes - 1,
             source, dataset.name, list_classes,
             dataset_spec.convert_hint_of(dataset)))


def assert_labels_in_range(labels, labels_offset, num_classes):
  """labels, after an assert that each is in [labels_offset, num_classes).

  The assert's failure (an InvalidArgumentError when the batch is read)
  carries the first bad label; `naming_bad_labels` words it.
  """
  in_range = tf.logical_and(labels >= labels_offset, labels < num_classes)
  first_bad = tf.boolean_mask(labels, tf.logical_not(in_range))[:1]
  check = tf.debugging.Assert(tf.reduce_all(in_range),
                              [_ASSERT_MARKER, first_bad])
  with tf.control_dependencies([check]):
    return tf.identity(labels)


@contextlib.contextmanager
def naming_bad_labels(dataset, labels_offset):
  """Re-raises the failure of assert_labels_in_range as a BadLabelError."""
  try:
    yield
  except tf.errors.InvalidArgumentError as e:
    found = re.search(re.escape(_ASSERT_MARKER) + r'\]\s*\[(-?\d+)\]',
                      e.message)
    if not found:
      raise
    raise BadLabelError(describe_bad_label(
        dataset, int(found.group(1)), labels_offset,
        'a record of split %s' % dataset.split_name)) from None


def _label(record, where, dataset):
  try:
    feature = tf.train.Example.FromString(record).features.feature.get(
        LABEL_KEY)
  except message.DecodeError:
    feature = None
  values = list(feature.int64_list.value) if feature is not None else []
  if len(values) != 1:
    raise BadLabelError('%s is not a tf.train.Example with one int64 %s '
                        '(the class id); recreate the files with: %s'
                        % (where, LABEL_KEY,
                           dataset_spec.convert_hint_of(dataset)))
  return values[0]


def _classes_source(dataset):
  return getattr(dataset, 'num_classes_source', 'datasets/%s.py' % dataset.name)


def _some_paths(paths, shown=3):
  if len(paths) <= shown:
    return ', '.join(paths)
  return '%s and %d more' % (', '.join(paths[:shown]), len(paths) - shown)
