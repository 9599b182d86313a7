"""Why tests of tf-slim 1.1.0's own suite fail on TF 2.21 and NumPy 2.

`tests/tf_slim_suite.py` matches each failure of the suite against
KNOWN_CAUSES. A cause is either in the test code (a NumPy 2 idiom, a
TensorFlow name the test imports that moved), and then comes with the edit
that fixes the test, or a TF 2.x behaviour a test pins. A failure no cause
matches is a library failure.
"""

import collections
import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class Cause:
  """Why some tests fail on TF 2.21 and NumPy 2, found by a pattern.

  Attributes:
    group: a key of GROUPS.
    title: one line naming the cause.
    pattern: regex searched in the failure's message and traceback.
    fix: (regex, replacement) edits of the test source that remove the
      cause, where the test code is at fault.
  """
  group: str
  title: str
  pattern: str
  fix: tuple = ()


GROUPS = collections.OrderedDict([
    ('numpy', 'The test code: NumPy 2 removed what it uses'),
    ('tf-internal', 'The test code: TensorFlow names it uses moved or '
                    'changed'),
    ('tf-behaviour', 'TF 2.x behaviour the test pins (not a library fault)'),
])

KNOWN_CAUSES = (
    Cause('numpy',
          '`int()` of a one-element array (an error in NumPy 2.4, '
          'deprecated since 1.25): `int(2 * self._labels[i] + ...)` in the '
          'setUp of the training tests',
          r'only 0-dimensional arrays can be converted to Python scalars',
          ((r'int\(2 \* self\._labels\[i\] \+', 'int(2 * self._labels[i, 0] +'),)),
    Cause('numpy',
          '`ndarray.tostring()` (not in NumPy 2.4; `tobytes()` since 1.9)',
          r"has no attribute 'tostring'",
          ((r'\.tostring\(\)', '.tobytes()'),)),
    Cause('numpy',
          '`np.object`, `np.float` (removed in NumPy 1.24)',
          r"module 'numpy' has no attribute '(object|float)'",
          ((r'\bnp\.object\b', 'object'), (r'\bnp\.float\b(?![\d_])', 'float'))),
    Cause('numpy',
          '`np.product` (removed in NumPy 2.0; `np.prod`)',
          r"module 'numpy' has no attribute 'product'",
          ((r'\bnp\.product\(', 'np.prod('),)),
    Cause('numpy',
          'NumPy 2 promotion (NEP 50): `python float - np.float32` stays '
          'float32, so `assertAlmostEqual(2/3, f1.eval())` misses 7 places '
          'by one float32 ulp',
          r'!= np\.float32\([\d.]+\) within 7 places',
          ((r'assertAlmostEqual\(2 \* 0\.5 \* 1 / \(1 \+ 0\.5\), f1\.eval\(\)\)',
            'assertAlmostEqual(2 * 0.5 * 1 / (1 + 0.5), float(f1.eval()))'),)),
    Cause('tf-internal',
          '`variable_scope.{disable,enable}_resource_variables`, '
          '`variable_scope.resource_variables_enabled` (now in '
          '`resource_variables_toggle`; public `tf.compat.v1.*` unchanged)',
          r"module 'tensorflow\.python\.ops\.variable_scope' has no "
          r"attribute '\w*resource_variables\w*'",
          ((r'\bvariable_scope\.((?:dis|en)able_resource_variables|'
            r'resource_variables_enabled)\(', r'tf.\1('),)),
    Cause('tf-internal',
          '`variables.VariableV1` (now `variable_v1.VariableV1`; public '
          '`tf.compat.v1.Variable` unchanged)',
          r"module 'tensorflow\.python\.ops\.variables' has no attribute "
          r"'VariableV1'",
          ((r'\bvariables(?:_lib)?\.VariableV1\(', 'tf.Variable('),)),
    Cause('tf-internal',
          "`DumpingDebugHook(..., log_usage=False)`: tfdbg's hook has no "
          '`log_usage` argument in TF 2.x',
          r"DumpingDebugHook\.__init__\(\) got an unexpected keyword argument "
          r"'log_usage'",
          ((r', log_usage=False\)', ')'),)),
    Cause('tf-behaviour',
          '`tf.nn.dropout` builds other ops in TF 2.x: the test asserts the '
          'name of the last one (`mul_1`, now `SelectV2`)',
          r'dropout/dropout_1/selectv2'),
    Cause('tf-behaviour',
          'A resource variable\'s `assign_add` returns a TF2 `tf.Variable`, '
          'which the test\'s `isinstance(op, tf.compat.v1.Variable)` does '
          'not accept (the update op runs the same)',
          r"count/AssignAddVariableOp' shape=\(\) dtype=float32> is not an "
          r"instance of"),
    Cause('tf-behaviour',
          '`replica_device_setter` puts the variable on `/job:ps/task:0`, '
          'not the `/job:ps/task:0/cpu:0` this TF 1.x-era test expects '
          '(the same with ref and resource variables)',
          r'Devices /job:ps/task:0 and /job:ps/task:0/device:CPU:0 are not '
          r'equal'),
)


# Library failures on TF 2.21 / NumPy 2 that deployment/ mends, each with a
# test of the suite that shows it in the fixed pass (the shipped test code
# fails earlier, for a cause above). The loops' failure shows in the eager
# and no-fix passes instead.
LIBRARY_FIXES = (
    ('ops/variables_test:AssignFromCheckpointTest.testLoadPartitionedVariables',
     'tf2_compat.slim_numpy2',
     '`assign_from_checkpoint` cuts partitions out of the checkpoint value '
     'with a list of slices, an IndexError since NumPy 1.23'),
)


def cause_of(detail):
  """The first cause whose pattern is in a failure's text, or None."""
  return next((cause for cause in KNOWN_CAUSES
               if re.search(cause.pattern, detail)), None)


def fix_test_code(source):
  """The test source with the fix of every cause applied."""
  for cause in KNOWN_CAUSES:
    for pattern, replacement in cause.fix:
      source = re.sub(pattern, replacement, source)
  return source
