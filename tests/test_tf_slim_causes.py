"""The known causes of tf-slim suite failures match, and their fixes apply."""

import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import tf_slim_causes
import tf_slim_suite
# pylint: enable=g-import-not-at-top,wrong-import-position

CAUSES = tf_slim_causes.KNOWN_CAUSES

# One failure line of each cause, as the suite printed them on TF 2.21.
OBSERVED = [
    'TypeError: only 0-dimensional arrays can be converted to Python scalars',
    "AttributeError: 'numpy.ndarray' object has no attribute 'tostring'",
    "AttributeError: module 'numpy' has no attribute 'object'.",
    "AttributeError: module 'numpy' has no attribute 'product'",
    'AssertionError: 0.6666666666666666 != np.float32(0.6666666) within 7 '
    'places (np.float32(5.9604645e-08) difference)',
    "AttributeError: module 'tensorflow.python.ops.variable_scope' has no "
    "attribute 'enable_resource_variables'",
    "AttributeError: module 'tensorflow.python.ops.variables' has no "
    "attribute 'VariableV1'",
    "TypeError: DumpingDebugHook.__init__() got an unexpected keyword "
    "argument 'log_usage'",
    '- dropout/dropout_1/selectv2',
    "AssertionError: <tf.Variable 'count/AssignAddVariableOp' shape=() "
    "dtype=float32> is not an instance of (<class 'Operation'>,)",
    'AssertionError: Devices /job:ps/task:0 and /job:ps/task:0/device:CPU:0 '
    'are not equal. None:',
]


def _shipped_sources():
  sources = {}
  for name, path in tf_slim_suite.test_files().items():
    with open(path) as source:
      sources[name] = source.read()
  assert len(sources) == 35
  return sources


def test_each_observed_failure_has_its_own_cause():
  found = [tf_slim_causes.cause_of(line) for line in OBSERVED]
  assert found == list(CAUSES)


def test_an_unknown_failure_has_no_cause():
  assert tf_slim_causes.cause_of('ValueError: shapes (2,) and (3,)') is None


@pytest.mark.parametrize('cause', [c for c in CAUSES if c.fix],
                         ids=lambda cause: cause.title[:40])
def test_every_fix_edits_a_shipped_test_file(cause):
  # A fix that matches nothing would be stale (another tf-slim version).
  sources = _shipped_sources().values()
  for pattern, _ in cause.fix:
    assert any(re.search(pattern, source) for source in sources), pattern


def test_fixes_leave_numpy_scalar_types_alone():
  source = 'a = np.float(1)\nb = np.float32(1)\nc = np.float_\n'
  assert tf_slim_causes.fix_test_code(source) == (
      'a = float(1)\nb = np.float32(1)\nc = np.float_\n')


def test_the_eager_copy_keeps_graph_mode_to_the_main_thread():
  source = _shipped_sources()['learning_test']
  eager = tf_slim_suite.fixed_source(source, eager=True)
  assert 'tf.disable_eager_execution()' not in eager
  assert ('  import graph_mode_per_test; graph_mode_per_test.install()'
          in eager)
  assert 'int(2 * self._labels[i, 0] +' in eager


def test_only_test_code_causes_have_fixes():
  for cause in CAUSES:
    assert bool(cause.fix) == (cause.group != 'tf-behaviour'), cause.title


@pytest.mark.parametrize('test', [fix[0] for fix in tf_slim_causes.LIBRARY_FIXES])
def test_every_library_fix_names_a_shipped_test(test):
  file_name, method = test.split(':')
  class_name, method_name = method.split('.')
  source = _shipped_sources()[file_name]
  assert 'class %s(' % class_name in source
  assert 'def %s(' % method_name in source
