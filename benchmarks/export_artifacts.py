"""Exported artifacts against their checkpoint: accuracy, top-1 agreement,
file size and latency per image.

Two networks on the embedded digits dataset: LeNet trained as `make run`
trains it, and mobilenet_v1_025 trained briefly at 32x32 pixels (batch
norm averages decaying by 0.99: its own 0.9997 would still hold a sixth of
their initial values after 6000 steps); then both again,
quantization-aware (--quantize_delay at half their steps, evaluated and
exported with --quantize: their int8 files take the trained ranges). Each
is exported by export_inference_graph.py as a frozen GraphDef, a
SavedModel and TFLite files (float32, float16, int8 with per-channel
weight scales, and for the float-trained networks int8 with per-tensor
ones), and every artifact runs on the 360 test digits beside the
checkpoint, in this process, one thread each, one image per call for the
latency. The int8 and float32 files are taken apart by kind of bytes
(exporting/tflite_contents.py).

  .venv/bin/python benchmarks/export_artifacts.py
  .venv/bin/python benchmarks/export_artifacts.py --lenet_steps 5 \
      --mobilenet_steps 5 --results_dir /tmp/results   # a quick try
  .venv/bin/python benchmarks/export_artifacts.py --models 'lenet QAT'
      # quantization-aware LeNet alone: export_artifacts_lenet_qat.md

Writes benchmarks/results/export_artifacts.md, with the issue's targets:
the frozen graph, the SavedModel and float TFLite give the checkpoint's
top-1 class on at least 99.9% of the images; int8 is within 1.0 point of
the checkpoint's accuracy (0.5 after quantization-aware training) and at
most 0.3x the float TFLite file.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from absl import flags  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import eval_image_classifier  # pylint: disable=g-import-not-at-top,wrong-import-position
from exporting import artifacts  # pylint: disable=g-import-not-at-top,wrong-import-position
from exporting import split_images  # pylint: disable=g-import-not-at-top,wrong-import-position
from exporting import tflite_contents  # pylint: disable=g-import-not-at-top,wrong-import-position
from exporting import verify  # pylint: disable=g-import-not-at-top,wrong-import-position
import make_run  # pylint: disable=g-import-not-at-top,wrong-import-position
import results  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_LENET_TRAINING = ['--num_clones=2', '--clone_on_cpu', '--batch_size=32',
                   '--optimizer=adam', '--opt_epsilon=1e-8',
                   '--learning_rate=0.001', '--learning_rate_decay_type=fixed']

# The learning rate falls by 0.94 every 2 epochs (90 steps): 0.0004 at step
# 3000, where the batch norm averages (0.99: over the last hundred steps or
# so) describe the final weights.
_MOBILENET_TRAINING = ['--clone_on_cpu', '--batch_size=32', '--optimizer=adam',
                       '--opt_epsilon=1e-8', '--learning_rate=0.003',
                       '--learning_rate_decay_type=exponential',
                       '--weight_decay=0', '--batch_norm_decay=0.99']

# (label, model, image size, flags of every script, training flags besides
# the dataset, model, steps and image size, quantization-aware). MobileNet
# takes LeNet's preprocessing: no random crops of the 8x8 digits, and their
# one channel.
MODELS = (
    ('lenet', 'lenet', 28, [], _LENET_TRAINING, False),
    ('mobilenet_v1_025', 'mobilenet_v1_025', 32,
     ['--preprocessing_name=lenet'], _MOBILENET_TRAINING, False),
    ('lenet QAT', 'lenet', 28, [], _LENET_TRAINING, True),
    ('mobilenet_v1_025 QAT', 'mobilenet_v1_025', 32,
     ['--preprocessing_name=lenet'], _MOBILENET_TRAINING, True),
)

# The int8 file's largest loss of accuracy against its checkpoint, points.
INT8_POINTS = 1.0
QAT_INT8_POINTS = 0.5

# (artifact, the export flags that write it to PATH).
ARTIFACTS = (
    ('frozen graph', ['--output_file=PATH']),
    ('SavedModel', ['--saved_model_dir=PATH']),
    ('TFLite float32', ['--tflite_file=PATH']),
    ('TFLite float16', ['--tflite_file=PATH',
                        '--tflite_quantization=float16']),
    ('TFLite int8', ['--tflite_file=PATH', '--tflite_quantization=int8']),
    ('TFLite int8 per-tensor', ['--tflite_file=PATH',
                                '--tflite_quantization=int8_per_tensor']),
)
# The int8 files held to the targets.
INT8_ARTIFACTS = ('TFLite int8', 'TFLite int8 per-tensor')


def artifacts_of(quantized):
  """The ARTIFACTS exported for a model: a quantization-aware graph's
  weights have one range per tensor, so its int8 file is per-tensor
  already, and int8_per_tensor would write the same file again."""
  return [(artifact, export_flags) for artifact, export_flags in ARTIFACTS
          if not (quantized and artifact == 'TFLite int8 per-tensor')]

# Images timed one at a time for the latency (after one warm-up call).
LATENCY_IMAGES = 100


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--lenet_steps', type=int,
                      default=make_run.MAKE_RUN_STEPS)
  parser.add_argument('--mobilenet_steps', type=int, default=3000)
  parser.add_argument('--models', default=','.join(m[0] for m in MODELS),
                      help='comma-separated labels of MODELS to run')
  parser.add_argument('--work_dir', default=None,
                      help='where the data, checkpoints and artifacts go, '
                      'kept; a rerun reuses its finished trainings '
                      '(default: a new temporary folder)')
  parser.add_argument('--results_dir', default=None,
                      help='folder of export_artifacts.md; default: '
                      'benchmarks/results')
  return parser.parse_args(argv)


def _run(argv):
  """Runs a project script with this Python; raises on failure."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
  process = subprocess.run([sys.executable] + argv, cwd=REPO, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
  if process.returncode:
    raise RuntimeError('%s failed:\n%s' % (' '.join(argv),
                                           process.stdout[-3000:]))


def quantize_flags(quantized, steps):
  """(training flags, evaluation and export flags) of quantization-aware
  training from half the steps on; ([], []) when not `quantized`."""
  if not quantized:
    return [], []
  return ['--quantize_delay=%d' % (steps // 2)], ['--quantize']


def train_and_export(label, model, image_size, common_flags, train_flags,
                     use_flags, steps, digits_dir, work, exports=ARTIFACTS):
  """Trains `model` and exports the artifacts of `exports` (with
  `use_flags` added); returns (train_dir, {artifact: path}). A training
  already finished in `work` is kept (the script trains nothing then); the
  exports are made afresh."""
  train_dir = os.path.join(work, label.replace(' ', '_'))
  _run(['train_image_classifier.py', '--dataset_name=digits',
        '--dataset_dir=%s' % digits_dir, '--model_name=%s' % model,
        '--train_image_size=%d' % image_size,
        '--max_number_of_steps=%d' % steps, '--save_interval_secs=0',
        '--train_dir=%s' % train_dir] + common_flags + train_flags)
  export_dir = os.path.join(work, 'export', label.replace(' ', '_'))
  shutil.rmtree(export_dir, ignore_errors=True)
  paths = {}
  for artifact, export_flags in exports:
    path = os.path.join(export_dir, artifact.replace(' ', '_'))
    paths[artifact] = path + ('.tflite' if 'TFLite' in artifact else '')
    _run(['export_inference_graph.py', '--model_name=%s' % model,
          '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--image_size=%d' % image_size, '--checkpoint_path=%s' % train_dir]
         + common_flags + use_flags
         + [f.replace('PATH', paths[artifact]) for f in export_flags])
  return train_dir, paths


def eval_config(model, image_size, common_flags, train_dir, digits_dir):
  """The EvalConfig of eval_image_classifier.py for the test split."""
  flags.FLAGS.unparse_flags()
  flags.FLAGS(['eval_image_classifier.py', '--dataset_name=digits',
               '--dataset_dir=%s' % digits_dir, '--model_name=%s' % model,
               '--eval_image_size=%d' % image_size,
               '--checkpoint_path=%s' % train_dir] + common_flags)
  return eval_image_classifier.eval_config(flags.FLAGS)


def size_bytes(path):
  """A file's size, or the total of a folder's files."""
  if os.path.isfile(path):
    return os.path.getsize(path)
  return sum(os.path.getsize(os.path.join(root, name))
             for root, _, names in os.walk(path) for name in names)


def checkpoint_bytes(checkpoint):
  folder = os.path.dirname(checkpoint)
  prefix = os.path.basename(checkpoint) + '.'
  return sum(os.path.getsize(os.path.join(folder, name))
             for name in os.listdir(folder) if name.startswith(prefix))


def latency_ms(predictor, images):
  """The median milliseconds of predictor.predict on one image."""
  predictor.predict(images[:1])
  times = []
  for image in images[:LATENCY_IMAGES]:
    start = time.perf_counter()
    predictor.predict(image[None])
    times.append(time.perf_counter() - start)
  return 1000 * float(np.median(times))


def measure(config, paths):
  """[(artifact, accuracy, agreement, bytes, ms per image)], the checkpoint
  first (agreement 1)."""
  images, labels = split_images.read(config.inputs, config.model)
  checkpoint = verify.checkpoint_predictor(config, images.shape[1:],
                                           num_threads=1)
  expected = np.argmax(checkpoint.predict(images), 1)
  rows = [('checkpoint', float(np.mean(expected == labels)), 1.0,
           checkpoint_bytes(config.checkpoint),
           latency_ms(checkpoint, images))]
  for artifact, path in paths.items():
    predictor = artifacts.load(path, num_threads=1)
    classes = np.argmax(predictor.predict(images), 1)
    rows.append((artifact, float(np.mean(classes == labels)),
                 float(np.mean(classes == expected)), size_bytes(path),
                 latency_ms(predictor, images)))
  return rows


def table(measured):
  """The Markdown table of {model: rows of measure}."""
  lines = ['| model | artifact | accuracy | top-1 agreement | size KiB | '
           'size / TFLite float32 | ms per image |',
           '|---|---|---:|---:|---:|---:|---:|']
  for model, rows in measured.items():
    float_size = dict((row[0], row[3]) for row in rows)['TFLite float32']
    for artifact, accuracy, agreement, size, ms in rows:
      lines.append('| %s | %s | %.2f%% | %.2f%% | %.1f | %.2f | %.3f |' % (
          model, artifact, 100 * accuracy, 100 * agreement, size / 1024,
          size / float_size, ms))
  return lines


def _verdict(met):
  return 'met' if met else 'MISSED'


def targets(measured):
  """One line per model and int8 file: the issue's targets, met or
  missed."""
  lines = []
  for model, rows in measured.items():
    allowed = QAT_INT8_POINTS if 'QAT' in model else INT8_POINTS
    by_name = {row[0]: row for row in rows}
    float_agreement = min(by_name[name][2] for name in (
        'frozen graph', 'SavedModel', 'TFLite float32'))
    lines.append('- %s: float artifacts agree on %.2f%% (target >= 99.9%%: '
                 '%s)' % (model, 100 * float_agreement,
                          _verdict(float_agreement >= 0.999)))
    for artifact in INT8_ARTIFACTS:
      if artifact not in by_name:
        continue
      int8 = by_name[artifact]
      points = 100 * (by_name['checkpoint'][1] - int8[1])
      ratio = int8[3] / by_name['TFLite float32'][3]
      lines.append(
          '- %s: %s is %.2f points below the checkpoint (target <= %.1f: '
          '%s) at %.2fx the float file (target <= 0.3x: %s)' % (
              model, artifact, points, allowed, _verdict(points <= allowed),
              ratio, _verdict(ratio <= 0.3)))
  return lines


def contents(paths_by_model):
  """One line per model and TFLite float32 or int8 file: its bytes by
  kind (tflite_contents.Contents.describe)."""
  return ['- %s, %s (%.1f KiB): %s' % (
      model, artifact, os.path.getsize(paths[artifact]) / 1024,
      tflite_contents.read(paths[artifact]).describe())
          for model, paths in paths_by_model.items()
          for artifact in ('TFLite float32',) + INT8_ARTIFACTS
          if artifact in paths]


def main(argv=None):
  args = parse_args(argv)
  work = args.work_dir or tempfile.mkdtemp(prefix='export_artifacts_')
  digits_dir = os.path.join(work, 'digits')
  _run(['download_and_convert_data.py', '--dataset_name=digits',
        '--dataset_dir=%s' % digits_dir])
  steps = {'lenet': args.lenet_steps,
           'mobilenet_v1_025': args.mobilenet_steps}
  measured = {}
  paths_by_model = {}
  notes = []
  chosen = args.models.split(',')
  for label, model, image_size, common_flags, train_flags, quantized in (
      MODELS):
    if label not in chosen:
      continue
    quantize_training, quantize_use = quantize_flags(quantized, steps[model])
    train_flags = train_flags + quantize_training
    train_dir, paths = train_and_export(
        label, model, image_size, common_flags, train_flags, quantize_use,
        steps[model], digits_dir, work, artifacts_of(quantized))
    paths_by_model[label] = paths
    config = eval_config(model, image_size, common_flags + quantize_use,
                         train_dir, digits_dir)
    measured[label] = measure(config, paths)
    notes.append('- %s: %d training steps (%s), images %dx%d%s' % (
        label, steps[model], ' '.join(common_flags + train_flags),
        image_size, image_size,
        '; evaluated and exported with --quantize' if quantized else ''))
  lines = (['Digits test split (360 images); accuracy of each artifact, '
            'the share of images where it gives the checkpoint\'s top-1 '
            'class, its size, and the median latency of one image on one '
            'thread (TensorFlow sessions for the checkpoint, the frozen '
            'graph and the SavedModel; LiteRT for TFLite).', '']
           + table(measured) + ['', '## Targets', ''] + targets(measured)
           + ['', '## What the TFLite files hold', '',
              'Constants (weights and biases) by type; per quantized '
              'tensor a float32 scale and an int64 zero point, per output '
              'channel for per-channel weights and their biases; the rest '
              'is operators, shapes, tensor names and metadata.', '']
           + contents(paths_by_model) + ['', '## Runs', ''] + notes)
  # A run of some models writes a file of its own beside the full table.
  name = ('export_artifacts' if len(measured) == len(MODELS) else
          'export_artifacts_' + '_'.join(measured).replace(' ', '_').lower())
  results.publish(name, 'Exported artifacts against their checkpoint',
                  lines, argv=argv, directory=args.results_dir)


if __name__ == '__main__':
  main()
