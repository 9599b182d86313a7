"""MobileNet v1, with the variable names of the published Slim checkpoints.

"MobileNets: Efficient Convolutional Neural Networks for Mobile Vision
Applications", Howard et al., 2017 (https://arxiv.org/abs/1704.04861).

A 3x3 convolution followed by 13 depthwise-separable blocks (a 3x3 depthwise
convolution, then a 1x1 pointwise convolution, each with batch norm and
ReLU6), global average pooling and a 1x1 convolution as classifier. Layer
names are those of the Slim checkpoints `mobilenet_v1_{1.0,0.75,0.5,0.25}_*`:
`MobilenetV1/Conv2d_0/weights`, `MobilenetV1/Conv2d_1_depthwise/
depthwise_weights`, `MobilenetV1/Conv2d_1_pointwise/weights`, ...,
`MobilenetV1/Logits/Conv2d_1c_1x1/weights`.

Usage:
  with slim.arg_scope(mobilenet_v1_arg_scope()):
    logits, end_points = mobilenet_v1(images, num_classes=1001,
                                      is_training=False)
"""

import collections
import functools

from nets import mobilenet_common
from tf2_compat.slim_compat import slim, tf

Conv = collections.namedtuple('Conv', ['kernel', 'stride', 'depth'])
DepthSepConv = collections.namedtuple('DepthSepConv',
                                      ['kernel', 'stride', 'depth'])

# Layer i of this list is named Conv2d_i; the stride-2 layers halve the
# resolution, five times in all (224 -> 7).
MOBILENET_V1_CONV_DEFS = (
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
)


def _reduced_kernel_size_for_small_input(net, kernel_size):
  # A fixed 7x7 average pool needs a 224 input; shrink it for smaller inputs
  # whose size is known when the graph is built.
  height, width = net.get_shape().as_list()[1:3]
  if height is None or width is None:
    return kernel_size
  return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def mobilenet_v1(inputs,
                 num_classes=1000,
                 is_training=True,
                 dropout_keep_prob=0.999,
                 depth_multiplier=1.0,
                 min_depth=8,
                 conv_defs=MOBILENET_V1_CONV_DEFS,
                 prediction_fn=slim.softmax,
                 spatial_squeeze=True,
                 global_pool=False,
                 reuse=None,
                 scope='MobilenetV1'):
  """Builds MobileNet v1 on `inputs`.

  Args:
    inputs: float tensor [batch, height, width, 3].
    num_classes: number of classes (the published checkpoints have 1001).
      0 or None returns the pooled features instead of logits.
    is_training: whether batch norm uses batch statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS) and dropout is active.
    dropout_keep_prob: probability that a pooled feature is kept in training.
    depth_multiplier: scales the number of channels of every layer; 0.75,
      0.5 and 0.25 give the published reduced networks.
    min_depth: no layer gets fewer channels than this.
    conv_defs: the layers, as a sequence of `Conv` and `DepthSepConv`.
    prediction_fn: turns logits into end_points['Predictions'].
    spatial_squeeze: whether to return logits (and features) as
      [batch, depth] rather than [batch, 1, 1, depth].
    global_pool: if True, average over whatever spatial size the last layer
      has; if False, use the 7x7 average pool of the published networks.
    reuse: whether to reuse the variables of `scope`.
    scope: variable scope of the network.

  Returns:
    logits: [batch, num_classes] (or pooled features [batch, depth] when
      num_classes is 0 or None).
    end_points: dict with one entry per layer ('Conv2d_0',
      'Conv2d_1_depthwise', 'Conv2d_1_pointwise', ..., 'Conv2d_13_pointwise'),
      the pooled features ('AvgPool_1a' or 'global_pool') and, with classes,
      'Logits' and 'Predictions'.

  Raises:
    ValueError: if depth_multiplier is not positive or a layer definition
      is neither a `Conv` nor a `DepthSepConv`.
  """
  if depth_multiplier <= 0:
    raise ValueError(
        'depth_multiplier must be > 0, got %r' % (depth_multiplier,))

  def depth(channels):
    return max(int(channels * depth_multiplier), min_depth)

  end_points = {}
  with tf.variable_scope(scope, 'MobilenetV1', [inputs], reuse=reuse):
    with slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training), \
         slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding='SAME'):
      net = inputs
      for i, conv_def in enumerate(conv_defs):
        if isinstance(conv_def, Conv):
          name = 'Conv2d_%d' % i
          net = end_points[name] = slim.conv2d(
              net, depth(conv_def.depth), conv_def.kernel,
              stride=conv_def.stride, scope=name)
        elif isinstance(conv_def, DepthSepConv):
          name = 'Conv2d_%d_depthwise' % i
          # num_outputs=None makes separable_conv2d depthwise only.
          net = end_points[name] = slim.separable_conv2d(
              net, None, conv_def.kernel, depth_multiplier=1,
              stride=conv_def.stride, scope=name)
          name = 'Conv2d_%d_pointwise' % i
          net = end_points[name] = slim.conv2d(
              net, depth(conv_def.depth), [1, 1], stride=1, scope=name)
        else:
          raise ValueError('unknown layer definition %r in conv_defs; use '
                           'Conv or DepthSepConv' % (conv_def,))

      with tf.variable_scope('Logits'):
        if global_pool:
          net = end_points['global_pool'] = tf.reduce_mean(
              net, [1, 2], keepdims=True, name='global_pool')
        else:
          kernel_size = _reduced_kernel_size_for_small_input(net, [7, 7])
          net = end_points['AvgPool_1a'] = slim.avg_pool2d(
              net, kernel_size, padding='VALID', scope='AvgPool_1a')
        logits = mobilenet_common.classifier(
            net, num_classes, dropout_keep_prob, spatial_squeeze,
            dropout_scope='Dropout_1b')
      if not num_classes:
        return logits, end_points
      end_points['Logits'] = logits
      end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


mobilenet_v1.default_image_size = 224
# SAME padding throughout, and the last pooling shrinks to the features.
mobilenet_v1.min_image_size = 1


def _with_depth_multiplier(depth_multiplier):
  network = functools.partial(mobilenet_v1, depth_multiplier=depth_multiplier)
  functools.update_wrapper(network, mobilenet_v1)
  return network


mobilenet_v1_075 = _with_depth_multiplier(0.75)
mobilenet_v1_050 = _with_depth_multiplier(0.50)
mobilenet_v1_025 = _with_depth_multiplier(0.25)


def mobilenet_v1_arg_scope(weight_decay=0.00004,
                           stddev=0.09,
                           regularize_depthwise=False,
                           batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001):
  """Layer defaults for MobileNet v1: batch norm, ReLU6, L2 decay.

  Args:
    weight_decay: L2 regularization coefficient of the weights.
    stddev: standard deviation of the truncated-normal weight initializer.
    regularize_depthwise: whether to decay the depthwise weights too.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.

  Returns:
    An arg_scope to build `mobilenet_v1` in.
  """
  return mobilenet_common.training_arg_scope(
      weight_decay, stddev, regularize_depthwise, batch_norm_decay,
      batch_norm_epsilon)
