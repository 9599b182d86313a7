"""The dataset, network and preprocessing that the flags of a script name.

Shared by train_image_classifier.py and eval_image_classifier.py, whose
flags carry the same names for these choices. Opening the dataset also
reads the first records of its files (datasets/split_check.py): an empty
split, a label outside the classes or an image that does not decode stops
the script there.
"""

import collections
import contextlib

from datasets import dataset_factory
from datasets import image_check
from datasets import split_check
from nets import nets_factory
from nets import quantize
from preprocessing import preprocessing_factory
from training.errors import UsageError
from training.errors import call_for_flag

# num_classes is the network's: the dataset's classes minus labels_offset.
# record_counts: {path: first records read} of the split's files, from the
# check at open; make_dataset takes them instead of reading the files again.
# model_name: the --model_name network_fn was built from.
ModelAndData = collections.namedtuple(
    'ModelAndData', ['dataset', 'num_classes', 'network_fn', 'preprocess_fn',
                     'record_counts', 'model_name'])


def is_video_network(network_fn):
  """Whether network_fn takes clips [batch, frames, height, width, 3]
  (i3d, s3dg) rather than images."""
  return hasattr(network_fn, 'default_num_frames')


def refuse_video_network(model_name, network_fn):
  """Raises a UsageError if --model_name is a video network (i3d, s3dg):
  the scripts feed images, not clips [batch, frames, height, width, 3]."""
  if is_video_network(network_fn):
    raise UsageError(
        '--model_name=%s is a video network: it takes clips [batch, frames, '
        'height, width, 3], and the scripts feed images; build it with '
        'nets.nets_factory.get_network_fn in your own input pipeline, or '
        'choose an image network' % model_name)


def model_and_data(flag_values, is_training, weight_decay=0.0,
                   quantize_delay=None, batch_norm_decay=None):
  """Looks up what --dataset_*, --model_name and --preprocessing_name name.

  Args:
    flag_values: the script's FLAGS (dataset_name, dataset_split_name,
      dataset_dir, labels_offset, max_image_pixels, model_name,
      preprocessing_name, use_grayscale).
    is_training: build the network and preprocessing for training.
    weight_decay: the network's weight decay.
    quantize_delay: None: the float network; else the network
      quantization-aware (nets/quantize.py), fake-quantizing from this
      global step in training (from the start otherwise).
    batch_norm_decay: None: the network's own decay of its batch norm
      moving averages; else this one (--batch_norm_decay).

  Returns:
    A ModelAndData.

  Raises:
    UsageError: an unknown name, a video network (the scripts feed images,
      not clips), missing, corrupt or empty dataset files, a
      label outside the classes, an image that does not decode or is too
      large, or --labels_offset leaving no class; naming the flag.
  """
  f = flag_values
  dataset = call_for_flag(
      '--dataset_name=%s --dataset_split_name=%s' % (f.dataset_name,
                                                     f.dataset_split_name),
      dataset_factory.get_dataset, f.dataset_name, f.dataset_split_name,
      f.dataset_dir)
  num_classes = call_for_flag(
      '--labels_offset=%d' % f.labels_offset,
      split_check.classes_after_offset, dataset, f.labels_offset)
  record_counts = call_for_flag('--dataset_dir=%s' % f.dataset_dir,
                                split_check.check_split, dataset,
                                f.labels_offset, f.max_image_pixels)
  network_fn = call_for_flag(
      '--model_name' if batch_norm_decay is None else
      '--model_name=%s --batch_norm_decay=%s' % (f.model_name,
                                                 batch_norm_decay),
      nets_factory.get_network_fn, f.model_name, num_classes=num_classes,
      weight_decay=weight_decay, is_training=is_training,
      batch_norm_decay=batch_norm_decay)
  refuse_video_network(f.model_name, network_fn)
  if quantize_delay is not None:
    network_fn = quantize.quantized_network_fn(network_fn, is_training,
                                               quantize_delay)
  preprocess_fn = call_for_flag(
      '--preprocessing_name', preprocessing_factory.get_preprocessing,
      f.preprocessing_name or f.model_name, is_training=is_training,
      use_grayscale=f.use_grayscale)
  return ModelAndData(dataset, num_classes, network_fn, preprocess_fn,
                      record_counts, f.model_name)


@contextlib.contextmanager
def reporting_bad_records(dataset, inputs):
  """A label outside the classes or an image that does not decode, met by
  an input pipeline made by inputs.make_dataset, as a UsageError (exit 2)
  naming it and --dataset_dir.

  Args:
    dataset: the slim.dataset.Dataset read.
    inputs: the training.inputs.InputConfig of the pipeline.
  """
  try:
    # Labels inside: their assert fails the pipeline too, and is worded
    # without a scan of the files.
    with image_check.naming_bad_images(dataset, inputs.max_image_pixels), \
        split_check.naming_bad_labels(dataset, inputs.labels_offset):
      yield
  except (split_check.BadLabelError, image_check.BadImageError) as e:
    raise UsageError('--dataset_dir=%s: %s'
                     % (inputs.dataset_dir, e)) from None
