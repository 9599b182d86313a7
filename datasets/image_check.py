"""Checks the images of a split's records, and names the record of a bad one.

Decoding meets three faults of a stored image as TensorFlow's
InvalidArgumentError, which names neither the file nor the record:

  * bytes that are not an image, or an image cut short;
  * an image of another size than the dataset's (digits are 8x8, cifar10
    32x32);
  * an image so large that decoding it takes gigabytes: a 20000x20000 PNG
    is 1.1 GiB of pixels.

The input pipeline reads each image's height and width from its header
(`header_size`: JPEG, PNG, GIF, BMP, WebP) and refuses, before decoding,
an image of more than `max_image_pixels` pixels, or one in another format
(`within_bound`); the refusal fails the pipeline as a bad decode does.

Two checks name the record, as split_check does for labels:

  * `check_records(dataset, records, max_image_pixels)` decodes the records
    a script reads when it opens the dataset (split_check.check_split),
    before anything is written;
  * `naming_bad_images(dataset, max_image_pixels)` wraps the training or
    evaluation loop; when the input pipeline fails, it scans the files for
    the first bad image and raises BadImageError naming it. The scan
    decodes every image up to the bad one, so it runs only after an error.

Records are counted from 1, as in split_check's messages.
"""

from concurrent import futures
import contextlib
import os
import struct

import numpy as np

from datasets import dataset_spec
from tf2_compat.op_errors import op_error_reason
from tf2_compat.slim_compat import tf

# 8192 x 8192: 192 MiB of RGB pixels; ImageNet's images are far smaller.
DEFAULT_MAX_IMAGE_PIXELS = 1 << 26

FORMATS = 'JPEG, PNG, GIF, BMP or WebP'

_HEADER_BYTES = 32
# Records read from a file at a time when it is scanned.
_RECORDS_PER_CHUNK = 1024


class BadImageError(ValueError):
  """A record's image does not decode, or is of a size the run refuses."""


# Formats whose header holds the size at fixed offsets: (signature as
# {offset: bytes}, height, width), each of the two a field (offset, length,
# big-endian, then the value is (number // divisor) % modulus + add).
_FIXED_OFFSET_HEADERS = (
    # PNG: the IHDR chunk comes first.
    ({0: b'\x89PNG\r\n\x1a\n', 12: b'IHDR'},
     (20, 4, True, 1, 2 ** 32, 0), (16, 4, True, 1, 2 ** 32, 0)),
    # GIF: the logical screen.
    ({0: b'GIF8'}, (8, 2, False, 1, 2 ** 16, 0), (6, 2, False, 1, 2 ** 16, 0)),
    # BMP: the DIB header (a negative height, top-down rows: see below).
    ({0: b'BM'}, (22, 4, False, 1, 2 ** 32, 0), (18, 4, False, 1, 2 ** 32, 0)),
    # WebP, lossy: 14 bits each in the VP8 frame header.
    ({0: b'RIFF', 8: b'WEBP', 12: b'VP8 '},
     (28, 2, False, 1, 2 ** 14, 0), (26, 2, False, 1, 2 ** 14, 0)),
    # WebP, lossless: 14 bits of width - 1, then 14 of height - 1.
    ({0: b'RIFF', 8: b'WEBP', 12: b'VP8L'},
     (21, 4, False, 2 ** 14, 2 ** 14, 1), (21, 4, False, 1, 2 ** 14, 1)),
    # WebP, extended: 24 bits each of the canvas size - 1.
    ({0: b'RIFF', 8: b'WEBP', 12: b'VP8X'},
     (27, 3, False, 1, 2 ** 24, 1), (24, 3, False, 1, 2 ** 24, 1)),
)


# All of a JPEG that its header parser reads: the start of the image, a
# baseline frame of 1x1 pixel in one component, the start of the scan.
_STAND_IN_JPEG = (b'\xff\xd8' +
                  b'\xff\xc0' + struct.pack('>HBHHB', 11, 8, 1, 1, 1) +
                  b'\x01\x11\x00' +
                  b'\xff\xda' + struct.pack('>HB', 8, 1) + b'\x01\x00\x00\x3f\x00')


def _header_tables():
  """The table above as arrays: signature bytes and their mask [formats,
  _HEADER_BYTES]; byte weights [_HEADER_BYTES, 2 x formats] of each
  format's height, then width; divisors, moduli and additions
  [2 x formats]."""
  formats = len(_FIXED_OFFSET_HEADERS)
  expected = np.zeros([formats, _HEADER_BYTES], np.int64)
  compared = np.zeros([formats, _HEADER_BYTES], bool)
  weights = np.zeros([_HEADER_BYTES, 2 * formats], np.float64)
  arithmetic = np.zeros([3, 2 * formats], np.int64)
  for row, (signature, *fields) in enumerate(_FIXED_OFFSET_HEADERS):
    for offset, text in signature.items():
      expected[row, offset:offset + len(text)] = list(text)
      compared[row, offset:offset + len(text)] = True
    for column, field in zip((2 * row, 2 * row + 1), fields):
      offset, length, big_endian, divisor, modulus, add = field
      place = [256.0 ** i for i in range(length)]
      weights[offset:offset + length, column] = (place[::-1] if big_endian
                                                 else place)
      arithmetic[:, column] = divisor, modulus, add
  return expected, compared, weights, arithmetic


def header_size(encoded):
  """[height, width] (int64) of an encoded image, read from its header.

  [-1, -1] when the bytes begin with no JPEG, PNG, GIF, BMP or WebP
  header. A JPEG whose markers do not parse fails (InvalidArgumentError),
  as decoding it would. A few dozen small ops, no tf.cond: they run for
  every image the input pipeline reads.
  """
  expected, compared, weights, arithmetic = _header_tables()
  # Cut or padded with zeros: short bytes have every offset.
  values = tf.cast(tf.compat.v2.io.decode_raw(encoded, tf.uint8,
                                              fixed_length=_HEADER_BYTES),
                   tf.int64)
  found = tf.reduce_all(tf.logical_or(tf.equal(values, expected),
                                      tf.logical_not(compared)), axis=1)
  numbers = tf.cast(tf.linalg.matvec(weights, tf.cast(values, tf.float64),
                                     transpose_a=True), tf.int64)
  divisors, moduli, additions = tf.unstack(tf.constant(arithmetic))
  fields = numbers // divisors % moduli + additions
  # Every field is unsigned but BMP's height, negative for top-down rows.
  fields = tf.where(fields >= 2 ** 31, 2 ** 32 - fields, fields)
  # [formats, 2]. Not a transpose of [2, formats]: where oneDNN is on, an
  # int64 Transpose has TensorFlow print a notice about oneDNN's int64
  # kernels in every run.
  sizes = tf.reshape(fields, [-1, 2])
  # A JPEG's size is in its frame marker, after others of any length. The
  # parser fails on other bytes, so it reads a stand-in JPEG for those.
  jpeg = tf.reduce_all(tf.equal(values[:3], [0xff, 0xd8, 0xff]))
  jpeg_size = tf.cast(tf.image.extract_jpeg_shape(
      tf.where(jpeg, encoded, _STAND_IN_JPEG))[:2], tf.int64)
  found = tf.concat([found, [jpeg]], 0)
  sizes = tf.concat([sizes, [jpeg_size]], 0)
  return tf.where(tf.reduce_any(found),
                  tf.gather(sizes, tf.argmax(tf.cast(found, tf.int32))),
                  tf.constant([-1, -1], tf.int64))


def _is_raw(image_format):
  return tf.reduce_any(tf.equal(image_format, ['raw', 'RAW']))


def within_bound(encoded, image_format, max_image_pixels):
  """`encoded`, once its header says it is an image of at most
  max_image_pixels pixels; checked when run, before any decoding that
  depends on it. Raw pixels (the dataset's fixed shape) pass."""
  raw = _is_raw(image_format)
  # Raw pixels might begin like a JPEG: the header read is of no bytes.
  size = tf.where(raw, tf.zeros([2], tf.int64),
                  header_size(tf.where(raw, b'', encoded)))
  fits = tf.logical_and(size[0] >= 0, size[0] * size[1] <= max_image_pixels)
  check = tf.debugging.Assert(fits, ['image size (height, width):', size])
  with tf.control_dependencies([check]):
    return tf.identity(encoded)


def decode(encoded, image_format, dataset):
  """Decodes PNG/JPEG/GIF/BMP/WebP (or 'raw' for fixed shapes) to uint8."""
  channels = dataset.image_channels

  def decode_encoded():
    return tf.io.decode_image(encoded, channels=channels,
                              expand_animations=False)

  if dataset.image_shape is None:
    return decode_encoded()
  shape = list(dataset.image_shape)

  def decode_raw():
    return tf.reshape(tf.io.decode_raw(encoded, tf.uint8), shape)

  image = tf.cond(_is_raw(image_format), decode_raw, decode_encoded)
  # Checked when run: a stored image of another size fails here, with
  # both shapes in the message, rather than later in batching.
  return tf.ensure_shape(image, shape)


def decode_record(record, dataset, max_image_pixels):
  """(image, features) of a serialized record, as the input pipeline
  decodes it without cropping."""
  features = tf.io.parse_single_example(record, dataset.keys_to_features)
  encoded = within_bound(features['image/encoded'], features['image/format'],
                         max_image_pixels)
  return decode(encoded, features['image/format'], dataset), features


class _Inspector:
  """Decodes records one at a time, as the input pipeline does, in a
  private graph (eager or graph mode); several threads at once."""

  def __init__(self, dataset, max_image_pixels):
    self._dataset = dataset
    self._max_image_pixels = max_image_pixels
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._record = tf.placeholder(tf.string, [])
      image, features = decode_record(self._record, dataset,
                                      max_image_pixels)
      # Computed from every pixel, so that the whole decode runs (the size
      # of an image of a fixed-shape dataset is a constant: it would not).
      self._decoded = tf.reduce_max(image)
      self._encoded = features['image/encoded']
      self._raw = _is_raw(features['image/format'])
      self._size = header_size(self._encoded)
      self._path = tf.placeholder(tf.string, [])
      self._chunks = tf.data.make_initializable_iterator(
          tf.data.TFRecordDataset(self._path).batch(_RECORDS_PER_CHUNK))
      self._next_chunk = self._chunks.get_next()
    self._session = tf.Session(graph=self._graph)
    self._pool = futures.ThreadPoolExecutor(os.cpu_count() or 1)

  def close(self):
    self._pool.shutdown()
    self._session.close()

  def _decodes(self, record):
    try:
      self._session.run(self._decoded, {self._record: record})
      return True
    except tf.errors.InvalidArgumentError:
      return False

  def first_failure(self, records):
    """The index of the first of `records` whose image fails, or None."""
    for index, decodes in enumerate(self._pool.map(self._decodes, records)):
      if not decodes:
        return index
    return None

  def first_failure_in_file(self, path):
    """(index, record) of the file's first bad image, or None."""
    self._session.run(self._chunks.initializer, {self._path: path})
    start = 0
    while True:
      try:
        records = self._session.run(self._next_chunk)
      except tf.errors.OutOfRangeError:
        return None
      index = self.first_failure(records)
      if index is not None:
        return start + index, records[index]
      start += len(records)

  def problem(self, record):
    """What is wrong with the image of `record`, with its fix."""
    run = lambda fetch: self._session.run(fetch, {self._record: record})
    fix = 'recreate the files with: %s' % dataset_spec.convert_hint_of(
        self._dataset)
    try:
      raw, encoded = run([self._raw, self._encoded])
      if not raw:
        height, width = run(self._size)
        if height < 0:
          return ('holds %s, not a %s image; %s'
                  % ('no image bytes' if not encoded else 'bytes beginning %r'
                     % encoded[:8], FORMATS, fix))
        problem = self._size_problem(height, width)
        if problem:
          return problem
      run(self._decoded)
    except tf.errors.InvalidArgumentError as e:
      return 'holds an image that does not decode (%s); %s' % (
          op_error_reason(e), fix)
    return 'holds an image the input pipeline cannot read; %s' % fix

  def _size_problem(self, height, width):
    pixels = height * width
    if pixels > self._max_image_pixels:
      return ('holds a %dx%d image: %s pixels, more than --max_image_pixels='
              '%d (decoded to %d channel(s) it would take %.1f GiB); leave '
              'the image out of the files, or raise --max_image_pixels'
              % (height, width, format(pixels, ','), self._max_image_pixels,
                 self._dataset.image_channels,
                 pixels * self._dataset.image_channels / 2 ** 30))
    shape = self._dataset.image_shape
    if shape is not None and (height, width) != tuple(shape[:2]):
      return ('holds a %dx%d image, but every image of dataset %s is %dx%d '
              '(datasets/%s.py); recreate the files with: %s'
              % (height, width, self._dataset.name, shape[0], shape[1],
                 self._dataset.name,
                 dataset_spec.convert_hint_of(self._dataset)))
    return None


def check_records(dataset, records, max_image_pixels):
  """Decodes the images of records read from the files, as training would.

  Args:
    dataset: the slim.dataset.Dataset the records belong to.
    records: {path: [serialized records from the start of the file]}.
    max_image_pixels: the largest image decoded (height x width).

  Raises:
    BadImageError: naming the first bad record and what is wrong.
  """
  inspector = _Inspector(dataset, max_image_pixels)
  try:
    for path, file_records in records.items():
      index = inspector.first_failure(file_records) if file_records else None
      if index is not None:
        raise BadImageError('record %d of %s %s' % (
            index + 1, path, inspector.problem(file_records[index])))
  finally:
    inspector.close()


def find_bad_image(dataset, max_image_pixels):
  """Scans the split's files for the first record whose image fails.

  A file that is missing or corrupt is passed over: tfrecord_check names
  those.

  Returns:
    'record N of PATH holds ...', or None when every image decodes.
  """
  inspector = _Inspector(dataset, max_image_pixels)
  try:
    for path in sorted(dataset.data_sources):
      try:
        found = inspector.first_failure_in_file(path)
      except (tf.errors.DataLossError, tf.errors.NotFoundError):
        continue
      if found is not None:
        index, record = found
        return 'record %d of %s %s' % (index + 1, path,
                                        inspector.problem(record))
  finally:
    inspector.close()
  return None


@contextlib.contextmanager
def naming_bad_images(dataset, max_image_pixels):
  """Re-raises a failure of the input pipeline as a BadImageError naming
  the first bad image of the split's files, when one is found."""
  try:
    yield
  except tf.errors.InvalidArgumentError as e:
    if e.op is not None and not e.op.type.startswith('IteratorGetNext'):
      raise
    # The scan decodes every image up to the bad one: minutes on a large
    # split, which must not pass without a word.
    tf.logging.warning(
        'the input pipeline failed (%s); reading the %d file(s) of the split '
        'for the record that failed, to name it', op_error_reason(e),
        len(dataset.data_sources))
    found = find_bad_image(dataset, max_image_pixels)
    if found is None:
      raise
    raise BadImageError(found) from None
