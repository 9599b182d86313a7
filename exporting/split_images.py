"""A split's images as numpy arrays, read by the project's input pipeline.

The int8 calibration of a TFLite export and the evaluation of an exported
model both need preprocessed images outside any graph: the images are read
and preprocessed exactly as eval_image_classifier.py reads them (no
shuffling, eval preprocessing), so an artifact and its checkpoint see the
same pixels.
"""

import numpy as np

from datasets import tfrecord_check
from tf2_compat.slim_compat import tf
from training import inputs as inputs_lib
from training import lookup


def read(inputs, model, limit=None):
  """The first `limit` images of a split (all when None) and their labels.

  Args:
    inputs: the training.inputs.InputConfig of the split.
    model: its lookup.ModelAndData.
    limit: how many images at most.

  Returns:
    (images float32 [n, size, size, channels], labels int64 [n]).

  Raises:
    UsageError: missing or corrupt files, a bad record.
  """
  images, labels = [], []
  count = 0
  with tf.Graph().as_default():
    batches = inputs_lib.make_dataset(inputs, model, is_training=False,
                                      num_epochs=1)
    next_batch = tf.data.make_one_shot_iterator(batches).get_next()
    with tfrecord_check.naming_corrupt_files(
        model.dataset.data_sources), lookup.reporting_bad_records(
            model.dataset, inputs), tf.Session() as session:
      while limit is None or count < limit:
        try:
          batch_images, batch_labels = session.run(next_batch)
        except tf.errors.OutOfRangeError:
          break
        images.append(batch_images)
        labels.append(batch_labels)
        count += len(batch_labels)
  if not images:
    return np.zeros([0], np.float32), np.zeros([0], np.int64)
  return (np.concatenate(images)[:limit],
          np.concatenate(labels)[:limit].astype(np.int64))
