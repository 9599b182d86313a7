"""Inception-ResNet v2, with the variable names of the Slim checkpoint.

"Inception-v4, Inception-ResNet and the Impact of Residual Connections on
Learning", Szegedy et al., 2016 (https://arxiv.org/abs/1602.07261),
Figures 15 to 19.

A stem of convolutions and max pools and an Inception block, Mixed_5b
(299 -> 35), 10 residual Inception-A blocks (block35), Reduction-A
(Mixed_6a, 35 -> 17), 20 residual Inception-B blocks (block17), Reduction-B
(Mixed_7a, 17 -> 8), 10 residual Inception-C blocks (block8, the last
unscaled and without activation), a 1x1 convolution to 1536 channels, then
an average pool over the 8x8 grid, dropout and a fully connected
classifier; an auxiliary classifier on the last 17x17 block helps
training. A residual block adds a 1x1 convolution of its branches (with
biases, no batch norm), scaled down (0.17, 0.10, 0.20: the paper's section
3.3 scales by 0.1 to 0.3 to keep networks this wide stable), to its input.
The stem is Slim's, not the paper's Figure 3: the checkpoint was trained
with it, and it gives 320 channels at 35x35, not 384, so the residual
projections have 320, 1088 and 2080 channels.

Layer names are those of the Slim checkpoint
`inception_resnet_v2_2016_08_30`: `InceptionResnetV2/Conv2d_1a_3x3/weights`,
`InceptionResnetV2/Repeat/block35_1/Branch_0/Conv2d_1x1/weights` (the
residual blocks of each size under `Repeat`, `Repeat_1`, `Repeat_2`, the
last one `Block8`), ..., `InceptionResnetV2/Conv2d_7b_1x1/weights`,
`InceptionResnetV2/AuxLogits/Logits/weights`,
`InceptionResnetV2/Logits/Logits/weights`.

Usage:
  with slim.arg_scope(inception_resnet_v2_arg_scope()):
    logits, end_points = inception_resnet_v2(images, num_classes=1001,
                                             is_training=False)
"""

import collections

from nets.inception_common import AvgPool, Conv, MaxPool, Mixed
from nets import inception_common
from tf2_compat.slim_compat import slim, tf

# Each output is the end point of its name: 299x299x3 -> 35x35x320.
STEM = inception_common.FIRST_CONVS + (
    MaxPool('MaxPool_3a_3x3', 2, 'VALID'),
    Conv('Conv2d_3b_1x1', 80, 1, 'VALID'),
    Conv('Conv2d_4a_3x3', 192, 1, 'VALID'),
    MaxPool('MaxPool_5a_3x3', 2, 'VALID'),
    Mixed('Mixed_5b', (
        (Conv('Conv2d_1x1', 96),),
        (Conv('Conv2d_0a_1x1', 48), Conv('Conv2d_0b_5x5', 64)),
        (Conv('Conv2d_0a_1x1', 64), Conv('Conv2d_0b_3x3', 96),
         Conv('Conv2d_0c_3x3', 96)),
        (AvgPool('AvgPool_0a_3x3'), Conv('Conv2d_0b_1x1', 64)))),
)

# Reduction-A, Figure 7 with k=256, l=256, m=384, n=384: 35x35x320 ->
# 17x17x1088.
MIXED_6A = Mixed('Mixed_6a', (
    (Conv('Conv2d_1a_3x3', 384, 2, 'VALID'),),
    (Conv('Conv2d_0a_1x1', 256), Conv('Conv2d_0b_3x3', 256),
     Conv('Conv2d_1a_3x3', 384, 2, 'VALID')),
    (MaxPool('MaxPool_1a_3x3', 2, 'VALID'),),
))

# Reduction-B, Figure 18: 17x17x1088 -> 8x8x2080.
MIXED_7A = Mixed('Mixed_7a', (
    (Conv('Conv2d_0a_1x1', 256), Conv('Conv2d_1a_3x3', 384, 2, 'VALID')),
    (Conv('Conv2d_0a_1x1', 256), Conv('Conv2d_1a_3x3', 288, 2, 'VALID')),
    (Conv('Conv2d_0a_1x1', 256), Conv('Conv2d_0b_3x3', 288),
     Conv('Conv2d_1a_3x3', 320, 2, 'VALID')),
    (MaxPool('MaxPool_1a_3x3', 2, 'VALID'),),
))

ResidualBlock = collections.namedtuple(
    'ResidualBlock', ['name', 'repeats', 'scale', 'branches'])

# The residual blocks of each grid size, in order; block i of `name` is
# named name_i (from 1) under the scope `Repeat`, `Repeat_1`, `Repeat_2`.
# Their branches are concatenated and projected back to the input's depth.
BLOCK35 = ResidualBlock('block35', 10, 0.17, (  # Figure 16.
    (Conv('Conv2d_1x1', 32),),
    (Conv('Conv2d_0a_1x1', 32), Conv('Conv2d_0b_3x3', 32)),
    (Conv('Conv2d_0a_1x1', 32), Conv('Conv2d_0b_3x3', 48),
     Conv('Conv2d_0c_3x3', 64)),
))
BLOCK17 = ResidualBlock('block17', 20, 0.10, (  # Figure 17.
    (Conv('Conv2d_1x1', 192),),
    (Conv('Conv2d_0a_1x1', 128), Conv('Conv2d_0b_1x7', 160),
     Conv('Conv2d_0c_7x1', 192)),
))
BLOCK8 = ResidualBlock('block8', 9, 0.20, (  # Figure 19.
    (Conv('Conv2d_1x1', 192),),
    (Conv('Conv2d_0a_1x1', 192), Conv('Conv2d_0b_1x3', 224),
     Conv('Conv2d_0c_3x1', 256)),
))

# Upstream names the auxiliary classifier's 5x5 pool after a 3x3 convolution.
HEAD_NAMES = inception_common.HeadNames(
    aux_pool='Conv2d_1a_3x3', aux_conv='Conv2d_2a_5x5', aux_logits='Logits',
    pool='AvgPool_1a_8x8', dropout='Dropout')


def residual(net, branches, scale, activation_fn, scope):
  """One residual Inception block: `net` plus its scaled-down branches.

  Args:
    net: the block's input [batch, height, width, depth].
    branches: the branches, as in `inception_common.concat_branches`.
    scale: the factor of the projected branches before the sum.
    activation_fn: applied to the sum; None for none. With tf.nn.relu6 the
      scaled branches are first clipped to [-6, 6].
    scope: variable scope of the block.

  Returns:
    The block's output, of the shape of `net`.
  """
  with tf.variable_scope(scope):
    mixed = inception_common.concat_branches(net, branches)
    up = slim.conv2d(mixed, net.get_shape().as_list()[3], [1, 1],
                     normalizer_fn=None, activation_fn=None,
                     scope='Conv2d_1x1')
    up *= scale
    if activation_fn is tf.nn.relu6:
      up = tf.clip_by_value(up, -6.0, 6.0)
    net += up
    if activation_fn:
      net = activation_fn(net)
  return net


def _repeated(net, block, activation_fn, scope):
  with tf.variable_scope(scope):
    for i in range(1, block.repeats + 1):
      net = residual(net, block.branches, block.scale, activation_fn,
                     scope='%s_%d' % (block.name, i))
  return net


def inception_resnet_v2(inputs,
                        num_classes=1001,
                        is_training=True,
                        dropout_keep_prob=0.8,
                        reuse=None,
                        scope='InceptionResnetV2',
                        create_aux_logits=True,
                        activation_fn=tf.nn.relu):
  """Builds Inception-ResNet v2 on `inputs`.

  Args:
    inputs: float tensor [batch, height, width, 3], at least 107x107 (75x75
      without the auxiliary classifier).
    num_classes: number of classes (the published checkpoint has 1001).
      0 or None returns the pooled features instead of logits, and builds
      neither classifier.
    is_training: whether batch norm uses batch statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS) and dropout is active.
    dropout_keep_prob: probability that a pooled feature is kept in training.
    reuse: whether to reuse the variables of `scope`.
    scope: variable scope of the network.
    create_aux_logits: whether to build the auxiliary classifier on the last
      17x17 block.
    activation_fn: activation of the residual blocks' sums but the last
      (that of the convolutions is the arg scope's).

  Returns:
    logits: [batch, num_classes] (or pooled features [batch, 1536] when
      num_classes is 0 or None).
    end_points: dict with the outputs of the `STEM` layers by name
      ('Conv2d_1a_3x3', ..., 'MaxPool_5a_3x3', 'Mixed_5b'), 'Mixed_6a',
      'PreAuxLogits' (the last block17), 'Mixed_7a', 'Conv2d_7b_1x1',
      'global_pool' and, with classes, 'AuxLogits' (if created),
      'PreLogitsFlatten', 'Logits' and 'Predictions'.
  """
  end_points = {}
  with tf.variable_scope(scope, 'InceptionResnetV2', [inputs],
                         reuse=reuse), \
       slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    net = inception_common.stack(inputs, STEM, end_points)
    net = _repeated(net, BLOCK35, activation_fn, 'Repeat')
    net = inception_common.stack(net, [MIXED_6A], end_points)
    net = end_points['PreAuxLogits'] = _repeated(net, BLOCK17, activation_fn,
                                                 'Repeat_1')
    net = inception_common.stack(net, [MIXED_7A], end_points)
    net = _repeated(net, BLOCK8, activation_fn, 'Repeat_2')
    net = residual(net, BLOCK8.branches, 1.0, None, 'Block8')
    net = inception_common.stack(net, [Conv('Conv2d_7b_1x1', 1536)],
                                 end_points)
    logits = inception_common.heads(
        net, end_points['PreAuxLogits'], num_classes, create_aux_logits,
        dropout_keep_prob, end_points, HEAD_NAMES)
  return logits, end_points


inception_resnet_v2.default_image_size = 299
# The stem's and the reductions' VALID layers take 107 to a 5x5
# PreAuxLogits, the least the auxiliary classifier's 5x5 pool needs.
inception_resnet_v2.min_image_size = 107


def inception_resnet_v2_arg_scope(
    weight_decay=0.00004,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    activation_fn=tf.nn.relu,
    batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS,
    batch_norm_scale=False):
  """Layer defaults for Inception-ResNet v2: batch norm, ReLU, L2 decay.

  Unlike the arg scope of the other Inceptions, it decays the biases too
  (of the residual projections and of the classifiers), and keeps the
  convolutions' default (Glorot uniform) initializer.

  Args:
    weight_decay: L2 regularization coefficient of the weights and biases
      of the convolutions and fully connected layers.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.
    activation_fn: activation of the convolutions.
    batch_norm_updates_collections: collection of the moving-average
      updates.
    batch_norm_scale: whether batch norm has a trained gamma (the published
      checkpoint has none).

  Returns:
    An arg_scope to build `inception_resnet_v2` in.
  """
  regularizer = slim.l2_regularizer(weight_decay)
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=regularizer,
                      biases_regularizer=regularizer):
    with slim.arg_scope(
        [slim.conv2d], activation_fn=activation_fn,
        normalizer_fn=slim.batch_norm,
        normalizer_params=inception_common.batch_norm_params(
            batch_norm_decay, batch_norm_epsilon,
            batch_norm_updates_collections, batch_norm_scale)) as scope:
      return scope
