"""MobileNet v2, with the variable names of the published Slim checkpoints.

"MobileNetV2: Inverted Residuals and Linear Bottlenecks", Sandler et al.,
2018 (https://arxiv.org/abs/1801.04381).

A 3x3 convolution, 17 inverted-residual blocks (1x1 expansion, 3x3
depthwise convolution, linear 1x1 projection, with a shortcut where input
and output shapes agree), a 1x1 convolution to 1280 channels, global average
pooling and a 1x1 convolution as classifier. Layer names are those of the
Slim checkpoints `mobilenet_v2_{1.4,1.0,0.35}_224`: `MobilenetV2/Conv/
weights`, `MobilenetV2/expanded_conv/depthwise/depthwise_weights`,
`MobilenetV2/expanded_conv_1/expand/weights`, ..., `MobilenetV2/Conv_1/
weights`, `MobilenetV2/Logits/Conv2d_1c_1x1/weights`.

Usage:
  with slim.arg_scope(mobilenet_v2_arg_scope()):
    logits, end_points = mobilenet_v2(images, num_classes=1001,
                                      is_training=False)
"""

import collections
import functools

from nets import mobilenet_common
from tf2_compat.slim_compat import slim, tf

InvertedResidual = collections.namedtuple('InvertedResidual',
                                          ['expansion', 'depth', 'stride'])

# Table 2 of the paper, one entry per block. Block i is named
# expanded_conv_i (the first one just expanded_conv).
MOBILENET_V2_BLOCKS = (
    InvertedResidual(expansion=1, depth=16, stride=1),
    InvertedResidual(expansion=6, depth=24, stride=2),
    InvertedResidual(expansion=6, depth=24, stride=1),
    InvertedResidual(expansion=6, depth=32, stride=2),
    InvertedResidual(expansion=6, depth=32, stride=1),
    InvertedResidual(expansion=6, depth=32, stride=1),
    InvertedResidual(expansion=6, depth=64, stride=2),
    InvertedResidual(expansion=6, depth=64, stride=1),
    InvertedResidual(expansion=6, depth=64, stride=1),
    InvertedResidual(expansion=6, depth=64, stride=1),
    InvertedResidual(expansion=6, depth=96, stride=1),
    InvertedResidual(expansion=6, depth=96, stride=1),
    InvertedResidual(expansion=6, depth=96, stride=1),
    InvertedResidual(expansion=6, depth=160, stride=2),
    InvertedResidual(expansion=6, depth=160, stride=1),
    InvertedResidual(expansion=6, depth=160, stride=1),
    InvertedResidual(expansion=6, depth=320, stride=1),
)
FIRST_CONV_DEPTH = 32
LAST_CONV_DEPTH = 1280


def make_divisible(value, divisor=8, min_value=None):
  """Rounds a channel count to the nearest multiple of `divisor`.

  The published checkpoints were built with this rule, so channel counts of
  scaled networks depend on it exactly.

  Args:
    value: the unrounded channel count (may be a float).
    divisor: the result is a multiple of this.
    min_value: the result is at least this (default: `divisor`).

  Returns:
    An int, never more than 10% below `value`.
  """
  if min_value is None:
    min_value = divisor
  rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
  if rounded < 0.9 * value:
    rounded += divisor
  return rounded


def _inverted_residual(net, block, depth, scope):
  """One block: expand (1x1), depthwise (3x3), linear projection (1x1)."""
  input_depth = net.get_shape().as_list()[-1]
  with tf.variable_scope(scope):
    shortcut = net
    # The expansion width always rounds to a multiple of 8, whatever the
    # depth multiplier rounds to; a factor of 1 means no expansion layer.
    if block.expansion > 1:
      net = slim.conv2d(net, make_divisible(input_depth * block.expansion),
                        [1, 1], scope='expand')
    net = slim.separable_conv2d(net, None, [3, 3], depth_multiplier=1,
                                stride=block.stride, scope='depthwise')
    net = slim.conv2d(net, depth, [1, 1], activation_fn=None, scope='project')
    if block.stride == 1 and input_depth == depth:
      net = tf.add(net, shortcut, name='add')
  return net


def mobilenet_v2(inputs,
                 num_classes=1001,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 depth_multiplier=1.0,
                 finegrain_classification_mode=False,
                 min_depth=8,
                 divisible_by=8,
                 blocks=MOBILENET_V2_BLOCKS,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 reuse=None,
                 scope='MobilenetV2'):
  """Builds MobileNet v2 on `inputs`.

  Args:
    inputs: float tensor [batch, height, width, 3].
    num_classes: number of classes (the published checkpoints have 1001).
      0 or None returns the pooled features instead of logits.
    is_training: whether batch norm uses batch statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS) and dropout is active.
    dropout_keep_prob: probability that a pooled feature is kept in training.
    depth_multiplier: scales the channels of every layer, rounded with
      `make_divisible`; 1.4 and 0.35 give the published scaled networks.
    finegrain_classification_mode: if True and depth_multiplier < 1, the
      last convolution keeps its 1280 channels (as in the published 0.35
      network).
    min_depth: no layer gets fewer channels than this.
    divisible_by: channel counts scaled by depth_multiplier are rounded to a
      multiple of this.
    blocks: the inverted-residual blocks, as `InvertedResidual` tuples.
    prediction_fn: turns logits into end_points['Predictions'].
    spatial_squeeze: whether to return logits (and features) as
      [batch, depth] rather than [batch, 1, 1, depth].
    reuse: whether to reuse the variables of `scope`.
    scope: variable scope of the network.

  Returns:
    logits: [batch, num_classes] (or pooled features [batch, depth] when
      num_classes is 0 or None).
    end_points: dict with one entry per layer ('layer_1' for `Conv`,
      'layer_2' ... for the blocks, the last for `Conv_1`), 'global_pool'
      and, with classes, 'Logits' and 'Predictions'.

  Raises:
    ValueError: if depth_multiplier is not positive.
  """
  if depth_multiplier <= 0:
    raise ValueError(
        'depth_multiplier must be > 0, got %r' % (depth_multiplier,))

  def depth(channels):
    return make_divisible(channels * depth_multiplier, divisible_by, min_depth)

  if finegrain_classification_mode and depth_multiplier < 1:
    last_depth = LAST_CONV_DEPTH
  else:
    last_depth = depth(LAST_CONV_DEPTH)

  end_points = {}
  with tf.variable_scope(scope, 'MobilenetV2', [inputs], reuse=reuse):
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training), \
         slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding='SAME'):
      net = end_points['layer_1'] = slim.conv2d(
          inputs, depth(FIRST_CONV_DEPTH), [3, 3], stride=2, scope='Conv')
      for i, block in enumerate(blocks):
        name = 'expanded_conv_%d' % i if i else 'expanded_conv'
        net = end_points['layer_%d' % (i + 2)] = _inverted_residual(
            net, block, depth(block.depth), scope=name)
      net = end_points['layer_%d' % (len(blocks) + 2)] = slim.conv2d(
          net, last_depth, [1, 1], scope='Conv_1')

      logits = mobilenet_common.pooled_logits(
          net, end_points, num_classes, dropout_keep_prob, spatial_squeeze,
          prediction_fn)
  return logits, end_points


mobilenet_v2.default_image_size = 224
# SAME padding throughout, and a global pooling.
mobilenet_v2.min_image_size = 1


def _scaled(**overrides):
  network = functools.partial(mobilenet_v2, **overrides)
  functools.update_wrapper(network, mobilenet_v2)
  return network


mobilenet_v2_140 = _scaled(depth_multiplier=1.4)
mobilenet_v2_035 = _scaled(depth_multiplier=0.35,
                           finegrain_classification_mode=True)


def mobilenet_v2_arg_scope(weight_decay=0.00004,
                           stddev=0.09,
                           batch_norm_decay=0.997,
                           batch_norm_epsilon=0.001):
  """Layer defaults for MobileNet v2: batch norm, ReLU6, L2 decay.

  The depthwise weights are not decayed, as in the published training.

  Args:
    weight_decay: L2 regularization coefficient of the convolution weights.
    stddev: standard deviation of the truncated-normal weight initializer.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.

  Returns:
    An arg_scope to build `mobilenet_v2` in.
  """
  return mobilenet_common.training_arg_scope(
      weight_decay, stddev, regularize_depthwise=False,
      batch_norm_decay=batch_norm_decay,
      batch_norm_epsilon=batch_norm_epsilon)
