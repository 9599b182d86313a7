"""Shared test setup: quiet TensorFlow, a fresh graph per test."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top


@pytest.fixture
def graph():
  """A new default graph for the test; model code builds into it."""
  with tf.Graph().as_default() as g:
    yield g


@pytest.fixture(scope='session')
def digits_dir(tmp_path_factory):
  """The embedded digits dataset, converted once per test run."""
  from datasets import convert_digits  # pylint: disable=g-import-not-at-top
  directory = str(tmp_path_factory.mktemp('digits'))
  convert_digits.run(directory)
  return directory

