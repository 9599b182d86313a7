"""Inception v4, with the variable names of the published Slim checkpoint.

"Inception-v4, Inception-ResNet and the Impact of Residual Connections on
Learning", Szegedy et al., 2016 (https://arxiv.org/abs/1602.07261),
Figures 3 to 9.

A stem of convolutions and two-branch blocks (299 -> 35), four Inception-A
blocks, a Reduction-A block (35 -> 17), seven Inception-B blocks, a
Reduction-B block (17 -> 8), three Inception-C blocks, then an average pool
over the 8x8 grid, dropout and a fully connected classifier; an auxiliary
classifier on the last 17x17 block helps training. Layer names are those of
the Slim checkpoint `inception_v4_2016_09_09`: `InceptionV4/Conv2d_1a_3x3/
weights`, `InceptionV4/Mixed_5b/Branch_1/Conv2d_0b_3x3/weights`, ...,
`InceptionV4/AuxLogits/Aux_logits/weights`,
`InceptionV4/Logits/Logits/weights`.

Usage:
  with slim.arg_scope(inception_v4_arg_scope()):
    logits, end_points = inception_v4(images, num_classes=1001,
                                      is_training=False)
"""

from nets.inception_common import AvgPool, Conv, MaxPool, Mixed, Split
from nets import inception_common
from tf2_compat.slim_compat import slim, tf

# Figure 3: 299x299x3 -> 35x35x384.
STEM = inception_common.FIRST_CONVS + (
    Mixed('Mixed_3a', (
        (MaxPool('MaxPool_0a_3x3', 2, 'VALID'),),
        (Conv('Conv2d_0a_3x3', 96, 2, 'VALID'),),
    )),
    Mixed('Mixed_4a', (
        (Conv('Conv2d_0a_1x1', 64), Conv('Conv2d_1a_3x3', 96, 1, 'VALID')),
        (Conv('Conv2d_0a_1x1', 64), Conv('Conv2d_0b_1x7', 64),
         Conv('Conv2d_0c_7x1', 64), Conv('Conv2d_1a_3x3', 96, 1, 'VALID')),
    )),
    Mixed('Mixed_5a', (
        (Conv('Conv2d_1a_3x3', 192, 2, 'VALID'),),
        (MaxPool('MaxPool_1a_3x3', 2, 'VALID'),),
    )),
)

# Figure 4: on a 35x35x384 grid, 384 channels out.
INCEPTION_A = (
    (Conv('Conv2d_0a_1x1', 96),),
    (Conv('Conv2d_0a_1x1', 64), Conv('Conv2d_0b_3x3', 96)),
    (Conv('Conv2d_0a_1x1', 64), Conv('Conv2d_0b_3x3', 96),
     Conv('Conv2d_0c_3x3', 96)),
    (AvgPool('AvgPool_0a_3x3'), Conv('Conv2d_0b_1x1', 96)),
)

# Figure 7 with k=192, l=224, m=256, n=384: 35x35x384 -> 17x17x1024.
REDUCTION_A = (
    (Conv('Conv2d_1a_3x3', 384, 2, 'VALID'),),
    (Conv('Conv2d_0a_1x1', 192), Conv('Conv2d_0b_3x3', 224),
     Conv('Conv2d_1a_3x3', 256, 2, 'VALID')),
    (MaxPool('MaxPool_1a_3x3', 2, 'VALID'),),
)

# Figure 5: on a 17x17x1024 grid, 1024 channels out. Slim's second 7x7
# branch starts with the 7x1 convolution where the figure has 1x7.
INCEPTION_B = (
    (Conv('Conv2d_0a_1x1', 384),),
    (Conv('Conv2d_0a_1x1', 192), Conv('Conv2d_0b_1x7', 224),
     Conv('Conv2d_0c_7x1', 256)),
    (Conv('Conv2d_0a_1x1', 192), Conv('Conv2d_0b_7x1', 192),
     Conv('Conv2d_0c_1x7', 224), Conv('Conv2d_0d_7x1', 224),
     Conv('Conv2d_0e_1x7', 256)),
    (AvgPool('AvgPool_0a_3x3'), Conv('Conv2d_0b_1x1', 128)),
)

# Figure 8: 17x17x1024 -> 8x8x1536.
REDUCTION_B = (
    (Conv('Conv2d_0a_1x1', 192), Conv('Conv2d_1a_3x3', 192, 2, 'VALID')),
    (Conv('Conv2d_0a_1x1', 256), Conv('Conv2d_0b_1x7', 256),
     Conv('Conv2d_0c_7x1', 320), Conv('Conv2d_1a_3x3', 320, 2, 'VALID')),
    (MaxPool('MaxPool_1a_3x3', 2, 'VALID'),),
)

# Figure 6: on an 8x8x1536 grid, 1536 channels out; two branches end in a
# 1x3 and a 3x1 convolution side by side. Slim's second one has the 3x1
# convolution first where the figure has 1x3.
INCEPTION_C = (
    (Conv('Conv2d_0a_1x1', 256),),
    (Conv('Conv2d_0a_1x1', 384),
     Split((Conv('Conv2d_0b_1x3', 256), Conv('Conv2d_0c_3x1', 256)))),
    (Conv('Conv2d_0a_1x1', 384), Conv('Conv2d_0b_3x1', 448),
     Conv('Conv2d_0c_1x3', 512),
     Split((Conv('Conv2d_0d_1x3', 256), Conv('Conv2d_0e_3x1', 256)))),
    (AvgPool('AvgPool_0a_3x3'), Conv('Conv2d_0b_1x1', 256)),
)

# Figure 9, the whole network up to the classifier; each layer's output is
# the end point of its name.
INCEPTION_V4_LAYERS = (
    STEM
    + tuple(Mixed('Mixed_5' + block, INCEPTION_A) for block in 'bcde')
    + (Mixed('Mixed_6a', REDUCTION_A),)
    + tuple(Mixed('Mixed_6' + block, INCEPTION_B) for block in 'bcdefgh')
    + (Mixed('Mixed_7a', REDUCTION_B),)
    + tuple(Mixed('Mixed_7' + block, INCEPTION_C) for block in 'bcd'))

HEAD_NAMES = inception_common.HeadNames(
    aux_pool='AvgPool_1a_5x5', aux_conv='Conv2d_2a', aux_logits='Aux_logits',
    pool='AvgPool_1a', dropout='Dropout_1b')


def inception_v4(inputs,
                 num_classes=1001,
                 is_training=True,
                 dropout_keep_prob=0.8,
                 reuse=None,
                 scope='InceptionV4',
                 create_aux_logits=True):
  """Builds Inception v4 on `inputs`.

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
    create_aux_logits: whether to build the auxiliary classifier on
      Mixed_6h.

  Returns:
    logits: [batch, num_classes] (or pooled features [batch, 1536] when
      num_classes is 0 or None).
    end_points: dict with the output of every layer of
      `INCEPTION_V4_LAYERS` by name ('Conv2d_1a_3x3', ..., 'Mixed_3a', ...,
      'Mixed_7d'), 'global_pool' and, with classes, 'AuxLogits' (if
      created), 'PreLogitsFlatten', 'Logits' and 'Predictions'.
  """
  end_points = {}
  with tf.variable_scope(scope, 'InceptionV4', [inputs], reuse=reuse), \
       slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    net = inception_common.stack(inputs, INCEPTION_V4_LAYERS, end_points)
    logits = inception_common.heads(
        net, end_points['Mixed_6h'], num_classes, create_aux_logits,
        dropout_keep_prob, end_points, HEAD_NAMES)
  return logits, end_points


inception_v4.default_image_size = 299
# The stem's and the reductions' VALID layers take 107 to a 5x5 Mixed_6h,
# the least the auxiliary classifier's 5x5 pool needs.
inception_v4.min_image_size = 107

inception_v4_arg_scope = inception_common.inception_arg_scope
