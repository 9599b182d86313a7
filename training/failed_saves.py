"""What a failed checkpoint write left behind, and whether a restart mends it.

TensorFlow 2.21's Saver writes each file of a checkpoint under a temporary
name and renames it once whole:

  model.ckpt-N.data-00000-of-00001.tempstate<digits>   the tensors
  model.ckpt-N.index.tempstate<digits>                 their index
  model.ckpt-N_temp/part-...                           the same, sharded
  model.ckpt-N.meta.tmp<32 hex digits>                 the graph
  checkpoint.tmp<32 hex digits>                        the list of checkpoints

A write that fails part way leaves its temporary file: on a full disk each
failed save kept one data file as large as the space that was left, for
good. SaveAttempt removes those of one save, and only those: names of that
save's step that were not in the directory before it began.

A write refused because the disk is full, over quota or read-only, or the
file is larger than the file system or the process's limit (ulimit -f)
allows, is refused again after a restart: `is_lasting` tells those apart.
"""

import errno
import os
import re
import shutil

from tf2_compat.slim_compat import tf

# The operating system's reasons for a write that a restart would meet
# again, as TensorFlow ends its messages with them.
LASTING_REASONS = tuple(os.strerror(code) for code in (
    errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG))


class SaveAttempt:
  """One save of the checkpoint of `step` to `save_path`-`step`.

  Args:
    save_path: the Saver's prefix, e.g. train_dir/model.ckpt.
    step: the global step the checkpoint is named after.
    latest_filename: the name of the file listing the checkpoints.
  """

  def __init__(self, save_path, step, latest_filename='checkpoint'):
    self._directory = os.path.dirname(save_path)
    prefix = re.escape('%s-%d' % (os.path.basename(save_path), step))
    self._temporary = re.compile(
        r'%s(\.data-\d+-of-\d+\.tempstate\d+|\.index\.tempstate\d+|_temp'
        r'|\.meta\.tmp[0-9a-f]{32})|%s\.tmp[0-9a-f]{32}'
        % (prefix, re.escape(latest_filename)))
    self._before = self._names()

  def _names(self):
    try:
      return set(os.listdir(self._directory))
    except OSError:
      return set()

  def remove_temporary_files(self):
    """Removes the temporary files (and a sharded save's folder) that this
    save created; returns their names, sorted. A file that cannot be
    removed is left: the write's own error says more."""
    removed = []
    for name in sorted(self._names() - self._before):
      if not self._temporary.fullmatch(name):
        continue
      path = os.path.join(self._directory, name)
      try:
        if os.path.isdir(path) and not os.path.islink(path):
          shutil.rmtree(path)
        else:
          os.unlink(path)
      except OSError:
        continue
      removed.append(name)
    return removed


def write_error_reason(error):
  """The operating system's reason for a failed write: 'No space left on
  device' from TensorFlow's multi-line 'Graph execution error: ...'."""
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  if not isinstance(error, tf.errors.OpError):
    return str(error)
  # Node lines ('[[...]]') and TF's advice on memory ('Hint: ...', given
  # with every RESOURCE_EXHAUSTED, a full disk's code) come after it.
  lines = [line.strip() for line in error.message.splitlines()
           if line.strip() and not line.strip().startswith(('[[', 'Hint:'))]
  # The reason ends the line naming the file.
  return lines[-1].rsplit('; ', 1)[-1] if lines else type(error).__name__


def is_lasting(reason):
  """Whether a write that failed for `reason` (of write_error_reason) would
  fail again after a restart."""
  return reason in LASTING_REASONS
