"""Quantization-aware networks: fake-quantized weights and activations.

TF 2.x no longer has tf.contrib.quantize, which rewrote a built graph.
Here the layers are built quantization-aware instead: inside
`quantization_aware(...)` the calls a net makes to slim.conv2d,
slim.separable_conv2d and slim.fully_connected build

  weights     fake-quantized to 8 bits, symmetric (-127..127, zero at 0,
              as TFLite's int8 kernels require), the range their largest
              magnitude;
  activations the layer's output, after its activation function,
              fake-quantized to 8 bits, the range a moving average of the
              batches' min and max (including 0): their mean over the
              first steps, then decay ACTIVATION_DECAY;
  batch norm  a conv or fully connected layer followed by slim.batch_norm
              is folded: the weights are scaled by gamma / sqrt(var + eps)
              before their quantization and the bias is beta - mean x that
              scale; in training with the batch's mean and variance of the
              unfolded layer, in evaluation with the moving averages.

The variables keep the names and shapes of the float network, so float
and quantization-aware checkpoints restore into each other; each layer
adds its ranges, `<layer>/weights_quant/min` and `.../max` (for
separable_conv2d `depthwise_weights_quant/...`, `pointwise_weights_quant/...`),
`<layer>/act_quant/min` and `.../max`: model variables, not trainable,
created through tf.get_variable like the weights (so clones share them and
the deployment places them), updated by ops in UPDATE_OPS like the batch
norm moving averages (so the first clone's update runs each step), and
listed in the collection RANGES (fine-tuning from a float checkpoint
leaves them initialised: training sets them from the values). All-reduce
replicas each hold their own ranges, set from their own batches; given to
deploy(replica_mean_variables=...) they are averaged over the replicas
after every step, so every replica keeps the same ranges (the training
script does so).

In training the fake quantization starts at global step `quant_delay`:
before it the layer computes exactly what the float network computes (the
ranges already learn). An evaluation or an export graph is quantized from
the start, with the stored ranges.

    network_fn = quantize.quantized_network_fn(network_fn, is_training=True,
                                               quant_delay=2000)
    logits, end_points = network_fn(images)
"""

import contextlib
import functools
import inspect

from tf2_compat import patching
from tf2_compat.slim_compat import slim, tf

NUM_BITS = 8
# Upstream's activation ranges started at [-6, 6] and moved by 0.999 from
# there; here the first steps average (_moving_average_weight) and 0.99 lets
# a run of a few hundred steps follow the activations as they grow.
ACTIVATION_DECAY = 0.99
INITIAL_ACTIVATION_RANGE = (-6.0, 6.0)

# The graph collection of the range variables.
RANGES = 'quantization_ranges'

_WEIGHT_NAMES = ('weights', 'depthwise_weights', 'pointwise_weights')
_CONV, _DEPTHWISE, _FULLY_CONNECTED = 'conv', 'depthwise', 'fully_connected'


def _key(function):
  return getattr(function, '_key_op', function)


def _scoped_kwargs(function, args, kwargs):
  """All arguments of a call of slim layer `function` as keywords: the
  explicit ones over those of the enclosing arg_scope, as tf-slim merges
  them, over the function's defaults."""
  signature = inspect.signature(function)
  merged = {name: parameter.default
            for name, parameter in signature.parameters.items()
            if parameter.default is not inspect.Parameter.empty}
  merged.update(slim.current_arg_scope().get(_key(function), {}))
  merged.update(signature.bind_partial(*args, **kwargs).arguments)
  return merged


def _moving_average_weight():
  """The weight of this step's range in the moving average: 1 / (step + 1)
  at first (the mean of the ranges so far, the first batch's at step 0),
  then 1 - ACTIVATION_DECAY."""
  step = tf.cast(tf.train.get_global_step(), tf.float32)
  return tf.maximum(1.0 - ACTIVATION_DECAY, 1.0 / (step + 1.0))


class _Ranges:
  """The min and max variables of one fake quantization, in the current
  variable scope under `name`."""

  def __init__(self, name, initial):
    with tf.variable_scope(name):
      self.min, self.max = (
          slim.model_variable(
              bound, shape=[], dtype=tf.float32, trainable=False,
              initializer=tf.constant_initializer(value))
          for bound, value in zip(('min', 'max'), initial))
    for variable in (self.min, self.max):
      if variable not in tf.get_collection(RANGES):
        tf.add_to_collection(RANGES, variable)


class _Mode:
  """How the layers built now quantize: training or not, from which step."""

  def __init__(self, is_training, quant_delay):
    self.is_training = is_training
    self.quant_delay = quant_delay if is_training else 0
    self.layers = 0  # built quantization-aware so far

  def switched(self, quantized, unquantized):
    """`quantized` from the delay on, `unquantized` before it."""
    if not self.quant_delay:
      return quantized
    active = tf.greater_equal(tf.train.get_global_step(),
                              tf.cast(self.quant_delay, tf.int64))
    return tf.where_v2(active, quantized, unquantized)

  def fake_quant(self, values, ranges, moving_average, symmetric):
    """values fake-quantized; in training the ranges follow the values
    (last value or moving average) by ops added to UPDATE_OPS."""
    if not self.is_training:
      low, high = ranges.min, ranges.max
    elif symmetric:
      high = tf.reduce_max(tf.abs(values))
      low = -high
    else:
      low = tf.minimum(tf.reduce_min(values), 0.0)
      high = tf.maximum(tf.reduce_max(values), 0.0)
      if moving_average:
        weight = _moving_average_weight()
        low = ranges.min + weight * (low - ranges.min)
        high = ranges.max + weight * (high - ranges.max)
    if self.is_training:
      for variable, value in ((ranges.min, low), (ranges.max, high)):
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS,
                             variable.assign(value, read_value=False))
    quantized = tf.quantization.fake_quant_with_min_max_vars(
        values, low, high, num_bits=NUM_BITS, narrow_range=symmetric)
    return self.switched(quantized, values)

  def quantized_weights(self, short_name, weights, scale=None, ranges=None):
    """The weights variable `short_name` (times the folding `scale`)
    fake-quantized; `ranges` (default: new ones in the current scope) its
    range variables."""
    ranges = ranges or _weight_ranges(short_name)
    if scale is not None:
      weights = weights * scale
    return self.fake_quant(weights, ranges, moving_average=False,
                           symmetric=True)


def _weight_ranges(short_name):
  """The ranges of a layer's weights variable named `short_name` (weights,
  depthwise_weights, pointwise_weights), in the current scope:
  weights_quant/, depthwise_weights_quant/, ..."""
  return _Ranges(short_name + '_quant', (0.0, 0.0))


class _Recorder:
  """A custom getter that remembers the variables the layer reads, by
  their last name component, and optionally replaces the weights."""

  def __init__(self, replace_weights=None):
    self.variables = {}
    self.weights_name = None
    self._replace_weights = replace_weights
    # The layer builds its weights in the root name scope; the ops made of
    # them go back to the caller's, the clone's (its UPDATE_OPS are run).
    self._name_scope = tf.get_default_graph().get_name_scope()

  def __call__(self, getter, name, *args, **kwargs):
    variable = getter(name, *args, **kwargs)
    short = name.rsplit('/', 1)[-1]
    self.variables[short] = variable
    if short in _WEIGHT_NAMES:
      self.weights_name = self.weights_name or name
      if self._replace_weights is not None:
        with tf.name_scope(self._name_scope + '/' if self._name_scope
                           else None):
          return self._replace_weights(short, variable)
    return variable

  @property
  def layer_scope(self):
    """The layer's variable scope name: that of its weights."""
    return self.weights_name.rsplit('/', 1)[0]


def _with_getter(getter):
  """The current variable scope again, with `getter` added to its custom
  getters and no new name scope."""
  return tf.variable_scope(tf.get_variable_scope(), custom_getter=getter,
                           auxiliary_name_scope=False)


def _relative(scope_name):
  current = tf.get_variable_scope().name
  return scope_name[len(current) + 1:] if current else scope_name


def _kind(original, kwargs):
  if _key(original) == _key(slim.fully_connected):
    return _FULLY_CONNECTED
  if (_key(original) == _key(slim.separable_conv2d)
      and kwargs.get('num_outputs') is None):
    return _DEPTHWISE
  return _CONV


def _foldable(kind, original, kwargs):
  """Whether the layer's batch norm folds into its weights: slim.batch_norm
  after conv2d, fully_connected or a depthwise separable_conv2d
  (num_outputs None; with a pointwise step it is applied unfolded), NHWC."""
  if kwargs.get('normalizer_fn') is None or _key(
      kwargs['normalizer_fn']) != _key(slim.batch_norm):
    return False
  if kwargs.get('data_format') not in (None, 'NHWC'):
    return False
  return kind != _CONV or _key(original) == _key(slim.conv2d)


def _build_layer(mode, original, args, kwargs):
  """The quantization-aware version of one call of a slim layer."""
  mode.layers += 1
  kwargs = _scoped_kwargs(original, args, kwargs)
  activation_fn = kwargs.pop('activation_fn', None)
  outputs_collections = kwargs.pop('outputs_collections', None)
  kind = _kind(original, kwargs)
  if _foldable(kind, original, kwargs):
    outputs, layer_scope = _folded(mode, original, kind, kwargs)
  else:
    recorder = _Recorder(mode.quantized_weights)
    with _with_getter(recorder):
      outputs = original(activation_fn=None, outputs_collections=None,
                         **kwargs)
    layer_scope = recorder.layer_scope
  if activation_fn is not None:
    outputs = activation_fn(outputs)
  with tf.variable_scope(_relative(layer_scope),
                         reuse=kwargs.get('reuse') or None):
    outputs = mode.fake_quant(
        outputs, _Ranges('act_quant', INITIAL_ACTIVATION_RANGE),
        moving_average=True, symmetric=False)
  return slim.utils.collect_named_outputs(outputs_collections, layer_scope,
                                          outputs)


def _folded(mode, original, kind, kwargs):
  """(the layer's output before its activation, its scope name) of a layer
  with its batch norm folded into the weights and a bias."""
  kwargs = dict(kwargs)
  normalizer_fn = kwargs.pop('normalizer_fn')
  normalizer_params = dict(kwargs.pop('normalizer_params', None) or {})
  kwargs.update(normalizer_fn=None, normalizer_params=None,
                biases_initializer=None)
  unfolded = _Recorder()
  with _with_getter(unfolded):
    outputs = original(activation_fn=None, outputs_collections=None,
                       **kwargs)
  layer_scope = unfolded.layer_scope
  norm = _Recorder()
  with tf.variable_scope(_relative(layer_scope),
                         reuse=kwargs.get('reuse') or None), \
      _with_getter(norm):
    normalized = normalizer_fn(outputs, **normalizer_params)
  bn = _scoped_kwargs(slim.batch_norm, (outputs,), normalizer_params)
  if bn['is_training']:
    mean, variance = tf.nn.moments(outputs, list(range(len(outputs.shape)
                                                       - 1)))
  else:
    mean = norm.variables['moving_mean']
    variance = norm.variables['moving_variance']
  scale = tf.math.rsqrt(variance + bn['epsilon'])
  if 'gamma' in norm.variables:
    scale *= norm.variables['gamma']
  bias = -mean * scale
  if 'beta' in norm.variables:
    bias += norm.variables['beta']

  # Made here: the layer's second build reuses its variables.
  with tf.variable_scope(_relative(layer_scope),
                         reuse=kwargs.get('reuse') or None):
    ranges = _weight_ranges(unfolded.weights_name.rsplit('/', 1)[-1])

  def folded_weights(short_name, weights):
    weight_scale = (tf.reshape(scale, weights.shape[2:]) if kind == _DEPTHWISE
                    else scale)
    return mode.quantized_weights(short_name, weights, weight_scale, ranges)

  kwargs.update(scope=_relative(layer_scope), reuse=True)
  with _with_getter(_Recorder(folded_weights)):
    folded = original(activation_fn=None, outputs_collections=None,
                      **kwargs)
  folded = tf.nn.bias_add(folded, bias)
  return mode.switched(folded, normalized), layer_scope


# The slim names the nets call, in tf_slim and tf_slim.layers.
_LAYER_NAMES = ('conv2d', 'convolution2d', 'separable_conv2d',
                'separable_convolution2d', 'fully_connected')


def _targets(mode):
  def wrap(original):
    def layer(*args, **kwargs):
      return _build_layer(mode, original, args, kwargs)
    layer._key_op = _key(original)  # pylint: disable=protected-access
    layer.__signature__ = inspect.signature(original)
    return layer
  return [(owner, name, wrap) for owner in (slim, slim.layers)
          for name in _LAYER_NAMES]


@contextlib.contextmanager
def quantization_aware(is_training, quant_delay=0):
  """Builds slim's conv2d, separable_conv2d and fully_connected layers
  quantization-aware while entered.

  Args:
    is_training: training: the ranges follow the values and the batch
      norm folds with the batch statistics; else the stored ranges and
      moving averages.
    quant_delay: in training, the global step from which the layers
      fake-quantize (0: from the start).

  Yields:
    An object whose `layers` counts the layers built quantization-aware
    so far.

  Raises:
    ValueError: quant_delay below 0; entered while already entered.
  """
  if quant_delay < 0:
    raise ValueError('quant_delay must be >= 0, got %d' % quant_delay)
  mode = _Mode(is_training, quant_delay)
  targets = _targets(mode)
  if patching.installed(targets[:1]):
    raise ValueError('quantization_aware() is entered already; nest no '
                     'second one')
  patching.install(targets)
  try:
    yield mode
  finally:
    patching.uninstall(targets)


def quantized_network_fn(network_fn, is_training, quant_delay=0):
  """network_fn of nets_factory, building its network quantization-aware
  (see quantization_aware); its attributes (default_image_size, ...) are
  kept."""
  @functools.wraps(network_fn)
  def quantized(*args, **kwargs):
    if is_training:  # Read by the layers; not to be made in their scopes.
      tf.train.get_or_create_global_step()
    with quantization_aware(is_training, quant_delay) as mode:
      built = network_fn(*args, **kwargs)
    if not mode.layers:
      raise ValueError(
          '%s has no layer to fake-quantize: quantization-aware networks '
          'quantize slim.conv2d, slim.separable_conv2d and '
          'slim.fully_connected layers (3-D convolutions, as in the video '
          'networks, are not), so it would stay float' % getattr(
              network_fn, '__name__', network_fn))
    return built
  return quantized
