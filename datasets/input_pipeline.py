"""The tf.data input pipeline: TFRecord shards to batches of (images, labels).

    dataset = dataset_factory.get_dataset('flowers', 'train', DIR)
    preprocess = preprocessing_factory.get_preprocessing('inception_v1', True)
    batches = input_pipeline.make_dataset(dataset, preprocess, batch_size=32,
                                          image_size=224, is_training=True)
    queue = input_pipeline.batch_queue(batches, device='/cpu:0')
    images, labels = queue.next_batch()   # once per clone (graph mode)

Stages, each parallel where it pays:
  files     shuffled per epoch (training), sharded over replicas
  records   `num_readers` files read at once (interleave)
  shuffle   over serialized records (cheap to hold)
  decode    + preprocess, `num_preprocessing_threads` at once, each
            image's header checked against `max_image_pixels` first
            (image_check.within_bound); when the
            preprocessing is a `CroppingPreprocessor` with
            fold_into_decode (inception-style training), JPEGs are
            decoded only inside the crop window (`decode_and_crop_jpeg`)
  batch     drop_remainder in training, so the batch shape is static;
            a `TwoStagePreprocessor` has its `image_stage` run per image
            before batching (its output may stay uint8) and its
            `batch_stage` once per batch after
  prefetch  overlaps input with the training step
"""

from datasets import image_check
from datasets import split_check
from datasets import tfrecord_check
from tf2_compat.slim_compat import tf
from preprocessing import image_ops

AUTOTUNE = tf.data.experimental.AUTOTUNE


def _image_size(image_size):
  if isinstance(image_size, int):
    return image_size, image_size
  height, width = image_size
  return int(height), int(width)


def _decode_cropped(encoded, image_format, dataset, preprocess_fn, height,
                    width):
  """Decodes only the crop window of JPEGs; crops other formats after."""
  channels = dataset.image_channels

  def decode_jpeg_window():
    window = preprocess_fn.crop_window(tf.image.extract_jpeg_shape(encoded),
                                       height, width)
    return tf.image.decode_and_crop_jpeg(encoded, window, channels=channels)

  def decode_then_crop():
    image = image_check.decode(encoded, image_format, dataset)
    window = preprocess_fn.crop_window(tf.shape(image), height, width)
    return image_ops.crop_to_window(image, window)

  image = tf.cond(tf.io.is_jpeg(encoded), decode_jpeg_window,
                  decode_then_crop)
  image.set_shape([None, None, channels])
  return image


def _record_parser(dataset, preprocess_fn, height, width, max_image_pixels):
  """Returns fn(serialized tf.Example) -> (image, label)."""
  crops_at_decode = getattr(preprocess_fn, 'fold_into_decode', False)
  image_stage = _image_stage(preprocess_fn)

  def parse(record):
    if not crops_at_decode:
      image, features = image_check.decode_record(record, dataset,
                                                  max_image_pixels)
      return image_stage(image, height, width), features['image/class/label']
    features = tf.io.parse_single_example(record, dataset.keys_to_features)
    image_format = features['image/format']
    encoded = image_check.within_bound(features['image/encoded'],
                                       image_format, max_image_pixels)
    cropped = _decode_cropped(encoded, image_format, dataset, preprocess_fn,
                              height, width)
    image = preprocess_fn.preprocess_cropped(cropped, height, width)
    return image, features['image/class/label']

  return parse


def _image_stage(preprocess_fn):
  """What runs per image: all of preprocess_fn unless it is two-stage."""
  return getattr(preprocess_fn, 'image_stage', preprocess_fn)


def _batch_stage(preprocess_fn):
  """What runs per batch: a TwoStagePreprocessor's batch_stage, or nothing."""
  return getattr(preprocess_fn, 'batch_stage', lambda images: images)


def _synthetic_images(dataset, num_epochs, num_shards, shard_index):
  """Image i of the split is random uint8 noise seeded with (seed, i)."""
  shape = list(dataset.image_shape)

  def generate(index):
    image = tf.random.stateless_uniform(
        shape, seed=tf.stack([dataset.seed, 2 * index]), minval=0,
        maxval=256, dtype=tf.int32)
    label = tf.random.stateless_uniform(
        [], seed=tf.stack([dataset.seed, 2 * index + 1]), minval=0,
        maxval=dataset.num_classes, dtype=tf.int64)
    return tf.cast(image, tf.uint8), label

  indices = tf.data.Dataset.range(dataset.num_samples)
  if num_shards > 1:
    indices = indices.shard(num_shards, shard_index)
  return indices.repeat(num_epochs).map(generate)


def _records(dataset, is_training, num_readers, num_epochs, seed, num_shards,
             shard_index, shuffle_buffer):
  """Serialized records, interleaved over files, sharded for replicas, and
  in training shuffled over `shuffle_buffer` of them."""
  files = sorted(dataset.data_sources)
  files_dataset = tf.data.Dataset.from_tensor_slices(files)
  shard_files = _shards_files(len(files), num_shards)
  if shard_files:
    files_dataset = files_dataset.shard(num_shards, shard_index)
  if is_training:
    files_dataset = files_dataset.shuffle(len(files), seed=seed,
                                          reshuffle_each_iteration=True)
  files_dataset = files_dataset.repeat(num_epochs)

  def read_file(path):
    records = tf.data.TFRecordDataset(path)
    if num_shards > 1 and not shard_files:
      # Fewer files than replicas: each replica takes every num_shards-th
      # record of every file, which does not depend on the file order.
      records = records.shard(num_shards, shard_index)
    return records

  records = files_dataset.interleave(
      read_file, cycle_length=num_readers, block_length=1,
      num_parallel_calls=num_readers,
      deterministic=_deterministic(is_training, seed))
  if is_training:
    records = records.shuffle(shuffle_buffer, seed=seed)
  return records


def _shards_files(num_files, num_shards):
  """Whether replicas split the files between them, rather than the records
  of every file."""
  return num_shards > 1 and num_files >= num_shards


def _check_files(dataset, num_shards, shard_index, counts=None):
  """Checks the first record of every file (unless `counts` gives what a
  check already read), and that the files this replica reads hold one:
  repeating no records would never yield a batch."""
  if counts is None:
    counts = tfrecord_check.validate_tfrecord_files(dataset.data_sources)
  files = sorted(counts)
  if _shards_files(len(files), num_shards):
    mine = files[shard_index::num_shards]
    split_check.require_records(dataset, {path: counts[path] for path in mine},
                                replica=(shard_index, num_shards))
  else:
    split_check.require_records(dataset, counts)


# Over 60 lines for its docstring only: each of its 21 arguments is
# documented; the body is twenty lines that hand on to the stages above.
def make_dataset(dataset, preprocess_fn, batch_size, image_size, is_training,
                 num_readers=4, num_preprocessing_threads=4, labels_offset=0,
                 shuffle_buffer=None, num_epochs=None, seed=None,
                 num_classes=None, one_hot=False, num_shards=1,
                 shard_index=0, drop_remainder=None, validate_files=True,
                 private_threadpool_size=None, check_labels=False,
                 record_counts=None,
                 max_image_pixels=image_check.DEFAULT_MAX_IMAGE_PIXELS):
  """Builds the tf.data.Dataset of (images, labels) batches.

  Args:
    dataset: a slim.dataset.Dataset from dataset_factory.get_dataset.
    preprocess_fn: fn(uint8 image, height, width) -> float image, from
      preprocessing_factory.get_preprocessing (kinds: the module docstring).
    batch_size: images per batch (per replica).
    image_size: output side, or (height, width).
    is_training: shuffle files and records, drop the last partial batch,
      and let elements come out of order (faster) unless `seed` is given.
    num_readers, num_preprocessing_threads: files read, and images decoded
      and preprocessed, in parallel (AUTOTUNE lets tf.data choose).
    labels_offset, num_classes, one_hot: labels minus labels_offset (1
      drops ImageNet's background class), as int64 ids or one-hot floats of
      depth num_classes (default: dataset.num_classes - labels_offset).
    shuffle_buffer: records in the shuffle buffer (training); by default
      max(1024, 10 * batch_size), at most the split size.
    num_epochs: passes over the data; None repeats forever.
    seed: seed of the file and record shuffles.
    num_shards, shard_index: replicas reading disjoint parts of the data,
      and this one's part: files when there are at least num_shards of
      them, else the records of every file.
    drop_remainder: whether to drop the last partial batch (default:
      is_training).
    validate_files: check the first record of every file up front, and that
      this replica's files hold a record; `record_counts` ({path: records},
      from split_check.check_split) saves reading the files again.
    private_threadpool_size: its own thread pool of this size (None: shared).
    check_labels: assert on every batch that the labels are in
      [labels_offset, dataset.num_classes) (split_check.naming_bad_labels).
    max_image_pixels: an image whose header gives more pixels (height x
      width) fails the pipeline before it is decoded
      (image_check.naming_bad_images names it).

  Returns:
    A tf.data.Dataset of (float32 images [batch, height, width, channels],
    int64 labels [batch] or float32 one-hot [batch, num_classes]).

  Raises:
    ValueError: bad batch_size or shard arguments.
    FileNotFoundError, tf.errors.DataLossError, split_check.EmptySplitError:
      from validate_files, naming the file or the split.
  """
  _check_batch_and_shard(batch_size, num_shards, shard_index)
  height, width = _image_size(image_size)
  if getattr(dataset, 'is_synthetic', False):
    examples = _synthetic_images(dataset, num_epochs, num_shards, shard_index)
    prepare = _preprocessing_images(preprocess_fn, height, width)
  else:
    if validate_files:
      _check_files(dataset, num_shards, shard_index, record_counts)
    examples = _records(dataset, is_training, num_readers, num_epochs, seed,
                        num_shards, shard_index,
                        _shuffle_buffer(shuffle_buffer, batch_size, dataset))
    prepare = _record_parser(dataset, preprocess_fn, height, width,
                             max_image_pixels)
  examples = examples.map(prepare,
                          num_parallel_calls=num_preprocessing_threads,
                          deterministic=_deterministic(is_training, seed))
  batches = examples.batch(batch_size, drop_remainder=(
      is_training if drop_remainder is None else drop_remainder))
  batches = batches.map(_batch_finisher(dataset, preprocess_fn, labels_offset,
                                        num_classes, one_hot, check_labels))
  return _with_options(batches.prefetch(AUTOTUNE), private_threadpool_size)


def _check_batch_and_shard(batch_size, num_shards, shard_index):
  if batch_size < 1:
    raise ValueError('batch_size must be >= 1, got %d' % batch_size)
  if not 0 <= shard_index < num_shards:
    raise ValueError('shard_index must be in [0, num_shards=%d), got %d'
                     % (num_shards, shard_index))


def _deterministic(is_training, seed):
  """Training lets elements come out of order (faster) unless a seed asks
  for a reproducible order (exact resume, tests)."""
  return not is_training or seed is not None


def _shuffle_buffer(shuffle_buffer, batch_size, dataset):
  if shuffle_buffer is None:
    return min(max(1024, 10 * batch_size), dataset.num_samples)
  return shuffle_buffer


def _preprocessing_images(preprocess_fn, height, width):
  """fn(image, label) -> (preprocessed image, label), for decoded images."""
  image_stage = _image_stage(preprocess_fn)
  return lambda image, label: (image_stage(image, height, width), label)


def _batch_finisher(dataset, preprocess_fn, labels_offset, num_classes,
                    one_hot, check_labels):
  """fn(images, labels) of one batch -> the batch make_dataset returns."""
  batch_stage = _batch_stage(preprocess_fn)
  if num_classes is None:
    num_classes = dataset.num_classes - labels_offset

  def finish_batch(images, labels):
    if check_labels:
      labels = split_check.assert_labels_in_range(labels, labels_offset,
                                                  dataset.num_classes)
    labels = labels - labels_offset
    if one_hot:
      labels = tf.one_hot(labels, num_classes, dtype=tf.float32)
    return batch_stage(images), labels

  return finish_batch


def _with_options(batches, private_threadpool_size):
  options = tf.data.Options()
  options.experimental_optimization.map_parallelization = True
  if private_threadpool_size:
    options.threading.private_threadpool_size = private_threadpool_size
  return batches.with_options(options)


class BatchQueue:
  """Hands out batches from one iterator, a new op per call.

  In graph mode each `next_batch()` op yields a different batch per
  session run, so clones that each call it once train on different data.
  `dequeue` is the same method under the name of slim's prefetch_queue.
  """

  def __init__(self, batches, device=None):
    self._device = device
    with tf.device(device):
      self._iterator = tf.data.make_one_shot_iterator(batches)

  def next_batch(self):
    """Returns a new (images, labels) pair of tensors."""
    with tf.device(self._device):
      return self._iterator.get_next()

  dequeue = next_batch


def batch_queue(batches, device=None):
  """A BatchQueue over `batches` (from make_dataset), placed on `device`."""
  return BatchQueue(batches, device)


def get_next_fn(batches, device=None):
  """The `next_batch` callable of `batch_queue(batches, device)`."""
  return batch_queue(batches, device).next_batch
