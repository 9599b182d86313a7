"""nets_factory: every registered network, built the way the factory builds it.

Each network is built once per module at its default image size with the
number of classes of its published Slim checkpoint (1000 or 1001; 10 for the
MNIST and CIFAR-10 networks; the video networks, which take clips of
`Spec.num_frames` frames, with upstream's default, 1000), and once without
classifier (num_classes=0) for an unknown batch size (but for the deeper
ResNets and the NASNets built as another, see FEATURE_NAMES).
Only graphs are built here: the large networks are never run.
tests/test_nets_project.py runs the networks this project writes,
tests/test_nets_nasnet.py trains NASNet and PNASNet.

The expected trainable-parameter counts are derived independently of the
code under test, each with its source next to it:
  * hand counts from the layer tables of the papers (and of Slim where it
    deviates from them), with the helpers `_conv` and `_classifier`;
  * published counts of other implementations of the same architecture:
    torchvision (`sum(p.numel() for p in model.parameters())`, 1000 classes)
    and tf_keras.applications (trainable weights with weights=None, 1000
    classes), converted to 1001 classes where the Slim checkpoint has 1001;
  * where neither exists (NASNet CIFAR, PNASNet), the count of upstream's
    own definition, built with tf-slim, which must also round to the
    millions its paper publishes.
A Slim convolution followed by batch norm has no bias; batch norm adds beta
(Inception, whose arg scopes leave `scale` off) or beta and gamma (ResNet,
MobileNet). Moving means and variances are not trainable.
"""

import collections

import pytest

from tf2_compat.slim_compat import tf
from nets import nets_factory

pytestmark = pytest.mark.usefixtures('identity_equality_for_tensors')

UPSTREAM_SLIM_NAMES = (
    'lenet', 'cifarnet', 'alexnet_v2', 'overfeat', 'vgg_a', 'vgg_16',
    'vgg_19', 'inception_v1', 'inception_v2', 'inception_v3', 'resnet_v1_50',
    'resnet_v1_101', 'resnet_v1_152', 'resnet_v1_200', 'resnet_v2_50',
    'resnet_v2_101', 'resnet_v2_152', 'resnet_v2_200', 'mobilenet_v1',
    'mobilenet_v1_075', 'mobilenet_v1_050', 'mobilenet_v1_025',
    'mobilenet_v2', 'mobilenet_v2_140', 'mobilenet_v2_035',
    'mobilenet_v3_small', 'mobilenet_v3_large',
    'mobilenet_v3_small_minimalistic', 'mobilenet_v3_large_minimalistic',
    'mobilenet_edgetpu', 'mobilenet_edgetpu_075',
    # NASNet and PNASNet.
    'nasnet_cifar', 'nasnet_mobile', 'nasnet_large', 'pnasnet_mobile',
    'pnasnet_large',
    # Inception v4 and Inception-ResNet v2.
    'inception_v4', 'inception_resnet_v2',
    # Video: Inception v1 inflated to clips.
    'i3d', 's3dg')
# Marked slow: 20-90 s each to build for NASNet and PNASNet (1,100-1,600
# variables), 10-25 s for Inception v4 and Inception-ResNet v2 (608 and 908).
SLOW_TO_BUILD = ('nasnet_cifar', 'nasnet_mobile', 'nasnet_large',
                 'pnasnet_mobile', 'pnasnet_large', 'inception_v4',
                 'inception_resnet_v2')


def _marking_slow(names):
  return [pytest.param(name, marks=pytest.mark.slow)
          if name in SLOW_TO_BUILD else name for name in names]


def _conv(kernel, depth_in, depth_out, per_channel=1):
  """A kernel x kernel convolution's weights plus `per_channel` parameters
  per output channel (1: a bias or a batch-norm beta; 2: beta and gamma)."""
  return kernel * kernel * depth_in * depth_out + per_channel * depth_out


def _classifier(depth, num_classes):
  """The final fully connected (or 1x1 convolution) layer with biases."""
  return _conv(1, depth, num_classes)


def _reclassed(count, depth, num_classes, published_classes=1000):
  """A count published for `published_classes`, for `num_classes`."""
  return (count - _classifier(depth, published_classes) +
          _classifier(depth, num_classes))


# GoogLeNet (Szegedy et al. 2014, Table 1): per module #1x1, #3x3 reduce,
# #3x3, #5x5 reduce, #5x5, pool proj. Slim's Inception v1 has a 3x3
# convolution where the paper has the 5x5 one.
_INCEPTION_V1_MODULES = (
    (64, 96, 128, 16, 32, 32), (128, 128, 192, 32, 96, 64),
    (192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64),
    (128, 128, 256, 24, 64, 64), (112, 144, 288, 32, 64, 64),
    (256, 160, 320, 32, 128, 128), (256, 160, 320, 32, 128, 128),
    (384, 192, 384, 48, 128, 128))


def _inception_v1_params(num_classes):
  total = _conv(7, 3, 64) + _conv(1, 64, 64) + _conv(3, 64, 192)
  depth = 192
  for ones, reduce3, threes, reduce5, fives, pool in _INCEPTION_V1_MODULES:
    total += (_conv(1, depth, ones) + _conv(1, depth, reduce3) +
              _conv(3, reduce3, threes) + _conv(1, depth, reduce5) +
              _conv(3, reduce5, fives) + _conv(1, depth, pool))
    depth = ones + threes + fives + pool
  return total + _classifier(depth, num_classes)


# BN-Inception (Ioffe & Szegedy 2015, Figure 5): per module #1x1, #3x3
# reduce, #3x3, double #3x3 reduce, double #3x3, pool proj (None: the
# stride-2 modules pass the max pool through). Slim's modules 4c and 4d
# project the pool to 96 channels, which the paper's output depth of 576
# requires (its table says 128).
_INCEPTION_V2_MODULES = (
    (64, 64, 64, 64, 96, 32), (64, 64, 96, 64, 96, 64),
    (0, 128, 160, 64, 96, None), (224, 64, 96, 96, 128, 128),
    (192, 96, 128, 96, 128, 128), (160, 128, 160, 128, 160, 96),
    (96, 128, 192, 160, 192, 96), (0, 128, 192, 192, 256, None),
    (352, 192, 320, 160, 224, 128), (352, 192, 320, 192, 224, 128))


def _inception_v2_params(num_classes):
  # Slim's first layer is a separable 7x7 convolution: depthwise with
  # multiplier 8, then pointwise to 64 channels, with biases (its arg scope
  # puts batch norm on conv2d only).
  total = 7 * 7 * 3 * 8 + 3 * 8 * 64 + 64
  total += _conv(1, 64, 64) + _conv(3, 64, 192)
  depth = 192
  for ones, reduce3, threes, reduce_double, double, pool in (
      _INCEPTION_V2_MODULES):
    total += (_conv(1, depth, reduce3) + _conv(3, reduce3, threes) +
              _conv(1, depth, reduce_double) +
              _conv(3, reduce_double, double) + _conv(3, double, double))
    if ones:
      total += _conv(1, depth, ones)
    if pool is None:
      depth = threes + double + depth
    else:
      total += _conv(1, depth, pool)
      depth = ones + threes + double + pool
  return total + _classifier(depth, num_classes)


# tf_keras.applications.InceptionV3: 23,817,352 trainable at 1000 classes;
# same layers as Slim's, which adds the auxiliary head on Mixed_6e.
_INCEPTION_V3_AUX_HEAD = _conv(1, 768, 128) + _conv(5, 128, 768)
_INCEPTION_V3_1001 = (_reclassed(23817352, 2048, 1001) +
                      _INCEPTION_V3_AUX_HEAD + _classifier(768, 1001))

# ResNet bottleneck units per block (He et al. 2015, Table 1; 200 from He et
# al. 2016), with bottleneck depths 64, 128, 256, 512.
_RESNET_UNITS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3),
                 200: (3, 24, 36, 3)}


def _resnet_params(version, layers, num_classes):
  """v1: convolution + batch norm (beta, gamma) everywhere. v2
  (pre-activation): batch norm before each unit and after the last; the
  first convolution, each unit's last 1x1 and the projection shortcuts
  have biases instead."""
  unit_end = 2 if version == 1 else 1
  total = _conv(7, 3, 64, per_channel=unit_end)
  depth = 64
  for units, bottleneck in zip(_RESNET_UNITS[layers], (64, 128, 256, 512)):
    for _ in range(units):
      if version == 2:
        total += 2 * depth
      total += (_conv(1, depth, bottleneck, 2) +
                _conv(3, bottleneck, bottleneck, 2) +
                _conv(1, bottleneck, 4 * bottleneck, unit_end))
      if depth != 4 * bottleneck:
        total += _conv(1, depth, 4 * bottleneck, unit_end)
      depth = 4 * bottleneck
  if version == 2:
    total += 2 * depth
  return total + _classifier(depth, num_classes)


# Inception v4 and Inception-ResNet v2 (Szegedy et al. 2016): an
# auxiliary head of a 1x1 convolution to 128 channels, a 5x5 one to 768 and
# a fully connected layer, on 17x17 maps of 1024 and 1088 channels.
_AUX_HEAD_INPUT_DEPTHS = {'inception_v4': 1024, 'inception_resnet_v2': 1088}


def _aux_head(depth, num_classes):
  return _conv(1, depth, 128) + _conv(5, 128, 768) + _classifier(768,
                                                                 num_classes)


def _inception_v4_params(num_classes, per_channel=1, aux_head=True):
  """Figures 3 to 8 of the paper, Reduction-A with k=192, l=224, m=256,
  n=384 (its Table 1). Slim swaps some 1x7 and 7x1 (1x3, 3x1)
  convolutions, which changes no count. Each convolution has `per_channel`
  parameters per output channel (Slim's batch norm: beta only)."""

  def conv(kernel, depth_in, depth_out):
    return _conv(kernel, depth_in, depth_out, per_channel)

  def conv_1xn(n, depth_in, depth_out):
    """A 1xn or nx1 convolution."""
    return n * depth_in * depth_out + per_channel * depth_out

  stem = (conv(3, 3, 32) + conv(3, 32, 32) + conv(3, 32, 64) +
          conv(3, 64, 96) +  # 147x147x64 -> 73x73x160, beside a max pool
          conv(1, 160, 64) + conv(3, 64, 96) + conv(1, 160, 64) +
          2 * conv_1xn(7, 64, 64) + conv(3, 64, 96) +  # 71x71x192
          conv(3, 192, 192))  # 35x35x384, beside a max pool
  inception_a = (conv(1, 384, 96) + conv(1, 384, 64) + conv(3, 64, 96) +
                 conv(1, 384, 64) + conv(3, 64, 96) + conv(3, 96, 96) +
                 conv(1, 384, 96))
  reduction_a = (conv(3, 384, 384) + conv(1, 384, 192) +
                 conv(3, 192, 224) + conv(3, 224, 256))  # 1024 out
  inception_b = (conv(1, 1024, 384) + conv(1, 1024, 192) +
                 conv_1xn(7, 192, 224) + conv_1xn(7, 224, 256) +
                 conv(1, 1024, 192) + conv_1xn(7, 192, 192) +
                 conv_1xn(7, 192, 224) + conv_1xn(7, 224, 224) +
                 conv_1xn(7, 224, 256) + conv(1, 1024, 128))
  reduction_b = (conv(1, 1024, 192) + conv(3, 192, 192) +
                 conv(1, 1024, 256) + conv_1xn(7, 256, 256) +
                 conv_1xn(7, 256, 320) + conv(3, 320, 320))  # 1536 out
  inception_c = (conv(1, 1536, 256) + conv(1, 1536, 384) +
                 2 * conv_1xn(3, 384, 256) + conv(1, 1536, 384) +
                 conv_1xn(3, 384, 448) + conv_1xn(3, 448, 512) +
                 2 * conv_1xn(3, 512, 256) + conv(1, 1536, 256))
  return (stem + 4 * inception_a + reduction_a + 7 * inception_b +
          reduction_b + 3 * inception_c +
          (_aux_head(1024, num_classes) if aux_head else 0) +
          _classifier(1536, num_classes))


# tf_keras.applications.InceptionResNetV2: 55,813,192 trainable at 1000
# classes. Same layers as Slim's (batch norm without gamma, biases on the
# residual projections only), which adds the auxiliary head. (The PyTorch
# port of the Slim checkpoint in pretrainedmodels, whose batch norm has a
# gamma, counts 55,843,464: 30,272 more, one per batch-normed channel.)
_INCEPTION_RESNET_V2_1001 = (_reclassed(55813192, 1536, 1001) +
                             _aux_head(1088, 1001))


def _inflated_inception_v1_params(num_classes, first_frames, frames,
                                  separable=False, gated=False):
  """Inception v1 (as `_inception_v1_params`) on clips: each kxk kernel
  spans `frames` frames (`first_frames` for the first 7x7), so has `frames`
  times the weights. Separable (S3D): a 1xkxk convolution with batch norm,
  then a frames x 1 x 1 one from and to its output channels, with biases.
  Gated (S3D-G): each 3x3 layer and each branch of a module is multiplied
  by a gate, a cxc 1x1 convolution without biases."""
  def kxk(kernel, depth_in, depth_out):
    if separable and frames > 1:
      return (_conv(kernel, depth_in, depth_out) +
              frames * depth_out * depth_out + depth_out)
    return frames * kernel * kernel * depth_in * depth_out + depth_out

  def gate(depth):
    return depth * depth if gated else 0

  total = (first_frames * 7 * 7 * 3 * 64 + 64 + _conv(1, 64, 64) +
           kxk(3, 64, 192) + gate(192))
  depth = 192
  for ones, reduce3, threes, reduce5, fives, pool in _INCEPTION_V1_MODULES:
    total += (_conv(1, depth, ones) + _conv(1, depth, reduce3) +
              kxk(3, reduce3, threes) + _conv(1, depth, reduce5) +
              kxk(3, reduce5, fives) + _conv(1, depth, pool))
    total += gate(ones) + gate(threes) + gate(fives) + gate(pool)
    depth = ones + threes + fives + pool
  return total + _classifier(depth, num_classes)


Spec = collections.namedtuple(
    'Spec', ['num_classes', 'image_size', 'feature_depth', 'trainable_params',
             'end_points', 'checkpoint_variables', 'num_frames'],
    defaults=[None])


def _vgg_spec(name, published_count, last_conv):
  return Spec(1000, 224, 4096, published_count,
              ['%s/conv1/conv1_1' % name, '%s/%s' % (name, last_conv),
               '%s/fc7' % name, '%s/fc8' % name],
              {'%s/conv1/conv1_1/weights' % name: [3, 3, 3, 64],
               '%s/fc6/weights' % name: [7, 7, 512, 4096],
               '%s/fc8/biases' % name: [1000]})


def _resnet_spec(version, layers, num_classes, trainable_params=None):
  name = 'resnet_v%d_%d' % (version, layers)
  if trainable_params is None:
    trainable_params = _resnet_params(version, layers, num_classes)
  return Spec(num_classes, 224, 2048, trainable_params,
              [name + '/conv1', name + '/block1', name + '/block4',
               'predictions'],
              {name + '/conv1/weights': [7, 7, 3, 64],
               name + '/logits/weights': [1, 1, 2048, num_classes]})


def _mobilenet_v1_spec(keras_count, depth):
  return Spec(1001, 224, depth, _reclassed(keras_count, depth, 1001),
              ['Conv2d_0', 'Conv2d_1_depthwise', 'Conv2d_13_pointwise',
               'AvgPool_1a'],
              {'MobilenetV1/Conv2d_1_depthwise/depthwise_weights': [
                  3, 3, max(int(32 * depth / 1024), 8), 1],
               'MobilenetV1/Conv2d_13_pointwise/weights': [
                   1, 1, depth, depth],
               'MobilenetV1/Logits/Conv2d_1c_1x1/weights': [
                   1, 1, depth, 1001]})


def _mobilenet_v2_spec(keras_count, first_depth, last_input, expand_shape,
                       last_depth):
  return Spec(1001, 224, last_depth,
              _reclassed(keras_count, last_depth, 1001),
              ['layer_1', 'layer_2', 'layer_18', 'layer_19', 'global_pool'],
              {'MobilenetV2/Conv/weights': [3, 3, 3, first_depth],
               'MobilenetV2/expanded_conv/depthwise/depthwise_weights': [
                   3, 3, first_depth, 1],
               'MobilenetV2/expanded_conv_1/expand/weights': expand_shape,
               'MobilenetV2/Conv_1/weights': [1, 1, last_input, last_depth],
               'MobilenetV2/Logits/Conv2d_1c_1x1/weights': [
                   1, 1, last_depth, 1001]})


def _mobilenet_v3_spec(keras_count, num_blocks, feature_depth, variables):
  """tf_keras.applications.MobileNetV3Small or MobileNetV3Large (with
  minimalistic=True for the minimalistic variants): the same layers, its
  `top` being Slim's pooling, `Conv_2` (with biases, no batch norm) and
  classifier; so its count with the top is ours, once reclassed."""
  return Spec(1001, 224, feature_depth,
              _reclassed(keras_count, feature_depth, 1001),
              ['layer_1', 'layer_2/output', 'layer_%d' % (num_blocks + 1),
               'layer_%d' % (num_blocks + 4), 'global_pool'],
              dict(variables, **{
                  'MobilenetV3/Conv_2/biases': [feature_depth],
                  'MobilenetV3/Logits/Conv2d_1c_1x1/weights': [
                      1, 1, feature_depth, 1001]}))


def _round8(value):
  """Upstream's channel rounding: the nearest multiple of 8, at least 8,
  never more than 10% below `value`."""
  rounded = max(8, int(value + 4) // 8 * 8)
  return rounded + 8 if rounded < 0.9 * value else rounded


# MobileNet EdgeTPU (upstream's conv defs V3_EDGETPU) by stage: fused, the
# kernel, the expansion of the first block and of the others, the depth,
# the number of blocks.
_EDGETPU_STAGES = (
    (True, 3, 1, 1, 16, 1), (True, 3, 8, 4, 32, 4), (True, 3, 8, 4, 48, 4),
    (False, 3, 8, 4, 96, 4), (False, 3, 8, 4, 96, 4),
    (False, 5, 8, 4, 160, 4), (False, 3, 8, 8, 192, 1))


def _edgetpu_params(multiplier, num_classes):
  """Batch norm (beta, gamma) after every convolution. A block expands only
  where the expansion widens it (not the first: 1x); a fused block
  expands with its kxk convolution and has no depthwise one. The 0.75
  network keeps 1280 channels in `Conv_1` (finegrain mode)."""
  depth = _round8(32 * multiplier)
  total = _conv(3, 3, depth, 2)
  for fused, kernel, first, rest, out, blocks in _EDGETPU_STAGES:
    for block in range(blocks):
      expanded = _round8(depth * (rest if block else first))
      if expanded > depth:
        total += _conv(kernel if fused else 1, depth, expanded, 2)
      else:
        expanded = depth
      if not fused:
        total += _conv(kernel, 1, expanded, 2)
      out_depth = _round8(out * multiplier)
      total += _conv(1, expanded, out_depth, 2)
      depth = out_depth
  return total + _conv(1, depth, 1280, 2) + _classifier(1280, num_classes)


def _edgetpu_spec(multiplier, variables):
  return Spec(1001, 224, 1280, _edgetpu_params(multiplier, 1001),
              ['layer_1', 'layer_2/output', 'layer_3/expansion_output',
               'layer_11/depthwise_output', 'layer_24', 'global_pool'],
              dict(variables, **{
                  'MobilenetEdgeTPU/Logits/Conv2d_1c_1x1/weights': [
                      1, 1, 1280, 1001]}))
def _nasnet_spec(num_classes, image_size, feature_depth, trainable_params,
                 num_cells, num_reductions, checkpoint_variables):
  return Spec(num_classes, image_size, feature_depth, trainable_params,
              ['Stem', 'Cell_0', 'Cell_%d' % (num_cells - 1), 'global_pool'] +
              ['Reduction_Cell_%d' % i for i in range(num_reductions)],
              checkpoint_variables)


SPECS = {
    # MNIST: 28x28x1, 10 classes. Two 5x5 convolutions (32, 64), 2x2 pools
    # to 7x7, fc 1024, fc 10.
    'lenet': Spec(
        10, 28, 1024,
        _conv(5, 1, 32) + _conv(5, 32, 64) + _classifier(7 * 7 * 64, 1024) +
        _classifier(1024, 10),
        ['conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3'],
        {'LeNet/conv1/weights': [5, 5, 1, 32],
         'LeNet/fc4/weights': [1024, 10]}),
    # CIFAR-10: 32x32x3, 10 classes. Two 5x5 convolutions (64, 64), 2x2
    # pools to 8x8, fc 384, fc 192, fc 10.
    'cifarnet': Spec(
        10, 32, 192,
        _conv(5, 3, 64) + _conv(5, 64, 64) + _classifier(8 * 8 * 64, 384) +
        _classifier(384, 192) + _classifier(192, 10),
        ['conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3', 'fc4'],
        {'CifarNet/conv1/weights': [5, 5, 3, 64],
         'CifarNet/logits/weights': [192, 10]}),
    # "One weird trick" (Krizhevsky 2014) without LRN; fc6 is a 5x5
    # convolution on the 5x5x256 map of pool5.
    'alexnet_v2': Spec(
        1000, 224, 4096,
        _conv(11, 3, 64) + _conv(5, 64, 192) + _conv(3, 192, 384) +
        _conv(3, 384, 384) + _conv(3, 384, 256) + _conv(5, 256, 4096) +
        _classifier(4096, 4096) + _classifier(4096, 1000),
        ['alexnet_v2/conv1', 'alexnet_v2/conv5', 'alexnet_v2/fc7',
         'alexnet_v2/fc8'],
        {'alexnet_v2/conv1/weights': [11, 11, 3, 64],
         'alexnet_v2/fc6/weights': [5, 5, 256, 4096]}),
    # OverFeat fast model (Sermanet et al. 2014, Table 1) at 231x231; fc6 is
    # a 6x6 convolution on the 6x6x1024 map of pool5.
    'overfeat': Spec(
        1000, 231, 4096,
        _conv(11, 3, 64) + _conv(5, 64, 256) + _conv(3, 256, 512) +
        _conv(3, 512, 1024) + _conv(3, 1024, 1024) + _conv(6, 1024, 3072) +
        _classifier(3072, 4096) + _classifier(4096, 1000),
        ['overfeat/conv1', 'overfeat/conv5', 'overfeat/fc7', 'overfeat/fc8'],
        {'overfeat/fc6/weights': [6, 6, 1024, 3072]}),
    # torchvision vgg11 / vgg16 / vgg19 (= tf_keras VGG16 / VGG19).
    'vgg_a': _vgg_spec('vgg_a', 132863336, 'conv5/conv5_2'),
    'vgg_16': _vgg_spec('vgg_16', 138357544, 'conv5/conv5_3'),
    'vgg_19': _vgg_spec('vgg_19', 143667240, 'conv5/conv5_4'),
    'inception_v1': Spec(
        1001, 224, 1024, _inception_v1_params(1001),
        ['Conv2d_1a_7x7', 'Mixed_3b', 'Mixed_5c'],
        {'InceptionV1/Conv2d_1a_7x7/weights': [7, 7, 3, 64],
         'InceptionV1/Mixed_5c/Branch_2/Conv2d_0b_3x3/weights': [
             3, 3, 48, 128],
         'InceptionV1/Logits/Conv2d_0c_1x1/weights': [1, 1, 1024, 1001]}),
    'inception_v2': Spec(
        1001, 224, 1024, _inception_v2_params(1001),
        ['Conv2d_1a_7x7', 'Mixed_4a', 'Mixed_5c'],
        {'InceptionV2/Conv2d_1a_7x7/depthwise_weights': [7, 7, 3, 8],
         'InceptionV2/Logits/Conv2d_1c_1x1/weights': [1, 1, 1024, 1001]}),
    'inception_v3': Spec(
        1001, 299, 2048, _INCEPTION_V3_1001,
        ['Conv2d_1a_3x3', 'Mixed_6e', 'Mixed_7c', 'AuxLogits', 'PreLogits'],
        {'InceptionV3/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
         'InceptionV3/AuxLogits/Conv2d_2b_1x1/weights': [1, 1, 768, 1001],
         'InceptionV3/Logits/Conv2d_1c_1x1/weights': [1, 1, 2048, 1001]}),
    # The v1 checkpoints have 1000 classes: torchvision resnet50/101/152
    # (its ResNet v1.5 moves a stride, not a parameter). The v2 ones 1001.
    'resnet_v1_50': _resnet_spec(1, 50, 1000, 25557032),
    'resnet_v1_101': _resnet_spec(1, 101, 1000, 44549160),
    'resnet_v1_152': _resnet_spec(1, 152, 1000, 60192808),
    'resnet_v1_200': _resnet_spec(1, 200, 1000),
    'resnet_v2_50': _resnet_spec(2, 50, 1001),
    'resnet_v2_101': _resnet_spec(2, 101, 1001),
    'resnet_v2_152': _resnet_spec(2, 152, 1001),
    'resnet_v2_200': _resnet_spec(2, 200, 1001),
    # tf_keras.applications.MobileNet(alpha=1.0, 0.75, 0.5, 0.25).
    'mobilenet_v1': _mobilenet_v1_spec(4231976, 1024),
    'mobilenet_v1_075': _mobilenet_v1_spec(2585560, 768),
    'mobilenet_v1_050': _mobilenet_v1_spec(1331592, 512),
    'mobilenet_v1_025': _mobilenet_v1_spec(470072, 256),
    # tf_keras.applications.MobileNetV2(alpha=1.0, 1.4, 0.35). Channel
    # counts by upstream's rounding to multiples of 8, the rule the published
    # mobilenet_v2_{1.0,1.4,0.35}_224 checkpoints were built with.
    'mobilenet_v2': _mobilenet_v2_spec(3504872, 32, 320, [1, 1, 16, 96], 1280),
    'mobilenet_v2_140': _mobilenet_v2_spec(6108776, 48, 448, [1, 1, 24, 144],
                                           1792),
    'mobilenet_v2_035': _mobilenet_v2_spec(1677128, 16, 112, [1, 1, 8, 48],
                                           1280),
    # Squeeze-and-excite to a quarter of the expanded channels, rounded to
    # a multiple of 8 no more than 10% below it (72 / 4 -> 24, 16 / 4 -> 8).
    'mobilenet_v3_small': _mobilenet_v3_spec(2542856, 11, 1024, {
        'MobilenetV3/Conv/weights': [3, 3, 3, 16],
        'MobilenetV3/expanded_conv/depthwise/depthwise_weights': [
            3, 3, 16, 1],
        'MobilenetV3/expanded_conv/squeeze_excite/Conv/weights': [
            1, 1, 16, 8],
        'MobilenetV3/expanded_conv/squeeze_excite/Conv_1/biases': [16],
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [
            5, 5, 96, 1],
        'MobilenetV3/Conv_1/weights': [1, 1, 96, 576],
        'MobilenetV3/Conv_2/weights': [1, 1, 576, 1024]}),
    'mobilenet_v3_large': _mobilenet_v3_spec(5483032, 15, 1280, {
        'MobilenetV3/Conv/weights': [3, 3, 3, 16],
        'MobilenetV3/expanded_conv_1/expand/weights': [1, 1, 16, 64],
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [
            5, 5, 72, 1],
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights': [
            1, 1, 72, 24],
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/biases': [24],
        'MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/weights': [
            1, 1, 24, 72],
        'MobilenetV3/Conv_1/weights': [1, 1, 160, 960],
        'MobilenetV3/Conv_2/weights': [1, 1, 960, 1280]}),
    'mobilenet_v3_small_minimalistic': _mobilenet_v3_spec(2044736, 11, 1024, {
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [
            3, 3, 96, 1],
        'MobilenetV3/Conv_1/weights': [1, 1, 96, 576]}),
    'mobilenet_v3_large_minimalistic': _mobilenet_v3_spec(3924288, 15, 1280, {
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [
            3, 3, 72, 1],
        'MobilenetV3/Conv_1/weights': [1, 1, 160, 960]}),
    'mobilenet_edgetpu': _edgetpu_spec(1.0, {
        'MobilenetEdgeTPU/Conv/weights': [3, 3, 3, 32],
        'MobilenetEdgeTPU/expanded_conv/project/weights': [1, 1, 32, 16],
        'MobilenetEdgeTPU/expanded_conv_1/expand/weights': [3, 3, 16, 128],
        'MobilenetEdgeTPU/expanded_conv_9/expand/weights': [1, 1, 48, 384],
        'MobilenetEdgeTPU/expanded_conv_9/depthwise/depthwise_weights': [
            3, 3, 384, 1],
        'MobilenetEdgeTPU/Conv_1/weights': [1, 1, 192, 1280]}),
    'mobilenet_edgetpu_075': _edgetpu_spec(0.75, {
        'MobilenetEdgeTPU/Conv/weights': [3, 3, 3, 24],
        'MobilenetEdgeTPU/expanded_conv/project/weights': [1, 1, 24, 16],
        'MobilenetEdgeTPU/expanded_conv_1/project/weights': [1, 1, 128, 24],
        'MobilenetEdgeTPU/Conv_1/weights': [1, 1, 144, 1280]}),
    # NASNet and PNASNet, built here in evaluation, without the auxiliary
    # head that only training builds. The output of the last cell
    # concatenates 6 (NASNet-A normal cell) or 5 (PNASNet-5) hidden states
    # of 4 x num_conv_filters channels. Counts: NASNet mobile and large from
    # tf_keras.applications.NASNetMobile / NASNetLarge (5,289,978 and
    # 88,753,150 trainable at 1000 classes, which have no auxiliary head
    # either, and no biases but the classifier's, as Slim's arg scope);
    # NASNet CIFAR and PNASNet measured from upstream's definition
    # (tensorflow/models research/slim/nets/nasnet, built with tf-slim);
    # all round to the papers' millions (PUBLISHED_MILLIONS).
    'nasnet_cifar': _nasnet_spec(
        10, 32, 6 * 128, 3346538, 18, 2,
        {'l1_stem_3x3/weights': [3, 3, 3, 96],
         'cell_0/1x1/weights': [1, 1, 96, 32],
         'cell_6/path1_conv/weights': [1, 1, 192, 32],
         'reduction_cell_1/comb_iter_0/left/separable_5x5_1/'
         'pointwise_weights': [1, 1, 128, 128],
         'final_layer/FC/weights': [768, 10]}),
    'nasnet_mobile': _nasnet_spec(
        1001, 224, 6 * 176, _reclassed(5289978, 1056, 1001), 12, 2,
        {'conv0/weights': [3, 3, 3, 32],
         'cell_stem_0/comb_iter_0/right/separable_7x7_1/'
         'depthwise_weights': [7, 7, 32, 1],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 11],
         'cell_4/path1_conv/weights': [1, 1, 264, 44],
         'final_layer/FC/weights': [1056, 1001]}),
    'nasnet_large': _nasnet_spec(
        1001, 331, 6 * 672, _reclassed(88753150, 4032, 1001), 18, 2,
        {'conv0/weights': [3, 3, 3, 96],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/'
         'depthwise_weights': [5, 5, 42, 1],
         'cell_6/path1_conv/weights': [1, 1, 1008, 168],
         'reduction_cell_1/comb_iter_0/left/separable_5x5_1/'
         'pointwise_weights': [1, 1, 672, 672],
         'final_layer/FC/biases': [1001]}),
    'pnasnet_mobile': _nasnet_spec(
        1001, 224, 5 * 216, 5065568, 9, 0,
        {'conv0/weights': [3, 3, 3, 32],
         'cell_stem_0/comb_iter_0/right/1x1/weights': [1, 1, 32, 13],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 14],
         'cell_0/comb_iter_1/left/separable_7x7_1/depthwise_weights': [
             7, 7, 54, 1],
         'cell_4/path1_conv/weights': [1, 1, 270, 54],
         'final_layer/FC/weights': [1080, 1001]}),
    'pnasnet_large': _nasnet_spec(
        1001, 331, 5 * 864, 86061989, 12, 0,
        {'conv0/weights': [3, 3, 3, 96],
         'cell_stem_1/path1_conv/weights': [1, 1, 96, 54],
         'cell_0/1x1/weights': [1, 1, 540, 216],
         'cell_4/prev_1x1/weights': [1, 1, 1080, 432],
         'final_layer/FC/weights': [4320, 1001]}),
    'inception_v4': Spec(
        1001, 299, 1536, _inception_v4_params(1001),
        ['Conv2d_1a_3x3', 'Mixed_3a', 'Mixed_5e', 'Mixed_6h', 'Mixed_7d',
         'AuxLogits', 'global_pool', 'PreLogitsFlatten'],
        {'InceptionV4/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
         'InceptionV4/Mixed_4a/Branch_1/Conv2d_0b_1x7/weights': [
             1, 7, 64, 64],
         'InceptionV4/Mixed_7d/Branch_2/Conv2d_0e_3x1/weights': [
             3, 1, 512, 256],
         'InceptionV4/AuxLogits/Conv2d_2a/weights': [5, 5, 128, 768],
         'InceptionV4/AuxLogits/Aux_logits/biases': [1001],
         'InceptionV4/Logits/Logits/weights': [1536, 1001]}),
    'inception_resnet_v2': Spec(
        1001, 299, 1536, _INCEPTION_RESNET_V2_1001,
        ['Conv2d_1a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a',
         'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1', 'AuxLogits',
         'global_pool', 'PreLogitsFlatten'],
        {'InceptionResnetV2/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
         'InceptionResnetV2/Repeat/block35_10/Conv2d_1x1/biases': [320],
         'InceptionResnetV2/Repeat_1/block17_20/Branch_1/Conv2d_0b_1x7/'
         'weights': [1, 7, 128, 160],
         'InceptionResnetV2/Repeat_2/block8_9/Conv2d_1x1/weights': [
             1, 1, 448, 2080],
         'InceptionResnetV2/Block8/Conv2d_1x1/weights': [1, 1, 448, 2080],
         'InceptionResnetV2/Conv2d_7b_1x1/BatchNorm/moving_mean': [1536],
         'InceptionResnetV2/AuxLogits/Conv2d_2a_5x5/weights': [
             5, 5, 128, 768],
         'InceptionResnetV2/AuxLogits/Logits/weights': [768, 1001],
         'InceptionResnetV2/Logits/Logits/weights': [1536, 1001]}),
}

SPECS.update({
    # Upstream's defaults: 1000 classes, 64-frame clips (the papers' and
    # upstream's tests'). Every kxk kernel spans 3 frames, the first 7.
    'i3d': Spec(
        1000, 224, 1024, _inflated_inception_v1_params(1000, 7, 3),
        ['Conv2d_1a_7x7', 'MaxPool_4a_3x3', 'Mixed_5c'],
        {'InceptionV1/Conv2d_1a_7x7/weights': [7, 7, 7, 3, 64],
         'InceptionV1/Conv2d_2c_3x3/weights': [3, 3, 3, 64, 192],
         'InceptionV1/Mixed_4b/Branch_3/Conv2d_0b_1x1/weights': [
             1, 1, 1, 480, 64],
         'InceptionV1/Mixed_5c/Branch_2/Conv2d_0b_3x3/weights': [
             3, 3, 3, 48, 128],
         'InceptionV1/Logits/Conv2d_0c_1x1/weights': [1, 1, 1, 1024, 1000]},
        num_frames=64),
    # The first kernel spans 3 frames; the others are separable, all gated.
    's3dg': Spec(
        1000, 224, 1024,
        _inflated_inception_v1_params(1000, 3, 3, separable=True, gated=True),
        ['Conv2d_1a_7x7', 'Conv2d_2c_3x3', 'Mixed_5c'],
        {'InceptionV1/Conv2d_1a_7x7/weights': [3, 7, 7, 3, 64],
         'InceptionV1/Conv2d_2c_3x3/weights': [1, 3, 3, 64, 192],
         'InceptionV1/Conv2d_2c_3x3/temporal/weights': [3, 1, 1, 192, 192],
         'InceptionV1/Conv2d_2c_3x3/temporal/biases': [192],
         'InceptionV1/Conv2d_2c_3x3/self_gating/transformer_W/weights': [
             1, 1, 1, 192, 192],
         'InceptionV1/Mixed_5c/Branch_1/Conv2d_0b_3x3/temporal/weights': [
             3, 1, 1, 384, 384],
         'InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/self_gating/'
         'transformer_W/weights': [1, 1, 1, 128, 128],
         'InceptionV1/Logits/Conv2d_0c_1x1/biases': [1000]},
        num_frames=64),
})

# Millions of parameters in the papers' tables: NASNet-A 6 @ 768 (CIFAR-10),
# 4 @ 1056 and 6 @ 4032 (Zoph et al. 2018; also upstream's README), and the
# mobile and large PNASNet-5 (Liu et al. 2018), at 1000 classes. NASNet's
# ImageNet figures count the batch-norm moving averages too, as
# tf_keras.applications' NASNetMobile and NASNetLarge count them (36,738
# and 196,668 non-trainable weights; 88.9 is their 88,949,818, while the
# trainable weights round to 88.8).
PUBLISHED_MILLIONS = {'nasnet_cifar': 3.3, 'nasnet_mobile': 5.3,
                      'nasnet_large': 88.9, 'pnasnet_mobile': 5.1,
                      'pnasnet_large': 86.1}
_MOVING_AVERAGES_COUNTED = {'nasnet_mobile': 36738, 'nasnet_large': 196668}


def _input_shape(name, batch, size):
  """Images [batch, size, size, channels]; clips for the video networks."""
  frames = SPECS[name].num_frames
  if frames:
    return [batch, frames, size, size, 3]
  return [batch, size, size, 1 if name == 'lenet' else 3]


def _trainable_params():
  return sum(v.shape.num_elements() for v in tf.trainable_variables())


def test_every_upstream_slim_name_is_registered_with_an_arg_scope():
  assert sorted(nets_factory.networks_map) == sorted(UPSTREAM_SLIM_NAMES)
  assert sorted(nets_factory.arg_scopes_map) == sorted(UPSTREAM_SLIM_NAMES)
  assert sorted(SPECS) == sorted(UPSTREAM_SLIM_NAMES)


def test_unknown_name_raises_value_error_naming_it_and_the_known_ones():
  with pytest.raises(ValueError) as error:
    nets_factory.get_network_fn('resnet_v3_50', num_classes=10)
  message = str(error.value)
  assert "'resnet_v3_50'" in message
  assert ', '.join(sorted(UPSTREAM_SLIM_NAMES)) in message


@pytest.mark.parametrize('name', UPSTREAM_SLIM_NAMES)
def test_network_fn_has_default_image_size_and_network_name(name):
  network_fn = nets_factory.get_network_fn(name, num_classes=10)
  assert network_fn.default_image_size == SPECS[name].image_size
  assert network_fn.__name__ == nets_factory.networks_map[name].__name__
  assert (getattr(network_fn, 'default_num_frames', None) ==
          SPECS[name].num_frames)


@pytest.fixture(scope='module', params=_marking_slow(UPSTREAM_SLIM_NAMES))
def classifier(request):
  """(name, logits, end_points, graph) at the published number of classes."""
  name = request.param
  spec = SPECS[name]
  with tf.Graph().as_default() as graph:
    network_fn = nets_factory.get_network_fn(name, spec.num_classes)
    size = network_fn.default_image_size
    images = tf.placeholder(tf.float32, _input_shape(name, 2, size))
    logits, end_points = network_fn(images)
  yield name, logits, end_points, graph


def test_logits_are_batch_by_num_classes(classifier):
  name, logits, end_points, _ = classifier
  assert logits.shape.as_list() == [2, SPECS[name].num_classes]
  assert end_points['Logits'] is logits
  assert end_points['Predictions'].shape.as_list() == logits.shape.as_list()


def test_end_points_include_documented_keys(classifier):
  name, _, end_points, _ = classifier
  missing = set(SPECS[name].end_points) - set(end_points)
  assert not missing


def test_trainable_parameter_count_matches_the_architecture(classifier):
  name, _, _, graph = classifier
  with graph.as_default():
    assert _trainable_params() == SPECS[name].trainable_params


def test_variables_have_the_published_checkpoint_names_and_shapes(classifier):
  name, _, _, graph = classifier
  with graph.as_default():
    shapes = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
  for variable, shape in SPECS[name].checkpoint_variables.items():
    assert shapes.get(variable) == shape, variable


# The deeper ResNets build their features exactly as resnet_v*_50 do (the
# same wrapper passes num_classes=None to tf-slim's builder, which only has
# more units per block); building them once more would add a third to the
# time of this module. So do NASNet's CIFAR and large networks as
# nasnet_mobile, and pnasnet_large as pnasnet_mobile (the same function,
# another configuration).
FEATURE_NAMES = tuple(
    name for name in UPSTREAM_SLIM_NAMES
    if (not name.startswith('resnet') or name.endswith('_50')) and
    name not in ('nasnet_cifar', 'nasnet_large', 'pnasnet_large'))


@pytest.fixture(scope='module', params=_marking_slow(FEATURE_NAMES))
def features(request):
  """(name, features, trainable parameter count), num_classes=0, batch None."""
  name = request.param
  with tf.Graph().as_default():
    network_fn = nets_factory.get_network_fn(name, num_classes=0)
    size = network_fn.default_image_size
    images = tf.placeholder(tf.float32, _input_shape(name, None, size))
    net, _ = network_fn(images)
    trainable_params = _trainable_params()
  yield name, net, trainable_params


def test_num_classes_0_gives_pre_logits_features_for_unknown_batch(features):
  name, net, _ = features
  assert net.shape.as_list() == [None, SPECS[name].feature_depth]


def test_num_classes_0_builds_no_classifier_variables(features):
  name, _, trainable_params = features
  spec = SPECS[name]
  head = _classifier(spec.feature_depth, spec.num_classes)
  if name == 'inception_v3':
    head += _INCEPTION_V3_AUX_HEAD + _classifier(768, spec.num_classes)
  if name in _AUX_HEAD_INPUT_DEPTHS:
    head += _aux_head(_AUX_HEAD_INPUT_DEPTHS[name], spec.num_classes)
  assert trainable_params == spec.trainable_params - head


# One network per way of building the features: each file of nets/ and each
# wrapper family of nets/slim_nets.py.
@pytest.mark.parametrize('name', ['lenet', 'cifarnet', 'mobilenet_v1',
                                  'mobilenet_v2', 'mobilenet_v3_small',
                                  'alexnet_v2', 'inception_v1',
                                  'resnet_v1_50', 'i3d', 's3dg'])
def test_num_classes_none_gives_features_like_0(graph, name):
  network_fn = nets_factory.get_network_fn(name, num_classes=None)
  size = network_fn.default_image_size
  net, end_points = network_fn(tf.zeros(_input_shape(name, 2, size)))
  assert net.shape.as_list() == [2, SPECS[name].feature_depth]
  assert 'Logits' not in end_points


def test_inflated_count_formula_with_one_frame_is_inception_v1s():
  # Justifies _inflated_inception_v1_params by the 2-D count it inflates.
  assert (_inflated_inception_v1_params(1001, 1, 1) ==
          _inception_v1_params(1001))
  assert (_inflated_inception_v1_params(1001, 1, 1, separable=True) ==
          _inception_v1_params(1001))


def test_resnet_count_formula_reproduces_torchvision_counts():
  # Justifies _resnet_params for the depths torchvision does not publish.
  assert _resnet_params(1, 50, 1000) == 25557032
  assert _resnet_params(1, 101, 1000) == 44549160
  assert _resnet_params(1, 152, 1000) == 60192808


def test_inception_v4_count_formula_reproduces_timms_count():
  # timm's and pretrainedmodels' inception_v4 (ported from the Slim
  # checkpoint; also keras-hub's inception_v4_imagenet): 42,679,816 at 1000
  # classes, without the auxiliary head, with batch norm's gamma.
  assert _inception_v4_params(1000, per_channel=2, aux_head=False) == (
      42679816)


@pytest.mark.parametrize('name', sorted(PUBLISHED_MILLIONS))
def test_nasnet_counts_round_to_the_papers_millions(name):
  spec = SPECS[name]
  count = spec.trainable_params + _MOVING_AVERAGES_COUNTED.get(name, 0)
  if spec.num_classes == 1001:
    count = _reclassed(count, spec.feature_depth, 1000, published_classes=1001)
  assert round(count / 1e6, 1) == PUBLISHED_MILLIONS[name]
