"""Where the input pipeline's CPU time per image goes, stage by stage.

Each row is a tf.data pipeline that stops after one more stage of the
training input (read records, parse, decode the JPEG, flip, batch and
scale), batched by 32 so that session overhead is spread; the difference
between two rows is the cost of a stage. Same images as
benchmarks/input_pipeline.py (256x256 JPEGs, random 224 crop).

  .venv/bin/python benchmarks/input_stages.py

Writes benchmarks/results/input_stages.md.
"""

import glob
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import input_pipeline as pipeline_benchmark  # pylint: disable=g-import-not-at-top,wrong-import-position
from other_load import OtherLoad, disturbance_note  # pylint: disable=g-import-not-at-top,wrong-import-position
from preprocessing import cropping  # pylint: disable=g-import-not-at-top,wrong-import-position
from preprocessing import image_ops  # pylint: disable=g-import-not-at-top,wrong-import-position
import results  # pylint: disable=g-import-not-at-top,wrong-import-position

BATCHES = 60
THREADS = 4
CROP = 224


def _parse(record):
  features = tf.io.parse_single_example(record, {
      'image/encoded': tf.io.FixedLenFeature([], tf.string),
      'image/class/label': tf.io.FixedLenFeature([], tf.int64)})
  return features['image/encoded'], features['image/class/label']


def _decode_crop(encoded):
  window = cropping.random_crop_window(tf.image.extract_jpeg_shape(encoded),
                                       CROP, CROP)
  image = tf.image.decode_and_crop_jpeg(encoded, window, channels=3)
  return tf.ensure_shape(image, [CROP, CROP, 3])


STAGES = (
    ('read records', lambda r: r.batch(32)),
    ('+ parse', lambda r: r.map(_parse, THREADS).batch(32)),
    ('+ full JPEG decode', lambda r: r.map(_parse, THREADS).map(
        lambda e, l: (tf.io.decode_jpeg(e, channels=3), l), THREADS).batch(
            32)),
    ('+ decode only the crop window (instead)', lambda r: r.map(
        _parse, THREADS).map(lambda e, l: (_decode_crop(e), l),
                             THREADS).batch(32)),
    ('+ flip, uint8', lambda r: r.map(_parse, THREADS).map(
        lambda e, l: (image_ops.random_flip(_decode_crop(e)), l),
        THREADS).batch(32)),
    ('+ scale to [-1, 1] once per batch (the training input)',
     lambda r: r.map(_parse, THREADS).map(
         lambda e, l: (image_ops.random_flip(_decode_crop(e)), l),
         THREADS).batch(32).map(
             lambda i, l: (image_ops.uint8_to_range(i, -1.0, 1.0), l))),
)


def cpu_ms_per_image(files, build):
  with tf.Graph().as_default():
    batches = build(tf.data.TFRecordDataset(files).repeat())
    get_next = tf.data.make_one_shot_iterator(batches).get_next()
    with tf.Session() as session:
      for _ in range(5):
        session.run(get_next)
      start = time.process_time()
      for _ in range(BATCHES):
        session.run(get_next)
      return 1000 * (time.process_time() - start) / (BATCHES * 32)


def main():
  with tempfile.TemporaryDirectory() as directory:
    pipeline_benchmark.write_jpeg_shards(directory, 1000)
    files = sorted(glob.glob(os.path.join(directory, '*.tfrecord')))
    with OtherLoad() as load:
      costs = [(name, cpu_ms_per_image(files, build))
               for name, build in STAGES]
  lines = ['## CPU ms per image after each stage', '',
           '| pipeline up to | CPU ms/image | added by the stage |',
           '|---|---:|---:|']
  previous = 0.0
  for name, cost in costs:
    added = cost - previous if not name.endswith('(instead)') else (
        cost - costs[1][1])
    lines.append('| %s | %.3f | %+.3f |' % (name, cost, added))
    if not name.startswith('+ full'):
      previous = cost
  lines += ['', '%d batches of 32 per row, %d parallel calls; CPU is this '
            'process\'s (all threads).' % (BATCHES, THREADS), '',
            disturbance_note(load)]
  print('\n'.join(lines))
  print('wrote %s' % results.write_result(
      'input_stages', 'Input pipeline: CPU time per image by stage', lines))


if __name__ == '__main__':
  main()
