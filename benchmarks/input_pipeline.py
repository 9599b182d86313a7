"""Measures the tf.data input pipeline against tf-slim's queue pipeline.

Data: --num_images smooth random 256x256 JPEGs (quality 90; low-frequency
noise, upsampled, plus a little grain, so the files are the size of photo
JPEGs rather than of flat colour or of pure noise) in 4 TFRecord shards in
a temporary folder, generated once per run and read through
`dataset_factory.get_dataset('folder', 'train', ...)`.

Work per image, the same in every pipeline: decode, random 224x224 crop,
random left-right flip, scale to [-1, 1]; batches of 32.

  * slim queues (baseline): `slim.dataset_data_provider.DatasetDataProvider`
    (4 readers, shuffle, common queue 20 / min 10 batches) decoding the
    whole JPEG with slim's `tfexample_decoder`, the crop as a slice, and
    `tf.train.batch` with 4 threads, as upstream train_image_classifier.py
    (which adds a `slim.prefetch_queue` on top; left out here, so the
    baseline is if anything flattered).
  * tf.data: `datasets.input_pipeline.make_dataset` in training mode with
    the same 4 readers and 4 preprocessing threads, decoding whole JPEGs.
  * tf.data, decode_and_crop_jpeg: the same with the preprocessing given
    as a `CroppingPreprocessor`, so only the 224x224 window is decoded.
    A 224 crop keeps 77% of a 256 image, where the window costs about
    what it saves (see preprocessing/cropping.py); it pays off for
    inception-style training crops, which average about half the image.
  * tf.data, AUTOTUNE map + private pool: `num_parallel_calls=AUTOTUNE`
    and a private thread pool (--private_threads), so the pipeline's work
    does not queue behind other ops in the session's inter-op pool.

Each round builds every pipeline in a fresh graph and session, warms it up
(--warmup batches, which also fills the queues), then times --batches
batches; pipelines take turns within a round and the first one rotates, so
load from other processes spreads over all of them. The table reports,
over the rounds, the median images/sec; the median of the per-round ratios
to the baseline (the pipelines of one round run within seconds of each
other, so slow changes in load cancel); and the median CPU time the process
spent per image, all threads (images/sec depends on how much of the machine
other processes leave, CPU ms/image much less).

Usage (from the repository root):

  .venv/bin/python benchmarks/input_pipeline.py
  .venv/bin/python benchmarks/input_pipeline.py --rounds 3 --batches 40
  .venv/bin/python benchmarks/input_pipeline.py --output /tmp/table.md
"""

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from datasets import dataset_factory  # pylint: disable=g-import-not-at-top,wrong-import-position
from datasets import dataset_utils  # pylint: disable=g-import-not-at-top,wrong-import-position
from datasets import input_pipeline  # pylint: disable=g-import-not-at-top,wrong-import-position
from deployment.slim_compat import slim, tf  # pylint: disable=g-import-not-at-top,wrong-import-position
from preprocessing import cropping  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCH_SIZE = 32
IMAGE_SIDE = 256
CROP_SIDE = 224
NUM_SHARDS = 4
NUM_CLASSES = 10
JPEG_QUALITY = 90


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n')[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--num_images', type=int, default=2000)
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--batches', type=int, default=100,
                      help='timed batches per pipeline per round')
  parser.add_argument('--warmup', type=int, default=15,
                      help='untimed batches before timing')
  parser.add_argument('--threads', type=int, default=4,
                      help='readers and preprocessing threads (upstream '
                           'default: 4); the tuned pipelines use it for '
                           'readers only')
  parser.add_argument('--private_threads', type=int, default=4,
                      help='private thread pool size of the tuned pipelines')
  parser.add_argument('--output', default='/tmp/input_pipeline_table.md',
                      help='where to write the Markdown table')
  return parser.parse_args(argv)


def write_jpeg_shards(directory, num_images, seed=0):
  """Writes the benchmark images as a 'folder' dataset; returns bytes/image."""
  rng = np.random.RandomState(seed)
  records = []
  total_bytes = 0
  for start in range(0, num_images, 100):
    count = min(100, num_images - start)
    coarse = rng.uniform(0, 255, size=(count, 16, 16, 3)).astype(np.float32)
    smooth = tf.compat.v2.image.resize(coarse, [IMAGE_SIDE, IMAGE_SIDE],
                                       method='bicubic').numpy()
    grain = rng.normal(0, 6, size=smooth.shape)
    pixels = np.clip(smooth + grain, 0, 255).astype(np.uint8)
    for offset in range(count):
      jpeg = tf.io.encode_jpeg(pixels[offset], quality=JPEG_QUALITY).numpy()
      total_bytes += len(jpeg)
      records.append(dataset_utils.image_to_tfexample(
          jpeg, b'jpeg', IMAGE_SIDE, IMAGE_SIDE,
          (start + offset) % NUM_CLASSES).SerializeToString())
  shards = [records[i::NUM_SHARDS] for i in range(NUM_SHARDS)]
  paths = [os.path.join(directory, 'folder_train_%05d-of-%05d.tfrecord'
                        % (i, NUM_SHARDS)) for i in range(NUM_SHARDS)]
  dataset_utils.write_tfrecord_shards(shards, paths)
  dataset_utils.write_label_file(
      {i: 'class_%d' % i for i in range(NUM_CLASSES)}, directory)
  dataset_utils.write_split_sizes({'train': num_images}, directory)
  return total_bytes / num_images


def _crop_window(image_shape, height, width, unused_bbox):
  return cropping.random_crop_window(image_shape, height, width)


def _flip_and_scale(cropped_image, unused_height, unused_width):
  image = tf.image.random_flip_left_right(cropped_image)
  return tf.cast(image, tf.float32) * (2.0 / 255.0) - 1.0


# Random 224 crop, flip, [-1, 1], as a CroppingPreprocessor: make_dataset
# folds its crop into decode_and_crop_jpeg.
CROP_IN_DECODE = cropping.CroppingPreprocessor(_crop_window, _flip_and_scale)


def crop_flip_scale(image, height, width):
  """The same preprocessing as a plain function: decoded whole, then cut."""
  return CROP_IN_DECODE(image, height, width)


def build_slim_queues(dataset, args):
  provider = slim.dataset_data_provider.DatasetDataProvider(
      dataset, num_readers=args.threads, shuffle=True,
      common_queue_capacity=20 * BATCH_SIZE,
      common_queue_min=10 * BATCH_SIZE)
  image, label = provider.get(['image', 'label'])
  image = crop_flip_scale(image, CROP_SIDE, CROP_SIDE)
  image.set_shape([CROP_SIDE, CROP_SIDE, 3])
  return tf.train.batch([image, label], batch_size=BATCH_SIZE,
                        num_threads=args.threads, capacity=5 * BATCH_SIZE)


def _build_tf_data(dataset, preprocess_fn, **pipeline_options):
  batches = input_pipeline.make_dataset(
      dataset, preprocess_fn, BATCH_SIZE, CROP_SIDE, is_training=True,
      **pipeline_options)
  return input_pipeline.batch_queue(batches).next_batch()


def build_tf_data(dataset, args):
  return _build_tf_data(dataset, crop_flip_scale, num_readers=args.threads,
                        num_preprocessing_threads=args.threads)


def build_tf_data_decode_and_crop(dataset, args):
  return _build_tf_data(dataset, CROP_IN_DECODE, num_readers=args.threads,
                        num_preprocessing_threads=args.threads)


def build_tf_data_tuned(dataset, args):
  return _build_tf_data(dataset, crop_flip_scale, num_readers=args.threads,
                        num_preprocessing_threads=input_pipeline.AUTOTUNE,
                        private_threadpool_size=args.private_threads)


PIPELINES = (
    ('slim queues: DatasetDataProvider + tf.train.batch', build_slim_queues),
    ('tf.data: make_dataset, same threads', build_tf_data),
    ('tf.data: same, decode_and_crop_jpeg', build_tf_data_decode_and_crop),
    ('tf.data: AUTOTUNE map + private pool', build_tf_data_tuned),
)


def measure(build, dataset_dir, args):
  """Returns (images/sec, CPU ms/image) of one pipeline.

  The pipeline is built in a fresh graph and session. CPU time is this
  process's, all threads, so it is the cost of an image whatever share of
  the machine other processes take.
  """
  with tf.Graph().as_default():
    dataset = dataset_factory.get_dataset('folder', 'train', dataset_dir)
    images, labels = build(dataset, args)
    # A tiny fetch that still needs the whole batch: the timing is the
    # pipeline's, not the copy of 19 MB of floats into numpy.
    fetch = [labels, images[0, 0, 0, 0]]
    with tf.Session() as session:
      coordinator = tf.train.Coordinator()
      threads_started = tf.train.start_queue_runners(session, coordinator)
      for _ in range(args.warmup):
        session.run(fetch)
      start, start_cpu = time.perf_counter(), time.process_time()
      for _ in range(args.batches):
        session.run(fetch)
      elapsed = time.perf_counter() - start
      cpu = time.process_time() - start_cpu
      coordinator.request_stop()
      coordinator.join(threads_started, stop_grace_period_secs=5,
                       ignore_live_threads=True)
  images = args.batches * BATCH_SIZE
  return images / elapsed, 1000.0 * cpu / images


def markdown_table(results, args, bytes_per_image, load_averages):
  """results: {name: [(images/sec, CPU ms/image) per round]}."""
  baseline_rates = [rate for rate, _ in results[PIPELINES[0][0]]]
  baseline = statistics.median(baseline_rates)
  baseline_cpu = statistics.median(cpu for _, cpu in results[PIPELINES[0][0]])
  lines = [
      '| pipeline | images/sec (median) | vs slim queues | vs slim, '
      'median of per-round ratios | CPU ms/image (median) | images per '
      'CPU-second vs slim | images/sec per round |',
      '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
  ]
  for name, _ in PIPELINES:
    rates = [rate for rate, _ in results[name]]
    median = statistics.median(rates)
    paired = statistics.median(
        rate / base for rate, base in zip(rates, baseline_rates))
    cpu = statistics.median(cpu for _, cpu in results[name])
    lines.append('| %s | %.0f | %.2fx | %.2fx | %.2f | %.2fx | %s |' % (
        name, median, median / baseline, paired, cpu, baseline_cpu / cpu,
        ', '.join('%.0f' % rate for rate in rates)))
  lines.append('')
  lines.append(
      '%d JPEGs %dx%d (%.1f KB each) in %d TFRecord shards; random %d crop, '
      'flip, [-1, 1]; batch %d; %d readers and %d preprocessing threads '
      '(AUTOTUNE row: %d readers, num_parallel_calls=AUTOTUNE, private '
      'thread pool of %d). %d rounds x '
      '%d timed batches after %d warm-up; %s, %d CPUs shared with other '
      'processes (1-minute load average %.1f before the run, %.1f at its '
      'end including this one), '
      'TensorFlow %s. CPU ms/image is this process\'s CPU time (all '
      'threads) per image; it depends little on what other processes '
      'take.' % (
          args.num_images, IMAGE_SIDE, IMAGE_SIDE, bytes_per_image / 1024,
          NUM_SHARDS, CROP_SIDE, BATCH_SIZE, args.threads, args.threads,
          args.threads, args.private_threads, args.rounds, args.batches,
          args.warmup, platform.machine(), os.cpu_count(),
          load_averages[0], load_averages[1], tf.__version__))
  return '\n'.join(lines) + '\n'


def main(argv=None):
  args = parse_args(argv)
  data_dir = tempfile.mkdtemp(prefix='input_pipeline_bench-')
  load_before = os.getloadavg()[0]
  try:
    bytes_per_image = write_jpeg_shards(data_dir, args.num_images)
    results = {name: [] for name, _ in PIPELINES}
    for round_index in range(args.rounds):
      shift = round_index % len(PIPELINES)
      for name, build in PIPELINES[shift:] + PIPELINES[:shift]:
        rate, cpu = measure(build, data_dir, args)
        results[name].append((rate, cpu))
        print('round %d  %-50s %6.0f images/sec  %.2f CPU ms/image'
              % (round_index + 1, name, rate, cpu), flush=True)
  finally:
    shutil.rmtree(data_dir, ignore_errors=True)
  table = markdown_table(results, args, bytes_per_image,
                         (load_before, os.getloadavg()[0]))
  print()
  print(table)
  with open(args.output, 'w') as f:
    f.write(table)


if __name__ == '__main__':
  main()
