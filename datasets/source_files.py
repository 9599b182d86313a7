"""Finds the original (downloaded) files a converter needs, never fetching.

The converters run offline. When an original is missing, the error says
which file to fetch, from which URL, and where to put it.
"""

import os


class MissingSourceError(FileNotFoundError):
  """An original dataset file the converter needs is not on disk."""


def require_source_files(dataset_name, source_dir, filenames_to_urls):
  """Returns {filename: path} of the originals, all found in source_dir.

  Args:
    dataset_name: for the message, e.g. 'mnist'.
    source_dir: where the originals should be.
    filenames_to_urls: {filename: the URL it is published at}.

  Raises:
    MissingSourceError: one or more files are missing; the message lists
      each with its URL and the folder to put it in.
  """
  paths = {name: os.path.join(source_dir, name) for name in filenames_to_urls}
  missing = [name for name, path in paths.items() if not os.path.isfile(path)]
  if missing:
    to_fetch = '; '.join('%s from %s' % (name, filenames_to_urls[name])
                         for name in missing)
    raise MissingSourceError(
        '%s originals missing from %s. This script never downloads; fetch '
        'these files yourself and put them in %s (or pass --source_dir=DIR '
        'where they are): %s' % (dataset_name, os.path.abspath(source_dir),
                                 os.path.abspath(source_dir), to_fetch))
  return paths
