"""The ImageNet networks tf-slim ships, in the shape of the rest of `nets/`.

`tf_slim.nets` has AlexNet v2, OverFeat, VGG, Inception v1-v3 and ResNet
v1/v2 with the variable names of the published Slim checkpoints. This module
wraps them, changing no variable name, so that every network behaves alike:

* logits are [batch, num_classes], and end_points has 'Logits' and
  'Predictions' (tf-slim's ResNets return [batch, 1, 1, num_classes] and a
  lowercase 'predictions'; its AlexNet, OverFeat and VGG have neither key);
* num_classes=0 (or None) returns the pre-logits features [batch, depth] and
  creates no classifier variables (tf-slim's ResNets take None for that; its
  other networks always build the classifier);
* every network has `default_image_size` (tf-slim's OverFeat has none),
  and `min_image_size`, the smallest side it builds at (its VALID
  convolutions and poolings leave no pixel below it;
  tests/test_min_image_size.py builds each at it and at one less).

tf-slim's networks have no function that stops before the classifier, so
for AlexNet, OverFeat and VGG the layers up to fc7 are written out below,
layer for layer as tf-slim builds them; tests/test_nets_project.py checks
that they create exactly tf-slim's variables minus fc8.
"""

import inspect

from tf_slim.nets import alexnet as slim_alexnet
from tf_slim.nets import inception as slim_inception
from tf_slim.nets import overfeat as slim_overfeat
from tf_slim.nets import resnet_utils as slim_resnet_utils
from tf_slim.nets import resnet_v1 as slim_resnet_v1
from tf_slim.nets import resnet_v2 as slim_resnet_v2
from tf_slim.nets import vgg as slim_vgg

from tf2_compat.slim_compat import slim, tf


def _default_scope(slim_network):
  return inspect.signature(slim_network).parameters['scope'].default


def _squeeze(net, spatial_squeeze):
  if not spatial_squeeze:
    return net
  return tf.squeeze(net, [1, 2], name='SpatialSqueeze')


def _standing_for(slim_network, network, wrapper, default_image_size,
                  min_image_size):
  """`network`, named as `slim_network`, its docstring pointing to the
  `wrapper` that built it, with its default and minimum image sizes."""
  network.__name__ = slim_network.__name__
  network.__doc__ = 'tf_slim.nets %s; see nets.slim_nets.%s.' % (
      slim_network.__name__, wrapper)
  network.default_image_size = default_image_size
  network.min_image_size = min_image_size
  return network


def _fc_initializers():
  # tf-slim's AlexNet and OverFeat initialize their fc layers so.
  return slim.arg_scope(
      [slim.conv2d],
      weights_initializer=tf.truncated_normal_initializer(0.0, 0.005),
      biases_initializer=tf.constant_initializer(0.1))


def _alexnet_v2_to_fc7(net, is_training, dropout_keep_prob):
  net = slim.conv2d(net, 64, [11, 11], 4, padding='VALID', scope='conv1')
  net = slim.max_pool2d(net, [3, 3], 2, scope='pool1')
  net = slim.conv2d(net, 192, [5, 5], scope='conv2')
  net = slim.max_pool2d(net, [3, 3], 2, scope='pool2')
  net = slim.conv2d(net, 384, [3, 3], scope='conv3')
  net = slim.conv2d(net, 384, [3, 3], scope='conv4')
  net = slim.conv2d(net, 256, [3, 3], scope='conv5')
  net = slim.max_pool2d(net, [3, 3], 2, scope='pool5')
  with _fc_initializers():
    net = slim.conv2d(net, 4096, [5, 5], padding='VALID', scope='fc6')
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                       scope='dropout6')
    return slim.conv2d(net, 4096, [1, 1], scope='fc7')


def _overfeat_to_fc7(net, is_training, dropout_keep_prob):
  net = slim.conv2d(net, 64, [11, 11], 4, padding='VALID', scope='conv1')
  net = slim.max_pool2d(net, [2, 2], scope='pool1')
  net = slim.conv2d(net, 256, [5, 5], padding='VALID', scope='conv2')
  net = slim.max_pool2d(net, [2, 2], scope='pool2')
  net = slim.conv2d(net, 512, [3, 3], scope='conv3')
  net = slim.conv2d(net, 1024, [3, 3], scope='conv4')
  net = slim.conv2d(net, 1024, [3, 3], scope='conv5')
  net = slim.max_pool2d(net, [2, 2], scope='pool5')
  with _fc_initializers():
    net = slim.conv2d(net, 3072, [6, 6], padding='VALID', scope='fc6')
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                       scope='dropout6')
    return slim.conv2d(net, 4096, [1, 1], scope='fc7')


def _vgg_to_fc7(convs_per_block):
  """VGG up to fc7, given the number of 3x3 convolutions in each block."""

  def to_fc7(net, is_training, dropout_keep_prob):
    for block, (convs, depth) in enumerate(
        zip(convs_per_block, (64, 128, 256, 512, 512)), start=1):
      net = slim.repeat(net, convs, slim.conv2d, depth, [3, 3],
                        scope='conv%d' % block)
      net = slim.max_pool2d(net, [2, 2], scope='pool%d' % block)
    net = slim.conv2d(net, 4096, [7, 7], padding='VALID', scope='fc6')
    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                       scope='dropout6')
    return slim.conv2d(net, 4096, [1, 1], scope='fc7')

  return to_fc7


def _conv_fc_network(slim_network, to_fc7, min_image_size,
                     default_image_size=None):
  """Wraps AlexNet, OverFeat or VGG (fully connected layers as convolutions).

  Args:
    slim_network: the tf_slim.nets function.
    to_fc7: builds the same layers as `slim_network` up to fc7, for
      num_classes=0.
    min_image_size: the smallest side fc6 (VALID) gets a pixel at.
    default_image_size: where tf-slim does not set one.

  Returns:
    network(inputs, num_classes=1000, is_training=True,
      dropout_keep_prob=0.5, prediction_fn=slim.softmax,
      spatial_squeeze=True, scope=<tf-slim's scope>) -> (logits, end_points);
      with num_classes 0 or None it returns the fc7 features [batch, 4096].
      end_points keys are tf-slim's (e.g. 'vgg_16/conv1/conv1_1',
      'vgg_16/fc7') plus 'Logits' and 'Predictions'.
  """

  def network(inputs,
              num_classes=1000,
              is_training=True,
              dropout_keep_prob=0.5,
              prediction_fn=slim.softmax,
              spatial_squeeze=True,
              scope=_default_scope(slim_network)):
    if num_classes:
      logits, end_points = slim_network(
          inputs, num_classes=num_classes, is_training=is_training,
          dropout_keep_prob=dropout_keep_prob,
          spatial_squeeze=spatial_squeeze, scope=scope)
      end_points['Logits'] = logits
      end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
      return logits, end_points
    with tf.variable_scope(scope, values=[inputs]) as variable_scope:
      # tf-slim's end_points mechanism, so the keys are the same.
      collection = variable_scope.original_name_scope + '_end_points'
      with slim.arg_scope([slim.conv2d, slim.max_pool2d],
                          outputs_collections=collection):
        features = to_fc7(inputs, is_training, dropout_keep_prob)
      end_points = slim.utils.convert_collection_to_dict(collection)
      return _squeeze(features, spatial_squeeze), end_points

  return _standing_for(slim_network, network, '_conv_fc_network',
                       default_image_size or slim_network.default_image_size,
                       min_image_size)


def _inception(slim_network, slim_base, min_image_size):
  """Wraps an Inception network, adding num_classes=0.

  Args:
    slim_network: the tf_slim.nets function (inception_v1, v2 or v3).
    slim_base: its `*_base` function, for num_classes=0.
    min_image_size: the smallest side it builds at.

  Returns:
    network(inputs, num_classes=1000, is_training=True,
      dropout_keep_prob=0.8, prediction_fn=slim.softmax,
      spatial_squeeze=True, reuse=None, scope=<tf-slim's scope>, **kwargs)
      -> (logits, end_points), where kwargs are tf-slim's other arguments
      (min_depth, depth_multiplier, create_aux_logits, ...). With
      num_classes 0 or None it returns the globally pooled features of the
      last Mixed layer [batch, depth] (also end_points['global_pool']).
      end_points keys are tf-slim's: 'Conv2d_1a_...', ..., 'Mixed_5c' or
      'Mixed_7c', 'Logits', 'Predictions' (and 'AuxLogits', 'PreLogits' for
      v3).
  """
  network_parameters = inspect.signature(slim_network).parameters
  # The arguments that shape the layers (min_depth, depth_multiplier), with
  # the network's defaults.
  base_defaults = {
      name: network_parameters[name].default
      for name in inspect.signature(slim_base).parameters
      if name in network_parameters and name not in ('inputs', 'scope')
  }

  def network(inputs,
              num_classes=1000,
              is_training=True,
              dropout_keep_prob=0.8,
              prediction_fn=slim.softmax,
              spatial_squeeze=True,
              reuse=None,
              scope=_default_scope(slim_network),
              **kwargs):
    if num_classes:
      return slim_network(
          inputs, num_classes=num_classes, is_training=is_training,
          dropout_keep_prob=dropout_keep_prob, prediction_fn=prediction_fn,
          spatial_squeeze=spatial_squeeze, reuse=reuse, scope=scope, **kwargs)
    base_kwargs = {name: kwargs.get(name, default)
                   for name, default in base_defaults.items()}
    with tf.variable_scope(scope, values=[inputs], reuse=reuse) as sc, \
         slim.arg_scope([slim.batch_norm, slim.dropout],
                        is_training=is_training):
      net, end_points = slim_base(inputs, scope=sc, **base_kwargs)
      with tf.variable_scope('Logits'):
        net = end_points['global_pool'] = tf.reduce_mean(
            net, [1, 2], keepdims=True, name='global_pool')
        return _squeeze(net, spatial_squeeze), end_points

  return _standing_for(slim_network, network, '_inception',
                       slim_network.default_image_size, min_image_size)


def _resnet(slim_network):
  """Wraps a ResNet, squeezing its logits and naming them as elsewhere.

  tf-slim sets `default_image_size` (224) on its generic resnet_v1 and
  resnet_v2 builders only, not on resnet_v1_50 and the others.

  Args:
    slim_network: the tf_slim.nets function (resnet_v1_50, ...).

  Returns:
    network(inputs, num_classes=1000, is_training=True, global_pool=True,
      output_stride=None, prediction_fn=slim.softmax, spatial_squeeze=True,
      reuse=None, scope=<tf-slim's scope>) -> (logits, end_points); with
      num_classes 0 or None it returns the globally pooled output of block4
      [batch, 2048]. end_points keys are tf-slim's ('resnet_v1_50/conv1',
      'resnet_v1_50/block1', ..., 'resnet_v1_50/block4', 'predictions') plus
      'Logits' and 'Predictions'. ResNets have no dropout.
  """

  def network(inputs,
              num_classes=1000,
              is_training=True,
              global_pool=True,
              output_stride=None,
              prediction_fn=slim.softmax,
              spatial_squeeze=True,
              reuse=None,
              scope=_default_scope(slim_network)):
    net, end_points = slim_network(
        inputs, num_classes=num_classes or None, is_training=is_training,
        global_pool=global_pool, output_stride=output_stride, reuse=reuse,
        scope=scope)
    net = _squeeze(net, spatial_squeeze)
    if num_classes:
      end_points['Logits'] = net
      end_points['Predictions'] = prediction_fn(net, scope='Predictions')
    return net, end_points

  # SAME padding (or explicit padding) throughout, and a global pooling.
  return _standing_for(slim_network, network, '_resnet', 224,
                       min_image_size=1)


# conv1 11x11/4, three 3x3/2 poolings and fc6 5x5, all VALID:
# 195 -> 47 -> 23 -> 11 -> 5 -> 1.
alexnet_v2 = _conv_fc_network(slim_alexnet.alexnet_v2, _alexnet_v2_to_fc7,
                              min_image_size=195)
alexnet_v2_arg_scope = slim_alexnet.alexnet_v2_arg_scope

# tf-slim's OverFeat sets no image size; 231 is the one its fc6 (6x6, VALID)
# is sized for, and the smallest: 231 -> 56 -> 28 -> 24 -> 12 -> 6 -> 1.
overfeat = _conv_fc_network(slim_overfeat.overfeat, _overfeat_to_fc7,
                            min_image_size=231, default_image_size=231)
overfeat_arg_scope = slim_overfeat.overfeat_arg_scope

# Five 2x2 poolings, then fc6 7x7 VALID: 224 -> 7 -> 1.
vgg_a = _conv_fc_network(slim_vgg.vgg_a, _vgg_to_fc7((1, 1, 2, 2, 2)),
                         min_image_size=224)
vgg_16 = _conv_fc_network(slim_vgg.vgg_16, _vgg_to_fc7((2, 2, 3, 3, 3)),
                          min_image_size=224)
vgg_19 = _conv_fc_network(slim_vgg.vgg_19, _vgg_to_fc7((2, 2, 4, 4, 4)),
                          min_image_size=224)
vgg_arg_scope = slim_vgg.vgg_arg_scope

# Its last pooling is 7x7, VALID, at stride 32: 193 -> 7 -> 1.
inception_v1 = _inception(slim_inception.inception_v1,
                          slim_inception.inception_v1_base, min_image_size=193)
inception_v1_arg_scope = slim_inception.inception_v1_arg_scope
# Its last pooling shrinks to the features.
inception_v2 = _inception(slim_inception.inception_v2,
                          slim_inception.inception_v2_base, min_image_size=1)
inception_v2_arg_scope = slim_inception.inception_v2_arg_scope
# VALID convolutions and poolings in the stem and the reduction blocks.
inception_v3 = _inception(slim_inception.inception_v3,
                          slim_inception.inception_v3_base,
                          min_image_size=107)
inception_v3_arg_scope = slim_inception.inception_v3_arg_scope

resnet_v1_50 = _resnet(slim_resnet_v1.resnet_v1_50)
resnet_v1_101 = _resnet(slim_resnet_v1.resnet_v1_101)
resnet_v1_152 = _resnet(slim_resnet_v1.resnet_v1_152)
resnet_v1_200 = _resnet(slim_resnet_v1.resnet_v1_200)
resnet_v2_50 = _resnet(slim_resnet_v2.resnet_v2_50)
resnet_v2_101 = _resnet(slim_resnet_v2.resnet_v2_101)
resnet_v2_152 = _resnet(slim_resnet_v2.resnet_v2_152)
resnet_v2_200 = _resnet(slim_resnet_v2.resnet_v2_200)
resnet_arg_scope = slim_resnet_utils.resnet_arg_scope
