"""PNASNet-5, with the variable names of the published Slim checkpoints.

"Progressive Neural Architecture Search", Liu et al., 2018
(https://arxiv.org/abs/1712.00559).

One cell, PNASNet-5 (nets/nasnet_cells.py has its table), throughout: the
ImageNet stem of NASNet (a 3x3 stride-2 convolution, then two cells at
stride 2), three stacks of cells with the first cell of the second and third
stack at stride 2 and twice the filters, then a ReLU, global average
pooling and a fully connected classifier (nets/nasnet_common.py). Two
published configurations:

  pnasnet_mobile  PNASNet-5 on ImageNet (224x224), checkpoint
                  `pnasnet-5_mobile_2017_12_13`: 9 cells of 54 to 216
                  filters.
  pnasnet_large   PNASNet-5 on ImageNet (331x331), checkpoint
                  `pnasnet-5_large_2017_12_13`: 12 cells of 216 to 864
                  filters.

Variables carry no network scope: `conv0/weights`, `cell_stem_0/
comb_iter_0/left/separable_5x5_1/depthwise_weights`, `cell_4/
comb_iter_1/left/bn_sep_7x7_2/gamma`, `aux_7/aux_logits/FC/weights`
(training only), `final_layer/FC/weights`.

Usage:
  with slim.arg_scope(pnasnet_large_arg_scope()):
    logits, end_points = pnasnet_large(images, num_classes=1001,
                                       is_training=False)
"""

from nets import nasnet_cells
from nets import nasnet_common
from tf2_compat.slim_compat import slim

# Upstream's large_imagenet_config() and mobile_imagenet_config() of
# pnasnet.py.
LARGE_CONFIG = nasnet_common.NasNetConfig(
    num_cells=12, num_conv_filters=216, stem_multiplier=3.0,
    drop_path_keep_prob=0.6, total_training_steps=250000,
    skip_reduction_layer_input=True)
MOBILE_CONFIG = nasnet_common.NasNetConfig(
    num_cells=9, num_conv_filters=54, stem_multiplier=1.0,
    drop_path_keep_prob=1.0, total_training_steps=250000,
    skip_reduction_layer_input=True)


def pnasnet(inputs, config, num_classes, is_training=True,
            dropout_keep_prob=0.5, total_training_steps=None):
  """Builds a PNASNet-5 on `inputs`.

  Args:
    inputs: float tensor [batch, height, width, 3].
    config: a nasnet_common.NasNetConfig, e.g. LARGE_CONFIG, with
      imagenet_stem and skip_reduction_layer_input, as both published
      PNASNets: every cell reads the outputs of the two cells before it.
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
    end_points: dict with 'Stem', 'Cell_<i>' for the cells,
      'global_pool', and with classes 'Logits', 'Predictions' and, in
      training, 'AuxLogits'.

  Raises:
    ValueError: if config has no ImageNet stem or no
      skip_reduction_layer_input.
  """
  if not (config.imagenet_stem and config.skip_reduction_layer_input):
    raise ValueError(
        'PNASNet is built with the ImageNet stem and '
        'skip_reduction_layer_input, as both published PNASNets; got '
        'imagenet_stem=%s, skip_reduction_layer_input=%s'
        % (config.imagenet_stem, config.skip_reduction_layer_input))
  # The stride-2 cells are cells like the others: the stem's two and
  # num_cells count in the drop-path schedule.
  drop_path = config.drop_path(is_training, config.num_cells + 2,
                               total_training_steps)
  reductions = config.reduction_indices()
  aux_head_index = config.aux_head_index() if num_classes else None
  end_points = {}
  with slim.arg_scope([slim.batch_norm, slim.dropout],
                      is_training=is_training):
    net, outputs = nasnet_common.imagenet_stem(
        inputs, config, nasnet_cells.PNASNET_5, drop_path)
    end_points['Stem'] = net

    filter_scaling = 1.0
    for index in range(config.num_cells):
      reduces = index in reductions
      if reduces:
        filter_scaling *= config.filter_scaling_rate
      net = nasnet_cells.cell(
          net, outputs[-2], nasnet_cells.PNASNET_5,
          config.filters(filter_scaling), stride=2 if reduces else 1,
          scope='cell_%d' % index, drop_path=drop_path,
          cell_number=index + 2)
      end_points['Cell_%d' % index] = net
      outputs.append(net)
      if is_training and index == aux_head_index:
        end_points['AuxLogits'] = nasnet_common.aux_head(
            net, num_classes, scope='aux_%d' % index)

    logits = nasnet_common.final_layer(net, num_classes, dropout_keep_prob,
                                       end_points)
  return logits, end_points


# The minimum side leaves the auxiliary classifier's 5x5 VALID pooling a 5x5
# map after conv0 (VALID, stride 2) and three stride-2 cells: 67 -> 33 ->
# 17 -> 9 -> 5, as in NASNet's ImageNet networks.
pnasnet_mobile = nasnet_common.published_network(
    pnasnet, MOBILE_CONFIG, 'pnasnet_mobile', default_image_size=224,
    min_image_size=67)
pnasnet_large = nasnet_common.published_network(
    pnasnet, LARGE_CONFIG, 'pnasnet_large', default_image_size=331,
    min_image_size=67)


# The layer defaults of upstream's pnasnet_{mobile,large}_arg_scope.
pnasnet_mobile_arg_scope = nasnet_common.published_arg_scope(
    'pnasnet_mobile', weight_decay=4e-5, batch_norm_decay=0.9997,
    batch_norm_epsilon=1e-3)
pnasnet_large_arg_scope = nasnet_common.published_arg_scope(
    'pnasnet_large', weight_decay=4e-5, batch_norm_decay=0.9997,
    batch_norm_epsilon=1e-3)
