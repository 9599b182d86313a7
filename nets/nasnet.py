"""NASNet-A, with the variable names of the published Slim checkpoints.

"Learning Transferable Architectures for Scalable Image Recognition", Zoph
et al., 2018 (https://arxiv.org/abs/1707.07012).

Three stacks of normal cells with a reduction cell between stacks
(nets/nasnet_cells.py has both cells' tables), then a ReLU, global average
pooling and a fully connected classifier; nets/nasnet_common.py has the
pieces NASNet shares with PNASNet. Three published configurations:

  nasnet_cifar   NASNet-A 6@768 on CIFAR-10 (32x32): a 3x3 convolution, 18
                 normal cells of 32, 64, 128 filters.
  nasnet_mobile  NASNet-A 4@1056 on ImageNet (224x224), checkpoint
                 `nasnet-a_mobile_04_10_2017`: 12 normal cells of 44 to 176
                 filters.
  nasnet_large   NASNet-A 6@4032 on ImageNet (331x331), checkpoint
                 `nasnet-a_large_04_10_2017`: 18 normal cells of 168 to 672
                 filters.

The ImageNet networks start with a 3x3 stride-2 convolution and two
reduction cells as stem. Variables carry no network scope: `conv0/weights`
(`l1_stem_3x3/weights` on CIFAR), `cell_stem_0/comb_iter_0/left/
separable_5x5_1/depthwise_weights`, `cell_0/1x1/weights`,
`reduction_cell_0/...`, `aux_11/aux_logits/FC/weights` (training only),
`final_layer/FC/weights`.

Usage:
  with slim.arg_scope(nasnet_large_arg_scope()):
    logits, end_points = nasnet_large(images, num_classes=1001,
                                      is_training=False)
"""

from nets import nasnet_cells
from nets import nasnet_common
from tf2_compat.slim_compat import slim

# Upstream's cifar_config(): 600 epochs at batch 32 is 937,500 steps.
CIFAR_CONFIG = nasnet_common.NasNetConfig(
    num_cells=18, num_conv_filters=32, stem_multiplier=3.0,
    drop_path_keep_prob=0.6, total_training_steps=937500,
    skip_reduction_layer_input=False, imagenet_stem=False)
# Upstream's mobile_imagenet_config(): no drop path.
MOBILE_CONFIG = nasnet_common.NasNetConfig(
    num_cells=12, num_conv_filters=44, stem_multiplier=1.0,
    drop_path_keep_prob=1.0, total_training_steps=250000,
    skip_reduction_layer_input=False)
# Upstream's large_imagenet_config().
LARGE_CONFIG = nasnet_common.NasNetConfig(
    num_cells=18, num_conv_filters=168, stem_multiplier=3.0,
    drop_path_keep_prob=0.7, total_training_steps=250000,
    skip_reduction_layer_input=True)


def _cifar_stem(inputs, config):
  net = slim.conv2d(inputs, config.filters(config.stem_multiplier), 3,
                    scope='l1_stem_3x3')
  net = slim.batch_norm(net, scope='l1_stem_bn')
  return net, [None, net]


def nasnet(inputs, config, num_classes, is_training=True,
           dropout_keep_prob=0.5, total_training_steps=None):
  """Builds a NASNet-A on `inputs`.

  Args:
    inputs: float tensor [batch, height, width, 3].
    config: a nasnet_common.NasNetConfig, e.g. LARGE_CONFIG.
    num_classes: number of classes; 0 or None returns the pooled features
      instead of logits (and builds no auxiliary classifier).
    is_training: whether batch norm uses batch statistics (and updates its
      moving averages through tf.GraphKeys.UPDATE_OPS), dropout and drop
      path are active, and the auxiliary classifier is built.
    dropout_keep_prob: probability that a pooled feature is kept in
      training (upstream's dense_dropout_keep_prob).
    total_training_steps: the global step at which drop path reaches its
      lowest keep probability; None: config.total_training_steps.

  Returns:
    logits: [batch, num_classes] (or the pooled features [batch, depth]
      when num_classes is 0 or None).
    end_points: dict with 'Stem', 'Cell_<i>' and 'Reduction_Cell_<i>' for
      the cells, 'global_pool', and with classes 'Logits', 'Predictions'
      and, in training, 'AuxLogits'.
  """
  # Stem cells and reduction cells count in the drop-path schedule.
  stem_cells = 2 if config.imagenet_stem else 0
  reductions = config.reduction_indices()
  drop_path = config.drop_path(
      is_training, config.num_cells + len(reductions) + stem_cells,
      total_training_steps)
  aux_head_index = config.aux_head_index() if num_classes else None
  end_points = {}
  with slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    if config.imagenet_stem:
      net, outputs = nasnet_common.imagenet_stem(
          inputs, config, nasnet_cells.NASNET_A_REDUCTION, drop_path)
    else:
      net, outputs = _cifar_stem(inputs, config)
    end_points['Stem'] = net

    filter_scaling = 1.0
    cell_number = stem_cells
    for index in range(config.num_cells):
      before_reduction = outputs[-2]
      if index in reductions:
        filter_scaling *= config.filter_scaling_rate
        reduction = reductions.index(index)
        net = nasnet_cells.cell(
            net, outputs[-2], nasnet_cells.NASNET_A_REDUCTION,
            config.filters(filter_scaling), stride=2,
            scope='reduction_cell_%d' % reduction, drop_path=drop_path,
            cell_number=cell_number)
        end_points['Reduction_Cell_%d' % reduction] = net
        cell_number += 1
        outputs.append(net)
      previous = (before_reduction if config.skip_reduction_layer_input
                  else outputs[-2])
      net = nasnet_cells.cell(
          net, previous, nasnet_cells.NASNET_A_NORMAL,
          config.filters(filter_scaling), stride=1, scope='cell_%d' % index,
          drop_path=drop_path, cell_number=cell_number)
      end_points['Cell_%d' % index] = net
      cell_number += 1
      outputs.append(net)
      if is_training and index == aux_head_index:
        end_points['AuxLogits'] = nasnet_common.aux_head(
            net, num_classes, scope='aux_%d' % index)

    logits = nasnet_common.final_layer(net, num_classes, dropout_keep_prob,
                                       end_points)
  return logits, end_points


# The minimum sides leave the auxiliary classifier's 5x5 VALID pooling a
# 5x5 map: at half the side on CIFAR (9 -> 5); after conv0 (VALID, stride
# 2) and three stride-2 cells on ImageNet (67 -> 33 -> 17 -> 9 -> 5).
nasnet_cifar = nasnet_common.published_network(
    nasnet, CIFAR_CONFIG, 'nasnet_cifar', default_image_size=32,
    min_image_size=9, default_num_classes=10, default_dropout_keep_prob=1.0)
nasnet_mobile = nasnet_common.published_network(
    nasnet, MOBILE_CONFIG, 'nasnet_mobile', default_image_size=224,
    min_image_size=67)
nasnet_large = nasnet_common.published_network(
    nasnet, LARGE_CONFIG, 'nasnet_large', default_image_size=331,
    min_image_size=67)


# The layer defaults of upstream's nasnet_{cifar,mobile,large}_arg_scope.
nasnet_cifar_arg_scope = nasnet_common.published_arg_scope(
    'nasnet_cifar', weight_decay=5e-4, batch_norm_decay=0.9,
    batch_norm_epsilon=1e-5)
nasnet_mobile_arg_scope = nasnet_common.published_arg_scope(
    'nasnet_mobile', weight_decay=4e-5, batch_norm_decay=0.9997,
    batch_norm_epsilon=1e-3)
nasnet_large_arg_scope = nasnet_common.published_arg_scope(
    'nasnet_large', weight_decay=5e-5, batch_norm_decay=0.9997,
    batch_norm_epsilon=1e-3)
