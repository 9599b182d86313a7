"""Finds corrupt TFRecord files and names them in errors.

TensorFlow's own DataLossError says "corrupted record at 12" without the
file. Two checks close that gap without slowing the start of training:

  * `validate_tfrecord_files(paths)` reads the first record of each file
    (its length and data CRCs) before the input pipeline is built, which
    catches truncated, empty-headed or non-TFRecord files in about a
    millisecond per file;
  * `naming_corrupt_files(paths)` wraps the training loop; when a
    DataLossError escapes it (corruption deeper in a file), it scans the
    files and re-raises with the corrupt ones named.

    with tfrecord_check.naming_corrupt_files(dataset.data_sources):
      slim.learning.train(...)

`first_records(paths, n)` returns the first n records of each file, with
missing and corrupt files named the same way (datasets/split_check.py
reads their labels).
"""

import contextlib

import numpy as np

from tf2_compat.op_errors import op_error_reason
from tf2_compat.slim_compat import tf


class _RecordCounter:
  """Counts the records of files in a private graph (eager or graph mode)."""

  def __init__(self, max_records):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._path = tf.placeholder(tf.string, shape=[])
      records = tf.data.TFRecordDataset(self._path)
      if max_records is not None:
        records = records.take(max_records)
      self._count = records.reduce(np.int64(0), lambda count, _: count + 1)
    self._session = tf.Session(graph=self._graph)

  def count(self, path):
    return int(self._session.run(self._count, {self._path: path}))

  def close(self):
    self._session.close()


class _RecordReader:
  """Reads the first records of files in a private graph, as bytes."""

  def __init__(self, max_records):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._path = tf.placeholder(tf.string, shape=[])
      # One batch of at most max_records, or none for an empty file.
      records = tf.data.TFRecordDataset(self._path).take(max_records).batch(
          max_records)
      self._iterator = tf.data.make_initializable_iterator(records)
      self._batch = self._iterator.get_next()
    self._session = tf.Session(graph=self._graph)

  def read(self, path):
    self._session.run(self._iterator.initializer, {self._path: path})
    try:
      return list(self._session.run(self._batch))
    except tf.errors.OutOfRangeError:
      return []

  def close(self):
    self._session.close()


def _read_each(paths, reader, read):
  """{path: read(reader, path)}; a missing or corrupt file is named."""
  results = {}
  try:
    for path in paths:
      if not tf.io.gfile.exists(path):
        raise FileNotFoundError('TFRecord file %s does not exist' % path)
      try:
        results[path] = read(reader, path)
      except tf.errors.DataLossError as e:
        raise tf.errors.DataLossError(
            None, None, 'corrupt TFRecord file %s: %s' % (path, op_error_reason(e)))
  finally:
    reader.close()
  return results


def first_records(paths, max_records_per_file):
  """Reads the first max_records_per_file records of each file, CRCs
  checked.

  Returns:
    {path: [serialized records]}, an empty list for a file without records.

  Raises:
    FileNotFoundError: a file does not exist (named in the message).
    tf.errors.DataLossError: a file is corrupt (named in the message).
  """
  return _read_each(paths, _RecordReader(max_records_per_file),
                    _RecordReader.read)


def validate_tfrecord_files(paths, max_records_per_file=1):
  """Reads up to max_records_per_file records of each file, checking CRCs.

  Args:
    paths: TFRecord file paths.
    max_records_per_file: records to read per file; None reads them all.

  Returns:
    {path: records read}.

  Raises:
    FileNotFoundError: a file does not exist (named in the message).
    tf.errors.DataLossError: a file is corrupt (named in the message).
  """
  return _read_each(paths, _RecordCounter(max_records_per_file),
                    _RecordCounter.count)


def find_corrupt_files(paths):
  """Reads every record of every file; returns [(path, problem)]."""
  corrupt = []
  counter = _RecordCounter(None)
  try:
    for path in paths:
      if not tf.io.gfile.exists(path):
        corrupt.append((path, 'file does not exist'))
        continue
      try:
        counter.count(path)
      except tf.errors.DataLossError as e:
        corrupt.append((path, op_error_reason(e)))
  finally:
    counter.close()
  return corrupt


@contextlib.contextmanager
def naming_corrupt_files(paths):
  """Re-raises a DataLossError from the body with the corrupt files named.

  The scan reads all files, so it runs only once an error happened.
  """
  try:
    yield
  except tf.errors.DataLossError as e:
    corrupt = find_corrupt_files(paths)
    if not corrupt:
      raise
    raise tf.errors.DataLossError(
        e.node_def, e.op, 'corrupt TFRecord file(s): %s (reading failed with: '
        '%s)' % ('; '.join('%s: %s' % item for item in corrupt),
                 op_error_reason(e))) from e
