"""MobileNet v3 and MobileNet EdgeTPU, with the variable names of the
published Slim checkpoints.

"Searching for MobileNetV3", Howard et al., 2019
(https://arxiv.org/abs/1905.02244), and MobileNet EdgeTPU, its sibling
searched for the Edge TPU of the Pixel 4 (published with Slim's MobileNet
code, without a paper of its own).

Both keep MobileNet v2's stack: a 3x3 convolution, inverted-residual blocks
(1x1 expansion, depthwise convolution, linear 1x1 projection, a shortcut
where input and output shapes agree), a 1x1 convolution, global pooling
and a 1x1 convolution as classifier. What changes, block by block, is data
(`Block`):
  * the depthwise kernel (3x3 or 5x5) and the activation, ReLU ('RE') or
    hard-swish ('HS', x * ReLU6(x + 3) / 6);
  * squeeze-and-excite: the expanded features, pooled, pass two 1x1
    convolutions with biases (`squeeze_excite/Conv`, ReLU, to a quarter of
    the channels; `squeeze_excite/Conv_1`, a hard sigmoid) whose output
    scales each channel;
  * fused blocks (EdgeTPU): one full kxk convolution `expand` does the
    expansion and the depthwise convolution's spatial work.
MobileNet v3 pools its last convolution `Conv_1` before one more 1x1
convolution, `Conv_2`, with biases and no batch norm; the classifier reads
its output. The minimalistic variants have the same layers without
squeeze-and-excite, hard-swish or 5x5 kernels.

Layer names are those of the Slim checkpoints v3-large_224_1.0_float,
v3-small_224_1.0_float, v3-large-minimalistic_224_1.0_float and
v3-small-minimalistic_224_1.0_float (scope `MobilenetV3`), and
mobilenet_edgetpu_224_1.0 and mobilenet_edgetpu_224_0.75 (scope
`MobilenetEdgeTPU`): `MobilenetV3/Conv/weights`,
`MobilenetV3/expanded_conv/depthwise/depthwise_weights`,
`MobilenetV3/expanded_conv_3/squeeze_excite/Conv/biases`, ...,
`MobilenetV3/Conv_2/weights`, `MobilenetV3/Logits/Conv2d_1c_1x1/weights`.

Usage:
  with slim.arg_scope(mobilenet_v3_arg_scope()):
    logits, end_points = mobilenet_v3_large(images, num_classes=1001,
                                            is_training=False)
"""

import collections
import functools

from nets import mobilenet_common
from nets import mobilenet_v2
from tf2_compat.slim_compat import slim, tf

# `expansion` multiplies the block's input depth (rounded to a multiple of
# 8): the "exp size" of the paper's tables over the depth of the block
# before. `fused` blocks replace expansion and depthwise convolution with
# one kxk convolution; `residual=False` drops a shortcut the shapes allow.
Block = collections.namedtuple(
    'Block', ['kernel', 'expansion', 'depth', 'stride', 'squeeze_excite',
              'activation', 'fused', 'residual'],
    defaults=(False, True))

# A convolution outside the blocks: its depth and activation.
Conv = collections.namedtuple('Conv', ['depth', 'activation'])

# first: the 3x3 stride-2 convolution `Conv`; last: the 1x1 convolution
# `Conv_1` after the blocks; head: the 1x1 convolution `Conv_2` on the
# pooled `Conv_1`, with biases and no batch norm (None: no such layer).
Architecture = collections.namedtuple(
    'Architecture', ['first', 'blocks', 'last', 'head'])

# The paper's Table 1 (kernel, exp size / input depth, #out, stride, SE,
# NL).
V3_LARGE = Architecture(
    first=Conv(16, 'HS'),
    blocks=(
        Block(3, 1, 16, 1, False, 'RE'),
        Block(3, 4, 24, 2, False, 'RE'),
        Block(3, 3, 24, 1, False, 'RE'),
        Block(5, 3, 40, 2, True, 'RE'),
        Block(5, 3, 40, 1, True, 'RE'),
        Block(5, 3, 40, 1, True, 'RE'),
        Block(3, 6, 80, 2, False, 'HS'),
        Block(3, 200 / 80, 80, 1, False, 'HS'),
        Block(3, 184 / 80, 80, 1, False, 'HS'),
        Block(3, 184 / 80, 80, 1, False, 'HS'),
        Block(3, 6, 112, 1, True, 'HS'),
        Block(3, 6, 112, 1, True, 'HS'),
        Block(5, 6, 160, 2, True, 'HS'),
        Block(5, 6, 160, 1, True, 'HS'),
        Block(5, 6, 160, 1, True, 'HS'),
    ),
    last=Conv(960, 'HS'),
    head=Conv(1280, 'HS'))

# The paper's Table 2.
V3_SMALL = Architecture(
    first=Conv(16, 'HS'),
    blocks=(
        Block(3, 1, 16, 2, True, 'RE'),
        Block(3, 72 / 16, 24, 2, False, 'RE'),
        Block(3, 88 / 24, 24, 1, False, 'RE'),
        Block(5, 4, 40, 2, True, 'HS'),
        Block(5, 6, 40, 1, True, 'HS'),
        Block(5, 6, 40, 1, True, 'HS'),
        Block(5, 3, 48, 1, True, 'HS'),
        Block(5, 3, 48, 1, True, 'HS'),
        Block(5, 6, 96, 2, True, 'HS'),
        Block(5, 6, 96, 1, True, 'HS'),
        Block(5, 6, 96, 1, True, 'HS'),
    ),
    last=Conv(576, 'HS'),
    head=Conv(1024, 'HS'))

# Slim's MobileNet EdgeTPU: ReLU throughout, no squeeze-and-excite, fused
# blocks where the feature maps are large, no `Conv_2`.
EDGETPU = Architecture(
    first=Conv(32, 'RE'),
    blocks=(
        Block(3, 1, 16, 1, False, 'RE', fused=True),
        Block(3, 8, 32, 2, False, 'RE', fused=True),
        Block(3, 4, 32, 1, False, 'RE', fused=True),
        Block(3, 4, 32, 1, False, 'RE', fused=True),
        Block(3, 4, 32, 1, False, 'RE', fused=True),
        Block(3, 8, 48, 2, False, 'RE', fused=True),
        Block(3, 4, 48, 1, False, 'RE', fused=True),
        Block(3, 4, 48, 1, False, 'RE', fused=True),
        Block(3, 4, 48, 1, False, 'RE', fused=True),
        Block(3, 8, 96, 2, False, 'RE'),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(3, 8, 96, 1, False, 'RE', residual=False),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(3, 4, 96, 1, False, 'RE'),
        Block(5, 8, 160, 2, False, 'RE'),
        Block(5, 4, 160, 1, False, 'RE'),
        Block(5, 4, 160, 1, False, 'RE'),
        Block(5, 4, 160, 1, False, 'RE'),
        Block(3, 8, 192, 1, False, 'RE'),
    ),
    last=Conv(1280, 'RE'),
    head=None)


def minimalistic(architecture):
  """`architecture` without squeeze-and-excite, hard-swish or 5x5 kernels."""
  return Architecture(
      first=architecture.first._replace(activation='RE'),
      blocks=tuple(block._replace(kernel=3, squeeze_excite=False,
                                  activation='RE')
                   for block in architecture.blocks),
      last=architecture.last._replace(activation='RE'),
      head=architecture.head._replace(activation='RE'))


V3_LARGE_MINIMALISTIC = minimalistic(V3_LARGE)
V3_SMALL_MINIMALISTIC = minimalistic(V3_SMALL)


def hard_swish(x):
  """x * ReLU6(x + 3) / 6: swish with its sigmoid made piecewise linear."""
  with tf.name_scope('hard_swish'):
    return x * tf.nn.relu6(x + 3.0) * (1.0 / 6.0)


def _hard_sigmoid(x):
  # 0.16667 rather than 1/6: upstream's factor, which its checkpoints were
  # trained with.
  return tf.nn.relu6(x + 3.0) * 0.16667


ACTIVATIONS = {'RE': tf.nn.relu, 'HS': hard_swish}


def _squeeze_excite(net):
  """Scales each channel of `net` by a gate computed from all channels."""
  depth = net.get_shape().as_list()[-1]
  with tf.variable_scope('squeeze_excite'):
    pooled = tf.reduce_mean(net, [1, 2], keepdims=True, name='pool')
    squeezed = slim.conv2d(pooled, mobilenet_v2.make_divisible(depth / 4),
                           [1, 1], normalizer_fn=None,
                           activation_fn=tf.nn.relu, scope='Conv')
    gate = slim.conv2d(squeezed, depth, [1, 1], normalizer_fn=None,
                       activation_fn=_hard_sigmoid, scope='Conv_1')
    return tf.multiply(net, gate, name='excite')


def _block(net, block, depth, scope, end_points, layer):
  """One block, named `scope`; its end points are `layer` and `layer/...`.

  The expansion layer exists only where it widens the features (so not
  for an expansion factor of 1); a fused block's expansion is its kxk
  convolution, and has no depthwise convolution after it.
  """
  input_depth = net.get_shape().as_list()[-1]
  activation = ACTIVATIONS[block.activation]
  kernel = [block.kernel, block.kernel]
  with tf.variable_scope(scope):
    shortcut = net
    expanded_depth = mobilenet_v2.make_divisible(
        input_depth * block.expansion)
    if expanded_depth > input_depth:
      if block.fused:
        expand_kernel, expand_stride = kernel, block.stride
      else:
        expand_kernel, expand_stride = [1, 1], 1
      net = slim.conv2d(net, expanded_depth, expand_kernel,
                        stride=expand_stride, activation_fn=activation,
                        scope='expand')
      end_points[layer + '/expansion_output'] = net
    if not block.fused:
      net = slim.separable_conv2d(net, None, kernel, depth_multiplier=1,
                                  stride=block.stride,
                                  activation_fn=activation, scope='depthwise')
      end_points[layer + '/depthwise_output'] = net
    if block.squeeze_excite:
      net = _squeeze_excite(net)
    net = slim.conv2d(net, depth, [1, 1], activation_fn=None, scope='project')
    if block.residual and block.stride == 1 and input_depth == depth:
      net = tf.add(net, shortcut, name='add')
  end_points[layer] = end_points[layer + '/output'] = net
  return net


def mobilenet_v3(inputs,
                 num_classes=1001,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 depth_multiplier=1.0,
                 finegrain_classification_mode=False,
                 min_depth=8,
                 divisible_by=8,
                 architecture=V3_LARGE,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 scope='MobilenetV3'):
  """Builds a MobileNet v3 (or, given `EDGETPU`, MobileNet EdgeTPU) on `inputs`.

  Args:
    inputs, num_classes, is_training, dropout_keep_prob, min_depth,
      divisible_by, prediction_fn, spatial_squeeze, reuse, scope: as for
      `mobilenet_v2.mobilenet_v2`.
    depth_multiplier: scales the channels of every layer, rounded with
      `make_divisible`; 0.75 gives the published mobilenet_edgetpu_075.
    finegrain_classification_mode: if True, the network's last convolution
      (`Conv_2`, or `Conv_1` without a head) keeps its channels whatever
      the depth multiplier, as in the published mobilenet_edgetpu_075.
    architecture: the layers, as an `Architecture`: V3_LARGE, V3_SMALL,
      V3_LARGE_MINIMALISTIC, V3_SMALL_MINIMALISTIC or EDGETPU.

  Returns:
    logits: [batch, num_classes] (or pooled features [batch, depth] when
      num_classes is 0 or None).
    end_points: dict with one entry per layer as upstream numbers them
      ('layer_1' for `Conv`, 'layer_2' ... for the blocks, then `Conv_1`
      and, with a head, the pooling and `Conv_2`), 'layer_N/output',
      'layer_N/expansion_output' and 'layer_N/depthwise_output' inside the
      blocks, 'global_pool' and, with classes, 'Logits' and 'Predictions'.

  Raises:
    ValueError: if depth_multiplier is not positive.
  """
  if depth_multiplier <= 0:
    raise ValueError(
        'depth_multiplier must be > 0, got %r' % (depth_multiplier,))

  def depth(channels, final=False):
    if final and finegrain_classification_mode:
      return channels
    return mobilenet_v2.make_divisible(channels * depth_multiplier,
                                       divisible_by, min_depth)

  end_points = {}
  with tf.variable_scope(scope, 'MobilenetV3', [inputs], reuse=reuse):
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training), \
         slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding='SAME'):
      net = end_points['layer_1'] = slim.conv2d(
          inputs, depth(architecture.first.depth), [3, 3], stride=2,
          activation_fn=ACTIVATIONS[architecture.first.activation],
          scope='Conv')
      for i, block in enumerate(architecture.blocks):
        name = 'expanded_conv_%d' % i if i else 'expanded_conv'
        net = _block(net, block, depth(block.depth), name, end_points,
                     'layer_%d' % (i + 2))
      layer = len(architecture.blocks) + 2
      net = end_points['layer_%d' % layer] = slim.conv2d(
          net, depth(architecture.last.depth,
                     final=architecture.head is None), [1, 1],
          activation_fn=ACTIVATIONS[architecture.last.activation],
          scope='Conv_1')
      if architecture.head is not None:
        net = end_points['layer_%d' % (layer + 1)] = tf.reduce_mean(
            net, [1, 2], keepdims=True, name='AvgPool2D')
        net = end_points['layer_%d' % (layer + 2)] = slim.conv2d(
            net, depth(architecture.head.depth, final=True), [1, 1],
            normalizer_fn=None,
            activation_fn=ACTIVATIONS[architecture.head.activation],
            scope='Conv_2')

      logits = mobilenet_common.pooled_logits(
          net, end_points, num_classes, dropout_keep_prob, spatial_squeeze,
          prediction_fn)
  return logits, end_points


mobilenet_v3.default_image_size = 224
# SAME padding throughout, and global poolings.
mobilenet_v3.min_image_size = 1


def _variant(**overrides):
  network = functools.partial(mobilenet_v3, **overrides)
  functools.update_wrapper(network, mobilenet_v3)
  return network


mobilenet_v3_large = _variant(architecture=V3_LARGE)
mobilenet_v3_small = _variant(architecture=V3_SMALL)
mobilenet_v3_large_minimalistic = _variant(architecture=V3_LARGE_MINIMALISTIC)
mobilenet_v3_small_minimalistic = _variant(architecture=V3_SMALL_MINIMALISTIC)
mobilenet_edgetpu = _variant(architecture=EDGETPU, scope='MobilenetEdgeTPU')
mobilenet_edgetpu_075 = _variant(architecture=EDGETPU,
                                 scope='MobilenetEdgeTPU',
                                 depth_multiplier=0.75,
                                 finegrain_classification_mode=True)

# Upstream trains MobileNet v3 and EdgeTPU in MobileNet v2's arg scope
# (batch norm, L2 decay but on depthwise weights, batch-norm decay 0.997).
# Every layer here names its activation, so the scope's ReLU6 never applies.
mobilenet_v3_arg_scope = mobilenet_v2.mobilenet_v2_arg_scope
