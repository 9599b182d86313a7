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

The file can also be lost (deleted, or garbled by a crash or an editor)
while the checkpoints beside it are whole. TensorFlow then starts from step
0 and its saves overwrite the old steps. `resume_candidates` lists the
checkpoints a run may resume from, from the files when the index is gone,
and `rewrite` writes a new index; training/resume_check.py decides which.
"""

import os
import re

from google.protobuf import text_format
from tensorflow.python.training import checkpoint_state_pb2

from tf2_compat import quiet
from tf2_compat.slim_compat import tf
from training.errors import UsageError

INDEX_NAME = 'checkpoint'
# What the checkpoint saver hook names its checkpoints: model.ckpt-<step>.
_SAVED_PREFIX = re.compile(r'^model\.ckpt-(\d+)$')


def step_of(prefix):
  """The global step in a checkpoint prefix's name (.../model.ckpt-20: 20),
  None when its name has none."""
  found = re.search(r'-(\d+)$', os.path.basename(prefix))
  return int(found.group(1)) if found else None


def read(train_dir):
  """train_dir's `checkpoint` file, parsed without TensorFlow's warnings.

  Returns:
    (state, None) with paths as tf.train.get_checkpoint_state gives them;
    or (None, why there is none): 'missing', or 'garbled (...)'.
  """
  path = os.path.join(train_dir, INDEX_NAME)
  if not tf.io.gfile.exists(path):
    return None, 'missing'
  state = checkpoint_state_pb2.CheckpointState()
  try:
    text_format.Merge(tf.io.gfile.GFile(path, 'rb').read().decode(), state)
  except (text_format.ParseError, UnicodeDecodeError, tf.errors.OpError) as e:
    return None, 'garbled (%s)' % str(e).splitlines()[0]
  if not state.model_checkpoint_path:
    return None, 'garbled (it names no checkpoint)'
  return tf.train.get_checkpoint_state(train_dir), None


def _listed(state):
  paths = list(state.all_model_checkpoint_paths)
  if state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  return paths


def _foreign(train_dir):
  """(state, paths listed in another directory) of train_dir's file."""
  state, _ = read(train_dir)
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
  kept = [path for path in _listed(state) if _has_copy(train_dir, path)]
  latest = os.path.basename(state.model_checkpoint_path)
  # check() refused a latest checkpoint without a copy here.
  rewrite(train_dir, latest, kept)
  original = os.path.dirname(foreign[0])
  (log_fn or tf.logging.warning)(
      '%s was copied from %s: its checkpoint file now names the %d '
      'checkpoint(s) here, latest %s, and nothing in %s is read or deleted',
      train_dir, original, len(kept), latest, original)
  return original


def _saved_here(train_dir):
  """The model.ckpt-N prefixes in train_dir that have an .index file."""
  if not tf.io.gfile.isdir(train_dir):
    return []
  names = (name[:-len('.index')] for name in tf.io.gfile.listdir(train_dir)
           if name.endswith('.index'))
  return [os.path.join(train_dir, name) for name in names
          if _SAVED_PREFIX.match(name)]


def resume_candidates(train_dir):
  """The checkpoints a run in train_dir may resume from, newest first.

  With a readable index: the checkpoints it lists (train_dir's own copies),
  plus older model.ckpt-N files it no longer lists. Files newer than its
  latest are left out: the index names a checkpoint once its files are
  complete, so they come from a save cut short. Without one: every
  model.ckpt-N in train_dir.

  Returns:
    (prefixes in train_dir, newest first; None or why the index is not
    readable, as `read` says).
  """
  state, problem = read(train_dir)
  here = _saved_here(train_dir)
  if state is None:
    candidates = set(here)
  else:
    here_dir = os.path.realpath(train_dir)
    # Paths in another directory stand for their copies here (see adopt).
    candidates = {os.path.join(train_dir, os.path.basename(path))
                  for path in _listed(state)
                  if os.path.realpath(os.path.dirname(path)) == here_dir
                  or _has_copy(train_dir, path)}
    latest_step = step_of(state.model_checkpoint_path)
    if latest_step is not None:
      candidates.update(p for p in here if step_of(p) <= latest_step)
  return sorted(candidates, key=lambda p: (step_of(p) or 0, p),
                reverse=True), problem


def rewrite(train_dir, latest, others):
  """Makes train_dir's `checkpoint` file name `latest` and `others`
  (prefixes in train_dir), relative, oldest first; returns their names."""
  names = sorted({os.path.basename(p) for p in others} - {
      os.path.basename(latest)}, key=lambda n: (step_of(n) or 0, n))
  names.append(os.path.basename(latest))
  # Deprecated for TF2's CheckpointManager; the Saver still reads this file.
  with quiet.deprecation_silenced():
    tf.train.update_checkpoint_state(train_dir, names[-1],
                                     all_model_checkpoint_paths=names)
  return names


def free_name(directory, name, file_suffix):
  """directory/name, or name.2, name.3 ... when a file `name + file_suffix`
  (a glob) is taken there."""
  target, n = os.path.join(directory, name), 1
  while tf.io.gfile.glob(target + file_suffix):
    n += 1
    target = os.path.join(directory, '%s.%d' % (name, n))
  return target


def move_aside(prefix, directory):
  """Moves checkpoint `prefix`'s files into `directory` (created if
  needed), under a prefix no earlier checkpoint there has, so that nothing
  is overwritten or lost; returns the new prefix, None when it has no
  files."""
  files = tf.io.gfile.glob(prefix + '.*')
  if not files:
    return None
  tf.io.gfile.makedirs(directory)
  target = free_name(directory, os.path.basename(prefix), '.*')
  for path in files:
    tf.io.gfile.rename(path, target + path[len(prefix):])
  return target
