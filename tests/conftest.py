"""Shared test setup: quiet TensorFlow, a fresh graph per test."""

import fcntl
import logging
import os
import shutil

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # pylint: disable=g-import-not-at-top

from tf2_compat.slim_compat import tf  # pylint: disable=g-import-not-at-top


@pytest.fixture(autouse=True)
def tensorflow_logger_as_found():
  """Gives each test TensorFlow's logger as the session found it.

  A script's main run in-process (training.cli.run_main) stops that logger
  propagating to the root, where caplog listens, and raises its verbosity;
  a later test on the same worker would then see no records.
  """
  logger = logging.getLogger('tensorflow')
  propagate, level = logger.propagate, logger.level
  yield
  logger.propagate = propagate
  logger.setLevel(level)


@pytest.fixture
def graph():
  """A new default graph for the test; model code builds into it."""
  with tf.Graph().as_default() as g:
    yield g


@pytest.fixture(scope='module')
def identity_equality_for_tensors():
  """Builds the deep networks several times faster, for the modules that
  build them (`pytestmark = pytest.mark.usefixtures(...)`).

  With TF 2's tensor equality on, tf-keras' legacy layers check each new
  weight against every trainable variable of the graph through an
  expensive `Variable.__eq__`, so building a network is quadratic in its
  variables (resnet_v2_200: ~20 s). Inside a graph, equality and hashing of
  tensors are by identity either way; only the cost changes. TF 2's default
  is restored afterwards.
  """
  tf.disable_tensor_equality()
  yield
  tf.enable_tensor_equality()


@pytest.fixture(scope='session')
def digits_dir(tmp_path_factory):
  """The embedded digits dataset, converted once per test run."""
  from datasets import convert_digits  # pylint: disable=g-import-not-at-top
  directory = str(tmp_path_factory.mktemp('digits'))
  convert_digits.run(directory)
  return directory


# The flags of the shared LeNet: one clone, Adam at a fixed rate, 150 steps:
# enough for the export tests' bar of 80% on the digits test split, which
# its artifacts must then predict alike.
TRAINED_LENET_FLAGS = (
    '--dataset_name=digits', '--model_name=lenet', '--clone_on_cpu',
    '--optimizer=adam', '--opt_epsilon=1e-8', '--learning_rate=0.001',
    '--learning_rate_decay_type=fixed', '--max_number_of_steps=150',
    '--save_interval_secs=0', '--save_summaries_secs=600')


@pytest.fixture(scope='session')
def trained_lenet(tmp_path_factory):
  """The train_dir of a LeNet trained on digits (TRAINED_LENET_FLAGS), for
  the tests that need *a* trained model and only read it.

  Trained once per test run: the pytest-xdist workers share it through a
  directory beside their own temporary ones, the first to arrive trains
  under a lock and the others wait for it. A test that trains on from it
  copies it first (shutil.copytree); nothing may write into it.
  """
  from tests import script_runner  # pylint: disable=g-import-not-at-top
  from datasets import convert_digits  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.getbasetemp()
  if os.environ.get('PYTEST_XDIST_WORKER'):
    root = root.parent  # The run's directory, above each worker's own.
  shared = root / 'trained_lenet'
  train_dir = shared / 'train'
  with open(str(root / 'trained_lenet.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes.
    if not (shared / 'done').exists():
      if shared.exists():  # A worker failed half-way: train again.
        shutil.rmtree(str(shared))
      shared.mkdir()
      convert_digits.run(str(shared / 'digits'))
      result = script_runner.run_script(
          'train_image_classifier.py',
          '--dataset_dir=%s' % (shared / 'digits'),
          '--train_dir=%s' % train_dir, *TRAINED_LENET_FLAGS, timeout=600)
      assert result.returncode == 0, result.stdout[-3000:]
      (shared / 'done').touch()
  return str(train_dir)



def pytest_addoption(parser):
  parser.addoption(
      '--system', action='store_true',
      help='also collect tests/system: tests that need root and system '
           'services (Slurm, network namespaces); `make test-system` sets '
           'those up and passes this flag')


def pytest_ignore_collect(collection_path, config):
  """tests/system is collected only with --system: without root and the
  services it sets up, its tests would fail, and `make test` needs neither."""
  if config.getoption('--system'):
    return None
  system_dir = os.path.join(os.path.dirname(__file__), 'system')
  if os.path.commonpath([str(collection_path), system_dir]) == system_dir:
    return True
  return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
  """Puts the tests that share a module-scoped fixture of their own module
  on one xdist worker.

  Such a fixture trains a model or builds a network once for its module;
  `--dist loadgroup` would otherwise hand its tests to both workers and
  each would build it (the QAT module's 300 training steps twice). The
  group is the module and the fixtures' parameter: the tests of one of
  tests/test_nets.py's networks share a worker, other networks go to
  either. Tests already in a group (the loopback ones) keep theirs.
  Runs before xdist reads the groups (tryfirst).
  """
  for item in items:
    if item.get_closest_marker('xdist_group'):
      continue
    shared = _module_fixtures(item)
    if not shared:
      continue
    callspec = getattr(item, 'callspec', None)
    params = sorted({str(callspec.params[name]) for name in shared
                     if callspec and name in callspec.params})
    item.add_marker(pytest.mark.xdist_group(
        item.module.__name__ + ''.join('[%s]' % p for p in params)))


def _module_fixtures(item):
  """The module-scoped fixtures that `item` uses from its own module."""
  info = getattr(item, '_fixtureinfo', None)
  module = getattr(item, 'module', None)
  if info is None or module is None:  # Not a Python test function.
    return []
  return [name for name, defs in info.name2fixturedefs.items()
          if defs[-1].scope == 'module' and
          getattr(defs[-1].func, '__module__', None) == module.__name__]
