"""The input pipeline's position, saved with every checkpoint.

A run that is stopped and resumed should consume exactly the batches an
uninterrupted run would have: the epoch is neither restarted nor skipped.
`PositionedBatches` reads the batches from a tf.data iterator whose state
(which files and records were read, the shuffle buffer, its random state)
is a saveable object of the graph, so tf.train.Saver writes it into every
checkpoint and restores it with the weights.

Random augmentation (crops, flips, colour distortion) is not part of that
state: its random ops keep their generator inside the op, out of tf.data's
reach, so a resumed run reads the same images in the same order but draws
their augmentation afresh from the op seeds.

That state is only meaningful for the same input layout: the dataset and
split, the batch size, this replica's shard of the files, the shuffle
seed, the image size and preprocessing. The layout is saved beside it (the
string variable `input_position/layout`); when a resumed run's layout
differs (another --batch_size, another number of workers), the model and
optimizer are restored, the input position is not, a warning says so, and
the data order starts over.

Nor is it meaningful for other files: it holds which file and which byte
of it comes next. The files read are saved too (`input_position/files`:
their number, total size and folder, see `files_read`); when a resumed
run reads other files (another --dataset_dir, or files converted again),
the position belongs to the old ones: the new files are read from their
beginning, and a warning says so. A checkpoint saved before the files
were saved restores its position as before.

With several clones, the clones take batches from the one iterator in
whatever order their ops run: every batch is used once, but which clone
gets which varies. With several workers only the chief saves, so only the
chief's shard resumes exactly; the others start their shard over.
"""

import os

from tensorflow.python.training.saving import saveable_object_util

from tf2_compat import quiet
from tf2_compat.slim_compat import tf

LAYOUT_NAME = 'input_position/layout'
FILES_NAME = 'input_position/files'


def layout(inputs, num_shards, shard_index):
  """The input layout of a run, as a readable string.

  Args:
    inputs: the run's training.inputs.InputConfig.
    num_shards: the replicas reading disjoint shards of the files.
    shard_index: this replica's shard.
  """
  return ('dataset=%s/%s batch_size=%d shard=%d/%d seed=%s image_size=%d '
          'preprocessing=%s labels_offset=%d' % (
              inputs.dataset_name, inputs.dataset_split_name,
              inputs.batch_size, shard_index, num_shards, inputs.shuffle_seed,
              inputs.image_size, inputs.preprocessing_name,
              inputs.labels_offset))


def files_read(paths):
  """The files a run reads, as a readable string, e.g. '2 files, 118302
  bytes, in /data/digits'. The size tells files converted again in the
  same folder; it is left out for remote files (gs://...), where a stat of
  each of 1,024 files would delay the start.

  Args:
    paths: the paths of the split's files (dataset.data_sources).
  """
  paths = sorted(paths)
  remote = any('://' in path for path in paths)
  folders = sorted({os.path.dirname(path if remote
                                    else os.path.realpath(path))
                    for path in paths})
  size = ('' if remote else ', %d bytes'
          % sum(os.path.getsize(path) for path in paths))
  return '%d file%s%s, in %s' % (len(paths), '' if len(paths) == 1 else 's',
                                 size, ', '.join(folders))


def _saved_text(reader, name):
  """The string variable `name` of a checkpoint, or None."""
  if not reader.has_tensor(name):
    return None
  text = reader.get_tensor(name)
  return text.decode() if isinstance(text, bytes) else text


class PositionedBatches:
  """Batches from a dataset whose position is saved in checkpoints.

  Build it in the graph before the Saver; `next_batch()` returns a new
  get_next op per call (one per clone).

  Args:
    dataset: the tf.data.Dataset of batches.
    layout_text: what `layout` returned for this run.
    files_text: what `files_read` returned for the files it reads.
  """

  def __init__(self, dataset, layout_text, files_text):
    self._iterator = tf.data.make_one_shot_iterator(dataset)
    # Deprecated for TF2's tf.train.Checkpoint; this is tf.compat.v1.Saver.
    with quiet.deprecation_silenced():
      # 'ignore': the random ops' generators (external state) are left out
      # of the position instead of failing the save; see the module doc.
      self.saveable = tf.data.experimental.make_saveable_from_iterator(
          self._iterator, external_state_policy='ignore')
    tf.add_to_collection(tf.GraphKeys.SAVEABLE_OBJECTS, self.saveable)
    self.layout = layout_text
    # Local: initialised to this run's layout whatever is restored; saved
    # by name through `saver()`.
    self.layout_variable = tf.Variable(
        layout_text, trainable=False, name=LAYOUT_NAME,
        collections=[tf.GraphKeys.LOCAL_VARIABLES])
    self.files = files_text
    self.files_variable = tf.Variable(
        files_text, trainable=False, name=FILES_NAME,
        collections=[tf.GraphKeys.LOCAL_VARIABLES])

  def next_batch(self):
    return self._iterator.get_next()

  def _saved(self):
    """The model, the input position and its layout: what every checkpoint
    holds."""
    return tf.global_variables() + tf.get_collection(
        tf.GraphKeys.SAVEABLE_OBJECTS) + [self.layout_variable]

  def saver(self, saved_instead=None, **kwargs):
    """A tf.train.Saver of the model, the input position, its layout and
    the files it is in.

    Args:
      saved_instead: {checkpoint name: variable} saved under those names in
        place of the variables named so (training/last_step.StepSnapshot).
      **kwargs: tf.train.Saver's.
    """
    saved = self._saved() + [self.files_variable]
    if saved_instead:
      saved = saveable_object_util.op_list_to_dict(saved)
      saved.update(saved_instead)
    return tf.train.Saver(saved, **kwargs)

  def restoring_saver(self, checkpoint_dir, log_fn=None):
    """A Saver for resuming from checkpoint_dir's latest checkpoint.

    Returns:
      None (restore everything, input position included) when there is no
      checkpoint, or its layout and files are this run's; a Saver of
      everything but the files it was in for a checkpoint saved before
      they were (its position is restored); otherwise a Saver of
      everything but the input position.
    """
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest is None:
      return None
    reader = tf.train.load_checkpoint(latest)
    saved_layout = _saved_text(reader, LAYOUT_NAME)
    saved_files = _saved_text(reader, FILES_NAME)
    if saved_files is None and saved_layout == self.layout:
      # Saved before checkpoints named their files: the position is
      # restored, the files variable keeps this run's value.
      return tf.train.Saver(self._saved(), max_to_keep=None)
    if saved_files not in (None, self.files):
      saved, this_run, then = (saved_files, self.files,
                               'the new files are read from their beginning')
    elif saved_layout != self.layout:
      saved, this_run, then = (saved_layout or 'without a saved position',
                               self.layout, 'the data order starts over')
    else:
      return None
    (log_fn or tf.logging.warning)(
        'input position not restored: %s was saved reading %s; this run '
        'reads %s. The model and optimizer are restored; %s.', latest,
        saved, this_run, then)
    return tf.train.Saver(tf.global_variables(), max_to_keep=None)
