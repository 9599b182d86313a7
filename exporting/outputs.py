"""Output paths of an export: checked before any work, written whole.

An export refuses a path that exists (it never overwrites an artifact) or
that cannot be written, before the graph is built. The artifact is then
written under a temporary name beside its path and renamed into place only
once complete, so a failure or an interrupted run leaves nothing at the
path a server or a device would pick up.

A write refused for a reason a second run would meet again (a full or
read-only disk, over quota, a file too large: training's classification,
training/failed_saves.py) becomes a LastingFailure naming the path and
the fix, after the partial artifact and the folders made for it are gone.
"""

import contextlib
import os
import shutil

from tf2_compat.slim_compat import tf
from training import failed_saves
from training.errors import LastingFailure


def problem(flag, path):
  """Why --flag=path cannot take a new artifact, or None when it can.

  The path must not exist, and its nearest existing ancestor must be a
  writable directory (missing parents are created on writing).
  """
  if os.path.lexists(path):
    return '--%s=%s exists; remove it or give another path' % (flag, path)
  ancestor = os.path.dirname(os.path.abspath(path))
  while not os.path.lexists(ancestor):
    ancestor = os.path.dirname(ancestor)
  if not os.path.isdir(ancestor):
    return '--%s=%s cannot be written: %s is not a directory' % (
        flag, path, ancestor)
  if not os.access(ancestor, os.W_OK | os.X_OK):
    return '--%s=%s cannot be written: directory %s is not writable' % (
        flag, path, ancestor)
  return None


def _missing_folders(directory):
  """The folders os.makedirs(directory) would create, deepest first."""
  missing = []
  while not os.path.lexists(directory):
    missing.append(directory)
    directory = os.path.dirname(directory)
  return missing


def _remove(path):
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path)
  elif os.path.lexists(path):
    os.remove(path)


@contextlib.contextmanager
def written_whole(flag, path):
  """Yields a temporary sibling of --flag=path to write (a file or a
  folder); renames it to `path` when the block completes. Otherwise
  removes it, and the folders made for it.

  Example:
    with written_whole('tflite_file', 'model.tflite') as partial:
      write(partial)

  Raises:
    LastingFailure: the write failed for a reason a second run would meet
      again (failed_saves.is_lasting): the disk is full or read-only.
  """
  directory = os.path.dirname(os.path.abspath(path))
  made = _missing_folders(directory)
  partial = os.path.join(directory, '.%s.partial-%d' % (
      os.path.basename(path), os.getpid()))
  try:
    os.makedirs(directory, exist_ok=True)
    yield partial
    os.rename(partial, path)
  except (OSError, tf.errors.OpError) as error:
    reason = failed_saves.write_error_reason(error)
    if not failed_saves.is_lasting(reason):
      raise
    raise LastingFailure(
        'writing --%s=%s failed (%s); nothing was left of it. Free space or '
        'give a path on a writable disk with room, then export again'
        % (flag, path, reason)) from None
  finally:
    _remove(partial)
    if not os.path.lexists(path):
      for folder in made:
        try:
          os.rmdir(folder)
        except OSError:  # Not empty: another artifact's, left as it is.
          break
