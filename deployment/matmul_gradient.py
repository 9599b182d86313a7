"""A faster gradient for fully connected layers on CPU clones.

TensorFlow's gradient of `y = x @ w` gives the layer's input the product
`dy @ transpose(w)`, one MatMul op with transpose_b. TensorFlow 2.21's CPU
kernel without oneDNN (the default on CPUs without AVX-512) computes that
product about ten times slower than the same product without the
transpose: LeNet's fully connected layer (w of 3136 x 1024) takes 45 ms
for a batch of 4 against 3.9 ms (benchmarks/results/matmul_gradient.md).
That one op is most of a small batch's step.

Here the input's gradient is `transpose(w @ transpose(dy))`: the same
sums of products, with the transpose on the small operand. create_clones
gives this gradient to the MatMul ops of clones placed on a CPU;
optimize_clones and deploy() take its name off the ops whose gradients
they built (deploy() off all of its clones' ops), so the graph they leave
is TensorFlow's own, while clones not yet differentiated (a second model
built before the first is optimized) keep the faster gradient. The
weights' gradient, and every other case, is TensorFlow's formula.
"""

import contextlib
import threading
import weakref

from tf2_compat.slim_compat import tf

GRADIENT_NAME = 'SlimDeploymentMatMulGrad'
# Where gradient_override_map records the name on an op.
_ATTRIBUTE = '_gradient_op_type'

_default_only = threading.local()
# graph -> names of its MatMul ops whose gradient this module has built.
_differentiated = weakref.WeakKeyDictionary()


@tf.RegisterGradient(GRADIENT_NAME)
def _matmul_gradient(op, grad):
  """The gradients of MatMul `op`'s two inputs, given `grad` of its output.

  TensorFlow's formulas, with conjugates for complex inputs; only the
  input's gradient in the untransposed case is computed differently.
  """
  _differentiated.setdefault(op.graph, set()).add(op.name)
  transpose_a = op.get_attr('transpose_a')
  transpose_b = op.get_attr('transpose_b')
  a = tf.math.conj(op.inputs[0])
  b = tf.math.conj(op.inputs[1])
  if not transpose_a and not transpose_b:
    return (times_transposed(grad, b),
            tf.matmul(a, grad, transpose_a=True))
  if not transpose_a:
    return (tf.matmul(grad, b),
            tf.matmul(grad, a, transpose_a=True))
  if not transpose_b:
    return (tf.matmul(b, grad, transpose_b=True),
            tf.matmul(a, grad))
  return (tf.matmul(b, grad, transpose_a=True, transpose_b=True),
          tf.matmul(grad, a, transpose_a=True, transpose_b=True))


def times_transposed(x, w):
  """x @ transpose(w) for 2-D x and w, the transpose on the smaller one.

  When w's rows are known and at least x's (or x's are unknown, as a
  batch dimension is), `transpose(w @ transpose(x))`; otherwise the plain
  `x @ transpose(w)`, which is fast when w is the small one.
  """
  rows_x = tf.compat.dimension_value(x.shape[0])
  rows_w = tf.compat.dimension_value(w.shape[0])
  if rows_w is not None and (rows_x is None or rows_w >= rows_x):
    return tf.transpose(tf.matmul(w, x, transpose_b=True))
  return tf.matmul(x, w, transpose_b=True)


@contextlib.contextmanager
def on_cpu(device):
  """Gives the MatMul ops built inside this gradient if `device` is a CPU.

  GPU kernels take transposes as they come, so ops on other devices keep
  TensorFlow's gradient; so does everything inside `default_gradient()`,
  and a caller's own gradient_override_map for MatMul stays in force.
  """
  graph = tf.get_default_graph()
  overridden = 'MatMul' in graph._gradient_override_map  # pylint: disable=protected-access
  if (tf.DeviceSpec.from_string(device).device_type != 'CPU' or overridden
      or getattr(_default_only, 'on', False)):
    yield
    return
  with graph.gradient_override_map({'MatMul': GRADIENT_NAME}):
    yield


def forget(graph, ops=()):
  """Takes this gradient's name off `graph`'s MatMul ops whose gradients
  have been built, and off `ops`.

  The name travels with the graph into checkpoints' .meta files, where a
  program that has not imported this module could not differentiate the
  ops (LookupError: no gradient defined); without it they take
  TensorFlow's gradient. Ops not yet differentiated keep it, so that
  clones optimized later still get the faster gradient.
  """
  names = _differentiated.pop(graph, set())
  named_ops = [graph.get_operation_by_name(name) for name in sorted(names)]
  for op in named_ops + list(ops):
    if op.type != 'MatMul':
      continue
    try:
      named = op.get_attr(_ATTRIBUTE) == GRADIENT_NAME.encode()
    except ValueError:  # The op has no such attribute.
      continue
    if named:
      op._clear_attr(_ATTRIBUTE)  # pylint: disable=protected-access


@contextlib.contextmanager
def default_gradient():
  """Clones built inside keep TensorFlow's own MatMul gradient (for
  measuring this module's effect)."""
  before = getattr(_default_only, 'on', False)
  _default_only.on = True
  try:
    yield
  finally:
    _default_only.on = before
