"""The dataset, network and preprocessing that the flags of a script name.

Shared by train_image_classifier.py and eval_image_classifier.py, whose
flags carry the same names for these choices.
"""

import collections

from datasets import dataset_factory
from nets import nets_factory
from preprocessing import preprocessing_factory
from training.errors import call_for_flag

# num_classes is the network's: the dataset's classes minus labels_offset.
ModelAndData = collections.namedtuple(
    'ModelAndData', ['dataset', 'num_classes', 'network_fn', 'preprocess_fn'])


def model_and_data(flag_values, is_training, weight_decay=0.0):
  """Looks up what --dataset_*, --model_name and --preprocessing_name name.

  Args:
    flag_values: the script's FLAGS (dataset_name, dataset_split_name,
      dataset_dir, labels_offset, model_name, preprocessing_name,
      use_grayscale).
    is_training: build the network and preprocessing for training.
    weight_decay: the network's weight decay.

  Returns:
    A ModelAndData.

  Raises:
    UsageError: an unknown name or missing dataset files, naming the flag.
  """
  f = flag_values
  dataset = call_for_flag(
      '--dataset_name=%s --dataset_split_name=%s' % (f.dataset_name,
                                                     f.dataset_split_name),
      dataset_factory.get_dataset, f.dataset_name, f.dataset_split_name,
      f.dataset_dir)
  num_classes = dataset.num_classes - f.labels_offset
  network_fn = call_for_flag('--model_name', nets_factory.get_network_fn,
                             f.model_name, num_classes=num_classes,
                             weight_decay=weight_decay,
                             is_training=is_training)
  preprocess_fn = call_for_flag(
      '--preprocessing_name', preprocessing_factory.get_preprocessing,
      f.preprocessing_name or f.model_name, is_training=is_training,
      use_grayscale=f.use_grayscale)
  return ModelAndData(dataset, num_classes, network_fn, preprocess_fn)
