"""Whether a folder already holds a whole conversion, so a rerun can skip it.

Existence is not enough: a 5-byte stray file, a shard cut short by a full
disk or a labels.txt missing classes would pass as converted and fail (or
train wrongly) later. `reuse_if_whole` reads every record of every
existing output, checks the counts and labels.txt, and either keeps the
outputs or says in one log line why they are converted again:

    paths = output_paths(dataset_dir)
    if converted_outputs.reuse_if_whole('digits', dataset_dir, paths,
                                        {'train': 1437, 'test': 360}, 10):
      return paths
    ... convert ...
"""

import os

from absl import logging

from datasets import dataset_utils
from datasets import tfrecord_check
from tf2_compat.slim_compat import tf


def all_paths(paths):
  """Every path of a converter's output_paths dict, shard lists flattened."""
  flat = []
  for value in paths.values():
    flat.extend(value if isinstance(value, list) else [value])
  return flat


def first_problem(paths, splits_to_sizes=None, num_classes=None):
  """None when every output is whole, else one line naming the first fault.

  Args:
    paths: a converter's output_paths dict: per split a path or a list of
      shard paths, 'labels' (labels.txt) and, for datasets of varying size,
      'split_sizes' (split_sizes.txt).
    splits_to_sizes: {split: records expected}; None reads them from
      paths['split_sizes'].
    num_classes: the classes labels.txt must list (ids 0..num_classes-1);
      None accepts any number from 1.
  """
  for path in all_paths(paths):
    if not os.path.exists(path):
      return '%s is missing' % path
  try:
    classes = sorted(dataset_utils.read_label_file(
        os.path.dirname(paths['labels']),
        os.path.basename(paths['labels'])))
    if splits_to_sizes is None:
      splits_to_sizes = dataset_utils.read_split_sizes(
          os.path.dirname(paths['split_sizes']),
          os.path.basename(paths['split_sizes']))
  except (ValueError, UnicodeDecodeError) as e:
    return 'unreadable: %s' % e
  expected_classes = list(range(num_classes or len(classes) or 1))
  if classes != expected_classes:
    return '%s lists the class ids %s, expected 0..%d' % (
        paths['labels'], _ids(classes), expected_classes[-1])
  for split, expected in sorted(splits_to_sizes.items()):
    if split not in paths:
      return '%s names split %r, which this conversion does not write' % (
          paths.get('split_sizes'), split)
    files = paths[split] if isinstance(paths[split], list) else [paths[split]]
    try:
      counts = tfrecord_check.validate_tfrecord_files(
          files, max_records_per_file=None)
    except tf.errors.DataLossError as e:
      return e.message
    if sum(counts.values()) != expected:
      return '%s hold%s %d records, expected %d' % (
          ', '.join(files), '' if len(files) > 1 else 's',
          sum(counts.values()), expected)
  return None


def reuse_if_whole(dataset_name, dataset_dir, paths, splits_to_sizes=None,
                   num_classes=None):
  """Whether to keep the outputs already in dataset_dir instead of
  converting; see first_problem for the arguments.

  Returns:
    True when every output is whole (logged: nothing is converted). False
    when the converter must write them: none exists yet, or (logged, one
    line with the reason) some are missing or faulty.
  """
  if not any(os.path.exists(path) for path in all_paths(paths)):
    return False
  problem = first_problem(paths, splits_to_sizes, num_classes)
  if problem is None:
    logging.info('%s: %s already holds every file of the conversion, each '
                 'record readable and counted; nothing converted',
                 dataset_name, dataset_dir)
    return True
  logging.warning('%s: the files in %s are not a whole conversion (%s); '
                  'converting again', dataset_name, dataset_dir, problem)
  return False


def _ids(classes):
  if len(classes) > 6:
    return '%s..%s (%d ids)' % (classes[0], classes[-1], len(classes))
  return ', '.join(str(c) for c in classes) or 'none'
