"""Shared test setup: quiet TensorFlow, a fresh graph per test."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from deployment.slim_compat import tf  # pylint: disable=g-import-not-at-top


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


# Modules whose tests send traffic over 127.0.0.1 (servers, clusters,
# TensorBoard). Under `pytest -n 2 --dist loadgroup` (`make test`) they run
# one at a time on one worker, so the benchmark that counts loopback bytes
# sees only its own, and two clusters never compete for ports.
LOOPBACK_MODULES = frozenset([
    'test_all_reduce', 'test_all_reduce_cluster', 'test_benchmarks',
    'test_cluster_e2e', 'test_launch', 'test_tensorboard',
])


def pytest_collection_modifyitems(items):
  for item in items:
    if item.module.__name__.rsplit('.', 1)[-1] in LOOPBACK_MODULES:
      item.add_marker(pytest.mark.xdist_group('loopback'))
