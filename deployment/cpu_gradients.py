"""Faster gradients for clones placed on a CPU.

TensorFlow 2.21's CPU kernels without oneDNN (its default on CPUs without
AVX-512) are slow for some of the products a training step's backward
pass computes, though the same sums of products are fast in another form:

  MatMul   The input's gradient of `y = x @ w` is `dy @ transpose(w)`, one
           MatMul with transpose_b, about ten times slower than the same
           product without the transpose: LeNet's fully connected layer
           (w of 3136 x 1024) takes 44 ms for a batch of 4 against 3.6 ms
           (benchmarks/results/cpu_gradients.md). Here it is
           `transpose(w @ transpose(dy))`, the transpose on the small
           operand; the weights' gradient is TensorFlow's formula.
  Conv2D, DepthwiseConv2dNative
           In float16 and bfloat16 (mixed precision), the backward kernels
           of a convolution are several times slower than in float32:
           a LeNet training step of batch 32 takes 639 ms in
           mixed_bfloat16 with them, 87 ms with these gradients
           (benchmarks/results/cpu_gradients.md). Here both gradients
           are computed in float32 from the 16-bit values and rounded to
           the op's type once, at the end; float32 and float64
           convolutions get TensorFlow's formulas.

create_clones names these gradients on the ops of clones that run on a
CPU (`on_cpu`); optimize_clones and deploy() take the names off every op
of their clones once the gradients are built (`forget`), so the graph
they leave is TensorFlow's own, while clones not yet optimized (a second
model built before the first is optimized) keep the faster gradients.
"""

import contextlib
import threading

from tf2_compat.slim_compat import tf

MATMUL_GRADIENT = 'SlimDeploymentMatMulGrad'
# Its name in deployment.matmul_gradient, the previous release's module.
GRADIENT_NAME = MATMUL_GRADIENT
CONV2D_GRADIENT = 'SlimDeploymentConv2DGrad'
DEPTHWISE_GRADIENT = 'SlimDeploymentDepthwiseConv2dNativeGrad'
# Op type -> the name of its gradient here.
GRADIENTS = {'MatMul': MATMUL_GRADIENT, 'Conv2D': CONV2D_GRADIENT,
             'DepthwiseConv2dNative': DEPTHWISE_GRADIENT}
_NAMES = {name.encode() for name in GRADIENTS.values()}
# Where gradient_override_map records the name on an op.
_ATTRIBUTE = '_gradient_op_type'
_SIXTEEN_BITS = (tf.float16, tf.bfloat16)

_default_only = threading.local()


@tf.RegisterGradient(MATMUL_GRADIENT)
def _matmul_gradient(op, grad):
  """The gradients of MatMul `op`'s two inputs, given `grad` of its output.

  TensorFlow's formulas, with conjugates for complex inputs; only the
  input's gradient in the untransposed case is computed differently.
  """
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


def _convolution_gradients(op, grad, backprop_input, backprop_filter,
                           attributes):
  """The input's and the filter's gradients of convolution `op`, by
  TensorFlow's backprop ops, in float32 when `op` is 16-bit."""
  images, filters = op.inputs
  dtype = images.dtype
  if dtype in _SIXTEEN_BITS:
    images, filters, grad = (tf.cast(t, tf.float32)
                             for t in (images, filters, grad))
  kwargs = {name: op.get_attr(name) for name in attributes}
  input_shape, filter_shape = tf.shape_n([images, filters])
  gradients = (
      backprop_input(input_sizes=input_shape, filter=filters,
                     out_backprop=grad, **kwargs),
      backprop_filter(input=images, filter_sizes=filter_shape,
                      out_backprop=grad, **kwargs))
  return tuple(tf.cast(g, dtype) for g in gradients)


_CONVOLUTION_ATTRIBUTES = ('strides', 'padding', 'explicit_paddings',
                           'data_format', 'dilations')


@tf.RegisterGradient(CONV2D_GRADIENT)
def _conv2d_gradient(op, grad):
  return _convolution_gradients(
      op, grad, tf.raw_ops.Conv2DBackpropInput,
      tf.raw_ops.Conv2DBackpropFilter,
      _CONVOLUTION_ATTRIBUTES + ('use_cudnn_on_gpu',))


@tf.RegisterGradient(DEPTHWISE_GRADIENT)
def _depthwise_gradient(op, grad):
  return _convolution_gradients(
      op, grad, tf.raw_ops.DepthwiseConv2dNativeBackpropInput,
      tf.raw_ops.DepthwiseConv2dNativeBackpropFilter,
      _CONVOLUTION_ATTRIBUTES)


def local_gpus():
  """This process's GPUs (a function, for tests to stand in for)."""
  return tf.config.list_physical_devices('GPU')


def runs_on_cpu(device):
  """Whether ops placed on `device` run on a CPU: a CPU device, or a GPU
  of this machine when it has none (soft placement puts them on the
  CPU). A GPU of a named job may be another machine's: not counted."""
  spec = tf.DeviceSpec.from_string(device)
  if spec.device_type == 'CPU':
    return True
  return spec.device_type == 'GPU' and spec.job is None and not local_gpus()


@contextlib.contextmanager
def on_cpu(device):
  """Gives the ops built inside these gradients if `device` runs on a CPU
  (`runs_on_cpu`).

  GPU kernels take these products as they come, so ops on GPUs keep
  TensorFlow's gradients; so does everything inside `default_gradient()`,
  and a caller's own gradient_override_map for an op type stays in force.
  """
  graph = tf.get_default_graph()
  overrides = {op_type: name for op_type, name in GRADIENTS.items()
               if op_type not in graph._gradient_override_map}  # pylint: disable=protected-access
  if (not overrides or getattr(_default_only, 'on', False)
      or not runs_on_cpu(device)):
    yield
    return
  with graph.gradient_override_map(overrides):
    yield


def forget(graph, ops=None):
  """Takes these gradients' names off `ops` of `graph` (default: all of
  its ops); call once their gradients are built.

  The names travel with the graph into checkpoints' .meta files, where a
  program that has not imported this module could not differentiate the
  ops (LookupError: no gradient defined); without them they take
  TensorFlow's gradients. Ops left out keep them, so that clones optimized
  later still get the faster gradients.
  """
  for op in graph.get_operations() if ops is None else ops:
    if op.type not in GRADIENTS:
      continue
    try:
      named = op.get_attr(_ATTRIBUTE) in _NAMES
    except ValueError:  # The op has no such attribute.
      continue
    if named:
      op._clear_attr(_ATTRIBUTE)  # pylint: disable=protected-access


@contextlib.contextmanager
def default_gradient():
  """Clones built inside keep TensorFlow's own gradients (for measuring
  this module's effect)."""
  before = getattr(_default_only, 'on', False)
  _default_only.on = True
  try:
    yield
  finally:
    _default_only.on = before
