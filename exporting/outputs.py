"""Output paths of an export: checked before any work, written whole.

An export refuses a path that exists (it never overwrites an artifact) or
that cannot be written, before the graph is built. The artifact is then
written under a temporary name beside its path and renamed into place only
once complete, so a failure or an interrupted run leaves nothing at the
path a server or a device would pick up.
"""

import contextlib
import os
import shutil


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


@contextlib.contextmanager
def written_whole(path):
  """Yields a temporary sibling of `path` to write (a file or a folder);
  renames it to `path` when the block completes, removes it otherwise.

  Example:
    with written_whole('model.tflite') as partial:
      write(partial)
  """
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  partial = os.path.join(directory, '.%s.partial-%d' % (
      os.path.basename(path), os.getpid()))
  try:
    yield partial
    os.rename(partial, path)
  finally:
    if os.path.isdir(partial):
      shutil.rmtree(partial)
    elif os.path.lexists(partial):
      os.remove(partial)
