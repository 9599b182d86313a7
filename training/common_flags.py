"""Flags that train_image_classifier.py and eval_image_classifier.py share.

Same names, defaults and meanings in both scripts (those of upstream Slim):
what to read (dataset), what to build (network, preprocessing) and where to
run it. Importing this module defines them once; each script also calls
`define_split_and_batch` with its defaults.
"""

from absl import flags

from datasets import image_check
from training import flag_checks

flags.DEFINE_string('master', '', 'The address of the TensorFlow master.')
flags.DEFINE_integer('num_clones', 1, 'Number of model clones to deploy.')
flags.DEFINE_boolean('clone_on_cpu', False, 'Use CPUs to deploy clones.')
flags.DEFINE_string('dataset_name', 'imagenet', 'The name of the dataset.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the dataset files.')
flags.DEFINE_integer('labels_offset', 0,
                     'Subtracted from the labels (1 for imagenet models '
                     'trained without the background class).')
flags.DEFINE_string('model_name', 'inception_v3', 'The network.')
flags.DEFINE_string('preprocessing_name', None,
                    'Preprocessing; None: the one of --model_name.')
flags.DEFINE_bool('use_grayscale', False,
                  'Convert images to grayscale before preprocessing.')
flags.DEFINE_integer('num_preprocessing_threads', 4,
                     'Number of parallel decode/preprocess calls.')
flags.DEFINE_integer(
    'max_image_pixels', image_check.DEFAULT_MAX_IMAGE_PIXELS,
    'The largest image decoded, in pixels (height x width, read from its '
    'header): a larger one stops the script naming its record, before it '
    'takes memory. The default is 8192 x 8192.')
flags.DEFINE_float('moving_average_decay', None,
                   'Decay of the exponential moving average of the model '
                   'variables (training keeps it; evaluation reads it); '
                   'None: no moving average.')
flags.DEFINE_boolean('slurm', False,
                     'Run as one task of a srun job step: training takes its '
                     'cluster from Slurm, evaluation runs on task 0 only '
                     '(docs/clusters.md#slurm).')


def define_split_and_batch(dataset_split_name, batch_size):
  """Defines --dataset_split_name and --batch_size, whose defaults differ
  by script: upstream's 'train' and 32 to train, 'test' and 100 to
  evaluate."""
  flags.DEFINE_string('dataset_split_name', dataset_split_name,
                      'The split to read.')
  flag_checks.DEFINE_whole_number('batch_size', batch_size,
                                  'Examples per clone per step.',
                                  flag_checks.SHARED_RANGES)


FLAGS = flags.FLAGS
