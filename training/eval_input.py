"""Evaluation input for several clones: every example counted once."""

from tf2_compat.slim_compat import tf


def padded_batches(batches, batch_size):
  """Batches of (images, labels, is_real) that never run out.

  The split's examples come first, each once, marked real; then padding
  examples marked not real, without end. So N clones can each take a batch
  per run until a run holds only padding: every example is counted exactly
  once whatever N, the last partial batch included.
  """
  examples = batches.unbatch().map(
      lambda image, label: (image, label, tf.constant(1, tf.int64)))
  image_spec, label_spec, _ = examples.element_spec
  padding = tf.data.Dataset.from_tensors((
      tf.zeros(image_spec.shape, image_spec.dtype),
      tf.zeros(label_spec.shape, label_spec.dtype),
      tf.constant(0, tf.int64))).repeat()
  return examples.concatenate(padding).batch(batch_size, drop_remainder=True)
