"""A train_dir's `checkpoint` file, made to name the checkpoints beside it.

tf.train.Saver records absolute paths in the `checkpoint` file by default.
A train_dir copied or moved elsewhere (another disk, another machine, a
copy to branch an experiment from) then still names the checkpoints of the
original directory: a run in the copy restores the original's latest
checkpoint, and once it has saved `max_to_keep` checkpoints of its own it
deletes the original's files too, since SessionManager hands the listed
paths to the Saver as the ones to rotate out.

This script saves relative paths (`save_relative_paths=True`), so a
train_dir it wrote can be copied as it is. For a train_dir written with
absolute paths (by upstream Slim, or by an older version):

  * `check(train_dir)`, part of the run config's validation: the listed
    checkpoints that live in another directory must have a copy in
    train_dir; otherwise the run is refused (exit 2) before anything is
    written.
  * `adopt(train_dir)`, by the chief before training: rewrites the file to
    name train_dir's own copies, relative, and logs it.
"""

import os

from deployment.slim_compat import tf
from training.errors import UsageError


def _listed(state):
  paths = list(state.all_model_checkpoint_paths)
  if state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  return paths


def _foreign(train_dir):
  """(state, paths listed in another directory) of train_dir's file."""
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except tf.errors.OpError:
    return None, []
  if state is None:
    return None, []
  here = os.path.realpath(train_dir)
  foreign = [path for path in _listed(state) if os.path.isabs(path) and
             os.path.realpath(os.path.dirname(path)) != here]
  return state, foreign


def _has_copy(train_dir, path):
  return tf.io.gfile.exists(
      os.path.join(train_dir, os.path.basename(path)) + '.index')


def check(train_dir):
  """Raises UsageError when train_dir's `checkpoint` file names checkpoints
  in another directory that have no copy in train_dir."""
  state, foreign = _foreign(train_dir)
  if state is None or not foreign:
    return
  latest = state.model_checkpoint_path
  if latest in foreign and not _has_copy(train_dir, latest):
    raise UsageError(
        '--train_dir=%s: its checkpoint file names %s, in another '
        'directory and not in this one (a train_dir copied without its '
        'checkpoints?). Training here would restore it and later delete '
        "it. Copy that checkpoint's files here, or start from it with "
        '--checkpoint_path=%s and an empty --train_dir'
        % (train_dir, latest, latest))


def adopt(train_dir, log_fn=None):
  """Makes train_dir's `checkpoint` file name train_dir's own copies of the
  checkpoints it lists (relative paths); a no-op when it already does.

  Returns:
    The directory the file named before, or None when nothing changed.
  """
  state, foreign = _foreign(train_dir)
  if state is None or not foreign:
    return None
  kept = [os.path.basename(path) for path in _listed(state)
          if _has_copy(train_dir, path)]
  latest = os.path.basename(state.model_checkpoint_path)
  # check() refused a latest checkpoint without a copy here.
  tf.train.update_checkpoint_state(train_dir, latest,
                                   all_model_checkpoint_paths=kept)
  original = os.path.dirname(foreign[0])
  (log_fn or tf.logging.warning)(
      '%s was copied from %s: its checkpoint file now names the %d '
      'checkpoint(s) here, latest %s, and nothing in %s is read or deleted',
      train_dir, original, len(kept), latest, original)
  return original
