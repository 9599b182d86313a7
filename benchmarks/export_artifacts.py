"""Exported artifacts against their checkpoint: accuracy, top-1 agreement,
file size and latency per image.

Two networks on the embedded digits dataset: LeNet trained as `make run`
trains it, and mobilenet_v1_025 trained briefly at 32x32 pixels; then
LeNet again, quantization-aware (--quantize_delay at half its steps,
evaluated and exported with --quantize: its int8 file takes the trained
ranges). Each is exported by export_inference_graph.py as a frozen
GraphDef, a SavedModel and TFLite files (float32, float16, int8), and every
artifact runs on the 360 test digits beside the checkpoint, in this
process, one thread each, one image per call for the latency.

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
from exporting import verify  # pylint: disable=g-import-not-at-top,wrong-import-position
import make_run  # pylint: disable=g-import-not-at-top,wrong-import-position
import results  # pylint: disable=g-import-not-at-top,wrong-import-position

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_LENET_TRAINING = ['--num_clones=2', '--clone_on_cpu', '--batch_size=32',
                   '--optimizer=adam', '--opt_epsilon=1e-8',
                   '--learning_rate=0.001', '--learning_rate_decay_type=fixed']

# (label, model, image size, flags of every script, training flags besides
# the dataset, model, steps and image size, quantization-aware). MobileNet
# takes LeNet's preprocessing: no random crops of the 8x8 digits, and their
# one channel.
MODELS = (
    ('lenet', 'lenet', 28, [], _LENET_TRAINING, False),
    ('mobilenet_v1_025', 'mobilenet_v1_025', 32,
     ['--preprocessing_name=lenet'],
     ['--clone_on_cpu', '--batch_size=32', '--optimizer=adam',
      '--opt_epsilon=1e-8', '--learning_rate=0.003',
      '--learning_rate_decay_type=fixed', '--weight_decay=0'], False),
    ('lenet QAT', 'lenet', 28, [], _LENET_TRAINING, True),
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
)

# Images timed one at a time for the latency (after one warm-up call).
LATENCY_IMAGES = 100


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--lenet_steps', type=int,
                      default=make_run.MAKE_RUN_STEPS)
  parser.add_argument('--mobilenet_steps', type=int, default=6000,
                      help='its batch norm averages (decay 0.9997) keep '
                      '0.9997^steps of their initial values: 17%% at 6000')
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
                     use_flags, steps, digits_dir, work):
  """Trains `model` and exports every artifact (with `use_flags` added);
  returns (train_dir, {artifact: path}). A training already finished in
  `work` is kept (the script trains nothing then); the exports are made
  afresh."""
  train_dir = os.path.join(work, label.replace(' ', '_'))
  _run(['train_image_classifier.py', '--dataset_name=digits',
        '--dataset_dir=%s' % digits_dir, '--model_name=%s' % model,
        '--train_image_size=%d' % image_size,
        '--max_number_of_steps=%d' % steps, '--save_interval_secs=0',
        '--train_dir=%s' % train_dir] + common_flags + train_flags)
  export_dir = os.path.join(work, 'export', label.replace(' ', '_'))
  shutil.rmtree(export_dir, ignore_errors=True)
  paths = {}
  for artifact, export_flags in ARTIFACTS:
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


def targets(measured):
  """One line per model: the issue's targets, met or missed."""
  lines = []
  for model, rows in measured.items():
    allowed = QAT_INT8_POINTS if 'QAT' in model else INT8_POINTS
    by_name = {row[0]: row for row in rows}
    float_agreement = min(by_name[name][2] for name in (
        'frozen graph', 'SavedModel', 'TFLite float32'))
    int8 = by_name['TFLite int8']
    points = 100 * (by_name['checkpoint'][1] - int8[1])
    ratio = int8[3] / by_name['TFLite float32'][3]
    lines.append(
        '- %s: float artifacts agree on %.2f%% (target >= 99.9%%: %s); int8 '
        'is %.2f points below the checkpoint (target <= %.1f: %s) at %.2fx '
        'the float file (target <= 0.3x: %s)' % (
            model, 100 * float_agreement,
            'met' if float_agreement >= 0.999 else 'MISSED', points,
            allowed, 'met' if points <= allowed else 'MISSED', ratio,
            'met' if ratio <= 0.3 else 'MISSED'))
  return lines


def main(argv=None):
  args = parse_args(argv)
  work = args.work_dir or tempfile.mkdtemp(prefix='export_artifacts_')
  digits_dir = os.path.join(work, 'digits')
  _run(['download_and_convert_data.py', '--dataset_name=digits',
        '--dataset_dir=%s' % digits_dir])
  steps = {'lenet': args.lenet_steps,
           'mobilenet_v1_025': args.mobilenet_steps}
  measured = {}
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
        steps[model], digits_dir, work)
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
           + ['', '## Runs', ''] + notes)
  # A run of some models writes a file of its own beside the full table.
  name = ('export_artifacts' if len(measured) == len(MODELS) else
          'export_artifacts_' + '_'.join(measured).replace(' ', '_').lower())
  results.publish(name, 'Exported artifacts against their checkpoint',
                  lines, argv=argv, directory=args.results_dir)


if __name__ == '__main__':
  main()
