"""tf.train.Example helpers, label files and crash-safe TFRecord writing.

Every converter in `datasets/` writes records through `image_to_tfexample`,
so all datasets share the upstream Slim feature keys:

  image/encoded       bytes   the encoded image (PNG or JPEG)
  image/format        bytes   b'png' or b'jpeg'
  image/class/label   int64   the class id
  image/height        int64
  image/width         int64
"""

import contextlib
import os

from tf2_compat.slim_compat import tf

LABELS_FILENAME = 'labels.txt'


def int64_feature(values):
  """A tf.train.Feature holding one int or a list of ints."""
  if not isinstance(values, (tuple, list)):
    values = [values]
  return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def bytes_feature(values):
  """A tf.train.Feature holding one bytes value (or a list of them)."""
  if not isinstance(values, (tuple, list)):
    values = [values]
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def float_feature(values):
  """A tf.train.Feature holding one float or a list of floats."""
  if not isinstance(values, (tuple, list)):
    values = [values]
  return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def image_to_tfexample(image_data, image_format, height, width, class_id):
  """Builds the tf.train.Example of one labelled image.

  Args:
    image_data: the encoded image, bytes.
    image_format: b'png' or b'jpeg' (str is accepted too).
    height: image height in pixels.
    width: image width in pixels.
    class_id: the integer label.

  Returns:
    A tf.train.Example with the upstream Slim feature keys.
  """
  if isinstance(image_format, str):
    image_format = image_format.encode('ascii')
  return tf.train.Example(features=tf.train.Features(feature={
      'image/encoded': bytes_feature(image_data),
      'image/format': bytes_feature(image_format),
      'image/class/label': int64_feature(int(class_id)),
      'image/height': int64_feature(int(height)),
      'image/width': int64_feature(int(width)),
  }))


def write_label_file(labels_to_class_names, dataset_dir,
                     filename=LABELS_FILENAME):
  """Writes `id:name` lines, sorted by id, to dataset_dir/filename."""
  path = os.path.join(dataset_dir, filename)
  lines = ['%d:%s\n' % (label, labels_to_class_names[label])
           for label in sorted(labels_to_class_names)]
  with atomic_output(path) as tmp_path:
    with tf.io.gfile.GFile(tmp_path, 'w') as f:
      f.write(''.join(lines))
  return path


def has_labels(dataset_dir, filename=LABELS_FILENAME):
  """True if dataset_dir holds a label file."""
  return tf.io.gfile.exists(os.path.join(dataset_dir, filename))


def read_label_file(dataset_dir, filename=LABELS_FILENAME):
  """Reads the `id:name` lines written by `write_label_file`.

  Returns:
    A dict from integer label to class name.

  Raises:
    ValueError: a non-empty line is not of the form `id:name`.
  """
  path = os.path.join(dataset_dir, filename)
  with tf.io.gfile.GFile(path, 'r') as f:
    lines = f.read().splitlines()
  labels_to_class_names = {}
  for line_number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    label, sep, name = line.partition(':')
    if not sep or not label.strip().isdigit():
      raise ValueError('%s:%d: expected "id:name", got %r'
                       % (path, line_number, line))
    labels_to_class_names[int(label)] = name
  return labels_to_class_names


def _temporary_name(path):
  # A leading dot and a trailing suffix keep a half-written file out of
  # every dataset glob (`mnist_*.tfrecord`, `train-*`).
  directory, base = os.path.split(path)
  return os.path.join(directory, '.%s.tmp-%d' % (base, os.getpid()))


@contextlib.contextmanager
def atomic_output(path):
  """Yields a temporary path that is renamed to `path` on success.

  If the body raises, the temporary file is removed and `path` is left as
  it was, so a crash never leaves a half-written file under the real name.
  """
  with atomic_outputs([path]) as (tmp_path,):
    yield tmp_path


@contextlib.contextmanager
def atomic_outputs(paths):
  """Like `atomic_output` for several files renamed together at the end.

  All files are renamed only after the body finished, so a crash halfway
  through a sharded conversion leaves no shard of the new dataset at all
  (a partial set of shards would be read as a smaller dataset).
  """
  tmp_paths = [_temporary_name(path) for path in paths]
  try:
    yield tmp_paths
  except BaseException:
    for tmp_path in tmp_paths:
      if tf.io.gfile.exists(tmp_path):
        tf.io.gfile.remove(tmp_path)
    raise
  for tmp_path, path in zip(tmp_paths, paths):
    tf.io.gfile.rename(tmp_path, path, overwrite=True)


def write_tfrecord_shards(examples_per_shard, paths):
  """Writes each list of serialized examples to its shard, crash-safely.

  Args:
    examples_per_shard: a list (one entry per shard) of iterables of
      serialized tf.train.Example bytes; generators are consumed one shard
      after the other, so records can be made as they are written.
    paths: the final shard paths, one per entry of examples_per_shard.

  Returns:
    The list of paths written.
  """
  with atomic_outputs(paths) as tmp_paths:
    for records, tmp_path in zip(examples_per_shard, tmp_paths):
      with tf.io.TFRecordWriter(tmp_path) as writer:
        for record in records:
          writer.write(record)
  return list(paths)


SPLIT_SIZES_FILENAME = 'split_sizes.txt'


def write_split_sizes(splits_to_sizes, dataset_dir,
                      filename=SPLIT_SIZES_FILENAME):
  """Writes `split:count` lines, for datasets whose sizes are not fixed."""
  path = os.path.join(dataset_dir, filename)
  with atomic_output(path) as tmp_path:
    with tf.io.gfile.GFile(tmp_path, 'w') as f:
      f.write(''.join('%s:%d\n' % (split, splits_to_sizes[split])
                      for split in sorted(splits_to_sizes)))
  return path


def read_split_sizes(dataset_dir, filename=SPLIT_SIZES_FILENAME):
  """Reads the file of `write_split_sizes` into {split: count}."""
  path = os.path.join(dataset_dir, filename)
  with tf.io.gfile.GFile(path, 'r') as f:
    lines = [line for line in f.read().splitlines() if line.strip()]
  splits_to_sizes = {}
  for line in lines:
    split, sep, count = line.partition(':')
    if not sep or not count.strip().isdigit():
      raise ValueError('%s: expected "split:count", got %r' % (path, line))
    splits_to_sizes[split.strip()] = int(count)
  return splits_to_sizes
