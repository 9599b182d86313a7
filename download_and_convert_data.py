r"""Converts datasets to the TF-Slim TFRecord layout, offline.

Nothing is downloaded: each converter reads originals that are already on
disk and, when one is missing, fails with the file name, the URL to fetch
it from and the folder to put it in.

  # The embedded default: scikit-learn's 1,797 UCI digits (no download).
  python download_and_convert_data.py --dataset_name=digits \
      --dataset_dir=/tmp/digits

  # Your own images: SOURCE/<class name>/<image files>.
  python download_and_convert_data.py --dataset_name=folder \
      --source_dir=SOURCE --dataset_dir=/tmp/my_images \
      --num_shards=5 --validation_fraction=0.1

  # From originals fetched by hand into --source_dir (default: dataset_dir).
  python download_and_convert_data.py --dataset_name=mnist \
      --source_dir=/tmp/mnist_gz --dataset_dir=/tmp/mnist
  python download_and_convert_data.py --dataset_name=cifar10 \
      --source_dir=/tmp/cifar_tar --dataset_dir=/tmp/cifar10
  python download_and_convert_data.py --dataset_name=flowers \
      --source_dir=/tmp/flowers_tgz --dataset_dir=/tmp/flowers

Each conversion is skipped when its outputs are already there, whole
(every record read and counted); outputs that are not whole are converted
again, with a log line saying why. Every file is written under a temporary
name, renamed only when complete. Exit status 2 (one 'error:' line per
problem) for bad flags, missing originals or an unwritable --dataset_dir;
1 when writing fails midway (a full disk).
"""

import os
import tempfile

from absl import flags

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# pylint: disable=g-import-not-at-top,wrong-import-position
from datasets import convert_cifar10
from datasets import convert_digits
from datasets import convert_flowers
from datasets import convert_folder
from datasets import convert_mnist
from datasets import imagenet
from tf2_compat.op_errors import op_error_reason
from tf2_compat.slim_compat import tf
from training import cli
from training.errors import Problems
from training.errors import ScriptError
from training.errors import UsageError
# pylint: enable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS

CONVERTIBLE = ('cifar10', 'digits', 'flowers', 'folder', 'mnist')


def convert(dataset_name, dataset_dir, source_dir=None, num_shards=5,
            validation_fraction=0.1, seed=0):
  """Runs one conversion; returns the converter's dict of output paths.

  Raises:
    ValueError: unknown or unconvertible dataset, or missing source_dir for
      'folder'.
    FileNotFoundError: originals missing (names the file, URL and folder).
  """
  if dataset_name == 'imagenet':
    raise ValueError(
        'imagenet cannot be converted here: build the TFRecords with %s'
        % (imagenet.SPEC.convert_hint % {'dataset_dir': dataset_dir}))
  if dataset_name == 'digits':
    return convert_digits.run(dataset_dir)
  if dataset_name == 'folder':
    if not source_dir:
      raise ValueError('--dataset_name=folder needs --source_dir=FOLDER, a '
                       'folder of class sub-folders of images')
    return convert_folder.run(source_dir, dataset_dir, num_shards=num_shards,
                              validation_fraction=validation_fraction,
                              seed=seed)
  converters = {'cifar10': convert_cifar10.run,
                'flowers': convert_flowers.run,
                'mnist': convert_mnist.run}
  if dataset_name not in converters:
    raise ValueError('unknown --dataset_name=%r; convertible datasets: %s'
                     % (dataset_name, ', '.join(CONVERTIBLE)))
  return converters[dataset_name](dataset_dir, source_dir)


def define_flags():
  """Defines the command-line flags.

  Called only when run as a script: importing `convert` (tests, the training
  script) must not define a second --dataset_dir.
  """
  flags.DEFINE_string(
      'dataset_name', None,
      'The dataset to convert: %s.' % ', '.join(CONVERTIBLE))
  flags.DEFINE_string(
      'dataset_dir', None, 'Where the TFRecord files and labels.txt go.')
  flags.DEFINE_string(
      'source_dir', None,
      'Where the originals are: the .gz/.tar.gz files for mnist, cifar10 and '
      'flowers (default: dataset_dir), the folder of class sub-folders for '
      'folder (required).')
  flags.DEFINE_integer(
      'num_shards', 5, 'TFRecord files per split (folder only).')
  flags.DEFINE_float(
      'validation_fraction', 0.1,
      'Share of the images held out as the validation split (folder only).')
  flags.DEFINE_integer(
      'seed', 0, 'Seed of the train/validation split (folder only).')


def check_writable(dataset_dir):
  """dataset_dir is a folder this process can write, or can be created.

  Raises:
    UsageError: naming the path that is in the way.
  """
  existing = os.path.abspath(dataset_dir)
  while not os.path.isdir(existing):
    if os.path.exists(existing):
      raise UsageError('--dataset_dir=%s cannot be created: %s is a file, '
                       'not a folder; give a folder path'
                       % (dataset_dir, existing))
    existing = os.path.dirname(existing)
  try:
    # A real write, not os.access: that says yes to root on a read-only
    # file system.
    tempfile.TemporaryFile(dir=existing).close()
  except OSError as e:
    raise UsageError('--dataset_dir=%s cannot be written: creating a file '
                     'in %s failed (%s); give a folder this user can write'
                     % (dataset_dir, existing, e.strerror or e)) from None


def convert_and_report(f):
  """Checks the flags, converts, and prints where the files are.

  Raises:
    UsageError: bad or missing flags, missing originals, an undecodable
      image or an unwritable --dataset_dir.
    ScriptError: writing failed midway.
  """
  problems = Problems()
  problems.check(bool(f.dataset_name), '--dataset_name is required (one of '
                 '%s)' % ', '.join(CONVERTIBLE))
  if problems.check(bool(f.dataset_dir), '--dataset_dir is required: the '
                    'folder to write the TFRecord files to'):
    problems.attempt(check_writable, f.dataset_dir)
  problems.raise_if_any()
  try:
    paths = convert(f.dataset_name, f.dataset_dir, f.source_dir, f.num_shards,
                    f.validation_fraction, f.seed)
  except (FileNotFoundError, ValueError) as e:
    # The message is the whole story (file, URL, fix): no traceback.
    raise UsageError(str(e)) from None
  except (OSError, tf.errors.OpError) as e:
    raise ScriptError(
        'converting %s into %s failed: %s; no file was left half-written, '
        'and a rerun converts again' % (f.dataset_name, f.dataset_dir,
                                         op_error_reason(e))
    ) from None
  print('%s is ready in %s:' % (f.dataset_name, f.dataset_dir))
  for name, value in sorted(paths.items()):
    for path in value if isinstance(value, list) else [value]:
      print('  %-12s %s' % (name, path))


def main(argv):
  del argv  # Unused.
  cli.run_main(lambda: convert_and_report(FLAGS))


if __name__ == '__main__':
  define_flags()
  cli.run_app(main)
