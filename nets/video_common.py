"""The inflated Inception v1 that I3D and S3D-G share.

Both networks are Inception v1 (GoogLeNet) made 3-D: every layer takes
clips [batch, frames, height, width, channels], and keeps Inception v1's
layer names, so that the image network's checkpoint can seed them (its
2-D kernels inflated along time). They differ in three choices, which
`inception_3d_base` takes as arguments:

  * the temporal extent of the first 7x7 convolution (7 in I3D, 3 in S3D-G);
  * whether a kxk convolution that spans time is one k x k x k convolution
    (I3D) or a 1 x k x k spatial one followed by a k x 1 x 1 temporal one,
    named `<layer>/temporal` (S3D-G, `separable=True` in the arg scope);
  * self-gating (S3D-G): each branch's output is multiplied by a sigmoid of
    a 1x1x1 convolution of its own average over space and time.

Layers before `temporal_conv_startat` are 2-D convolutions written as
1 x k x k ones; gating starts at `gating_startat`.
"""

import numpy as np

from tf2_compat.slim_compat import slim, tf

# The layers in order, with their Inception v1 names. A block's depths are
# Branch_0's 1x1; Branch_1's 1x1 and 3x3; Branch_2's 1x1 and 3x3; the
# 1x1 after Branch_3's 3x3x3 max pool. Pools: kernel and stride (frames,
# height, width).
_LAYERS = (
    ('Conv2d_1a_7x7', 'first_conv', 64),
    ('MaxPool_2a_3x3', 'pool', ([1, 3, 3], [1, 2, 2])),
    ('Conv2d_2b_1x1', 'conv_1x1', 64),
    ('Conv2d_2c_3x3', 'conv_3x3', 192),
    ('MaxPool_3a_3x3', 'pool', ([1, 3, 3], [1, 2, 2])),
    ('Mixed_3b', 'block', (64, 96, 128, 16, 32, 32)),
    ('Mixed_3c', 'block', (128, 128, 192, 32, 96, 64)),
    ('MaxPool_4a_3x3', 'pool', ([3, 3, 3], [2, 2, 2])),
    ('Mixed_4b', 'block', (192, 96, 208, 16, 48, 64)),
    ('Mixed_4c', 'block', (160, 112, 224, 24, 64, 64)),
    ('Mixed_4d', 'block', (128, 128, 256, 24, 64, 64)),
    ('Mixed_4e', 'block', (112, 144, 288, 32, 64, 64)),
    ('Mixed_4f', 'block', (256, 160, 320, 32, 128, 128)),
    ('MaxPool_5a_2x2', 'pool', ([2, 2, 2], [2, 2, 2])),
    ('Mixed_5b', 'block', (256, 160, 320, 32, 128, 128)),
    ('Mixed_5c', 'block', (384, 192, 384, 48, 128, 128)),
)
END_POINTS = tuple(name for name, _, _ in _LAYERS)
# Where temporal convolutions and gating may start: the first layer with a
# 3x3 kernel and every block.
START_POINTS = tuple(name for name, kind, _ in _LAYERS
                     if kind in ('conv_3x3', 'block'))


def video_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon,
                    use_renorm=False, separable_conv3d=False):
  """Layer defaults of both networks: batch norm (beta, no gamma), ReLU.

  Args:
    weight_decay: L2 regularization coefficient of the weights.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.
    use_renorm: whether batch norm uses batch renormalization.
    separable_conv3d: whether a kxk convolution that spans time is split
      into a spatial and a temporal one.

  Returns:
    An arg_scope to build the network in.
  """
  batch_norm_params = {
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'fused': False,
      'renorm': use_renorm,
      # As upstream's: the moving statistics also in 'moving_vars'.
      'variables_collections': {
          'beta': None,
          'gamma': None,
          'moving_mean': ['moving_vars'],
          'moving_variance': ['moving_vars'],
      },
  }
  with slim.arg_scope([slim.conv3d],
                      weights_regularizer=slim.l2_regularizer(weight_decay),
                      activation_fn=tf.nn.relu,
                      normalizer_fn=slim.batch_norm,
                      normalizer_params=batch_norm_params):
    with slim.arg_scope([conv3d_spatiotemporal],
                        separable=separable_conv3d) as scope:
      return scope


def _temporal_identity_initializer(shape, dtype=tf.float32,
                                   partition_info=None):
  """Starts a k x 1 x 1 convolution from c to c channels as the identity.

  The middle frame of the kernel passes each channel through and the others
  are 0, so a separable network starts as its 2-D counterpart; S3D-G needs
  that to converge.
  """
  del partition_info  # Unused; part of the initializer signature.
  frames, height, width, depth_in, depth_out = shape
  if height != 1 or width != 1 or depth_in != depth_out or frames % 2 == 0:
    raise ValueError(
        'the identity start needs a kernel [odd frames, 1, 1, c, c], got %r'
        % (list(shape),))
  kernel = np.zeros(shape, dtype=np.float32)
  kernel[frames // 2, 0, 0] = np.eye(depth_in, dtype=np.float32)
  return tf.constant(kernel, dtype=dtype)


@slim.add_arg_scope
def conv3d_spatiotemporal(inputs, num_outputs, kernel_size, stride=1,
                          separable=False, scope=None, **kwargs):
  """A 3-D convolution, or a spatial then a temporal one when separable.

  Args:
    inputs: clips [batch, frames, height, width, channels].
    num_outputs: number of output channels.
    kernel_size: [frames, height, width].
    stride: an int or [frames, height, width].
    separable: whether a kernel that spans more than one frame becomes a
      1 x height x width convolution (named `scope`) followed by a
      frames x 1 x 1 one (`scope`/temporal) with biases instead of batch
      norm, started as the identity.
    scope: the layer's name.
    **kwargs: further arguments of slim.conv3d.

  Returns:
    The output [batch, frames', height', width', num_outputs].
  """
  if not separable or kernel_size[0] == 1:
    return slim.conv3d(inputs, num_outputs, kernel_size, stride=stride,
                       scope=scope, **kwargs)
  strides = stride if isinstance(stride, (list, tuple)) else [stride] * 3
  net = slim.conv3d(inputs, num_outputs, [1] + list(kernel_size[1:]),
                    stride=[1] + list(strides[1:]), scope=scope, **kwargs)
  return slim.conv3d(net, num_outputs, [kernel_size[0], 1, 1],
                     stride=[strides[0], 1, 1], normalizer_fn=None,
                     weights_initializer=_temporal_identity_initializer,
                     scope=scope + '/temporal')


def self_gating(net, scope):
  """Multiplies each channel by a sigmoid of a mix of all channels' means.

  Args:
    net: features [batch, frames, height, width, channels].
    scope: the name of the layer gated; the gate's weights are
      `scope`/self_gating/transformer_W/weights, [1, 1, 1, c, c].

  Returns:
    The gated features, the shape of `net`.
  """
  average = tf.reduce_mean(net, [1, 2, 3], keepdims=True)
  gate = slim.conv3d(average, net.shape[-1], [1, 1, 1], activation_fn=None,
                     normalizer_fn=None, biases_initializer=None,
                     weights_initializer=tf.truncated_normal_initializer(
                         stddev=0.01),
                     scope=scope + '/self_gating/transformer_W')
  return tf.sigmoid(gate) * net


def _inception_block(net, depths, temporal_kernel_size, gated, scope):
  """Inception v1's four branches on clips, concatenated."""
  ones, reduce3, threes, reduce5, fives, pool = depths

  def gate(branch, name):
    return self_gating(branch, name) if gated else branch

  with tf.variable_scope(scope):
    with tf.variable_scope('Branch_0'):
      branch_0 = gate(slim.conv3d(net, ones, [1, 1, 1],
                                  scope='Conv2d_0a_1x1'), 'Conv2d_0a_1x1')
    branches = [branch_0]
    for index, (reduced, depth) in enumerate(((reduce3, threes),
                                              (reduce5, fives)), 1):
      with tf.variable_scope('Branch_%d' % index):
        branch = slim.conv3d(net, reduced, [1, 1, 1], scope='Conv2d_0a_1x1')
        branch = conv3d_spatiotemporal(
            branch, depth, [temporal_kernel_size, 3, 3],
            scope='Conv2d_0b_3x3')
        branches.append(gate(branch, 'Conv2d_0b_3x3'))
    with tf.variable_scope('Branch_3'):
      branch_3 = slim.max_pool3d(net, [3, 3, 3], scope='MaxPool_0a_3x3')
      branch_3 = slim.conv3d(branch_3, pool, [1, 1, 1],
                             scope='Conv2d_0b_1x1')
      branches.append(gate(branch_3, 'Conv2d_0b_1x1'))
    return tf.concat(branches, 4)


def inception_3d_base(inputs, first_temporal_kernel_size,
                      temporal_conv_startat, gating_startat,
                      final_endpoint='Mixed_5c', min_depth=16,
                      depth_multiplier=1.0, scope='InceptionV1'):
  """Inflated Inception v1 from the clips to `final_endpoint`.

  Args:
    inputs: clips [batch, frames, height, width, channels].
    first_temporal_kernel_size: frames spanned by the first convolution: 1,
      3, 5 or 7.
    temporal_conv_startat: the first layer of START_POINTS whose 3x3
      convolutions span 3 frames (those before span 1); None for none.
    gating_startat: the first layer of START_POINTS that is self-gated;
      None for none.
    final_endpoint: the last layer built, one of END_POINTS.
    min_depth: the fewest channels of a convolution when depth_multiplier
      is below 1.
    depth_multiplier: multiplies every convolution's channels.
    scope: the variable scope (a name or a VariableScope).

  Returns:
    (net, end_points): the output of `final_endpoint` and a dict with the
    output of every layer up to it, by name.

  Raises:
    ValueError: if an argument is not one of its documented values.
  """
  if first_temporal_kernel_size not in (1, 3, 5, 7):
    raise ValueError('first_temporal_kernel_size must be 1, 3, 5 or 7, got %r'
                     % (first_temporal_kernel_size,))
  for argument, value in (('temporal_conv_startat', temporal_conv_startat),
                          ('gating_startat', gating_startat)):
    if value is not None and value not in START_POINTS:
      raise ValueError('%s must be None or one of %s, got %r'
                       % (argument, ', '.join(START_POINTS), value))
  if final_endpoint not in END_POINTS:
    raise ValueError('final_endpoint must be one of %s, got %r'
                     % (', '.join(END_POINTS), final_endpoint))
  if depth_multiplier <= 0:
    raise ValueError('depth_multiplier must be > 0, got %r'
                     % (depth_multiplier,))

  def depth(channels):
    return max(int(channels * depth_multiplier), min_depth)

  end_points = {}
  temporal_kernel_size = 1
  gated = False
  net = inputs
  with tf.variable_scope(scope, 'InceptionV1', [inputs]), \
       slim.arg_scope([slim.conv3d], weights_initializer=(
           tf.truncated_normal_initializer(stddev=0.01))), \
       slim.arg_scope([slim.conv3d, slim.max_pool3d, conv3d_spatiotemporal],
                      stride=1, padding='SAME'):
    for name, kind, layer in _LAYERS:
      temporal_kernel_size = 3 if name == temporal_conv_startat else (
          temporal_kernel_size)
      gated = gated or name == gating_startat
      if kind == 'first_conv':
        # Separable is slow this early: always one 3-D convolution.
        net = conv3d_spatiotemporal(
            net, depth(layer), [first_temporal_kernel_size, 7, 7], stride=2,
            separable=False, scope=name)
      elif kind == 'pool':
        kernel, stride = layer
        net = slim.max_pool3d(net, kernel, stride=stride, scope=name)
      elif kind == 'conv_1x1':
        net = slim.conv3d(net, depth(layer), [1, 1, 1], scope=name)
      elif kind == 'conv_3x3':
        net = conv3d_spatiotemporal(
            net, depth(layer), [temporal_kernel_size, 3, 3], scope=name)
        if gated:
          net = self_gating(net, name)
      else:
        net = _inception_block(net, [depth(d) for d in layer],
                               temporal_kernel_size, gated, name)
      end_points[name] = net
      if name == final_endpoint:
        break
  return net, end_points


def _reduced_kernel_size(net, kernel_size):
  # The 2x7x7 pool fits 64-frame 224x224 clips; shrink it to smaller ones
  # whose size is known when the graph is built.
  sizes = net.shape.as_list()[1:4]
  if None in sizes:
    return kernel_size
  return [min(size, kernel) for size, kernel in zip(sizes, kernel_size)]


def classify_clips(inputs, build_base, num_classes, dropout_keep_prob,
                   is_training, prediction_fn, spatial_squeeze, reuse,
                   scope):
  """A network of this module: its base, then the classifier of both.

  The classifier, in the `Logits` scope: a 2x7x7 average pool, dropout and
  a 1x1x1 convolution give logits per remaining frame, averaged over them.

  Args:
    inputs: clips [batch, frames, height, width, 3].
    build_base: build_base(inputs, scope) -> (net, end_points), e.g. a
      partial of `inception_3d_base`.
    num_classes: number of classes; 0 or None builds no classifier and
      returns the pooled features averaged over frames instead (before
      dropout).
    dropout_keep_prob: probability that a feature is kept in training.
    is_training: whether batch norm and dropout run in training mode.
    prediction_fn: turns logits into predictions.
    spatial_squeeze: whether to return [batch, n] rather than
      [batch, 1, 1, n].
    reuse: whether to reuse the variables of `scope`.
    scope: the variable scope.

  Returns:
    (logits, end_points): logits [batch, num_classes] (or features
    [batch, depth]); end_points has every layer built and, with classes,
    'Logits' and 'Predictions'.
  """
  with tf.variable_scope(scope, 'InceptionV1', [inputs],
                         reuse=reuse) as variable_scope, \
       slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    net, end_points = build_base(inputs, scope=variable_scope)
    return _logits(net, end_points, num_classes, dropout_keep_prob,
                   spatial_squeeze, prediction_fn), end_points


def _logits(net, end_points, num_classes, dropout_keep_prob,
            spatial_squeeze, prediction_fn):
  with tf.variable_scope('Logits'):
    net = slim.avg_pool3d(net, _reduced_kernel_size(net, [2, 7, 7]),
                          stride=1, scope='AvgPool_0a_7x7')
    if num_classes:
      net = slim.dropout(net, dropout_keep_prob, scope='Dropout_0b')
      net = slim.conv3d(net, num_classes, [1, 1, 1], activation_fn=None,
                        normalizer_fn=None, scope='Conv2d_0c_1x1')
    net = tf.reduce_mean(net, axis=1)
    if spatial_squeeze:
      net = tf.squeeze(net, [1, 2], name='SpatialSqueeze')
    if num_classes:
      end_points['Logits'] = net
      end_points['Predictions'] = prediction_fn(net, scope='Predictions')
  return net
