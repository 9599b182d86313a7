"""`tf.contrib.data`'s batching helpers that TF 2.x folded into
`tf.data.Dataset.batch`, for TF 1.x programs.

TF 1.x programs pass them to `Dataset.apply`:

  dataset = dataset.apply(
      tf.contrib.data.batch_and_drop_remainder(batch_size))

TF 2.x spells this `dataset.batch(batch_size, drop_remainder=True)`, and
gives the batches a static batch size (TF 1.x's helpers did too). The
contrib names TF 2.x kept under `tf.data.experimental` (`map_and_batch`,
`parallel_interleave`, `shuffle_and_repeat`, ...) are those functions
themselves; see `contrib_stubs`.
"""


def batch_and_drop_remainder(batch_size):
  """A transformation that batches `batch_size` elements and drops a last,
  smaller batch."""
  def transform(dataset):
    return dataset.batch(batch_size, drop_remainder=True)
  return transform


def padded_batch_and_drop_remainder(batch_size, padded_shapes,
                                    padding_values=None):
  """A transformation that pads and batches `batch_size` elements and drops
  a last, smaller batch."""
  def transform(dataset):
    return dataset.padded_batch(batch_size, padded_shapes, padding_values,
                                drop_remainder=True)
  return transform
