"""What NASNet and PNASNet share: hyper-parameters, layer defaults, stem,
auxiliary head and classifier.

Both stack cells (nets/nasnet_cells.py) in three stacks of equal length with
a stride-2 step between stacks, which doubles the filters; an ImageNet
network starts with a 3x3 convolution and two stride-2 stem cells at a
quarter and a half of the filters. In training, an auxiliary classifier
reads the last cell before the second stride-2 step. The classifier is a
ReLU, global average pooling, dropout and a fully connected layer, in the
scope `final_layer`. There is no scope around the network: its variables
are `conv0/weights`, `cell_stem_0/...`, `cell_0/...`, `aux_7/...`,
`final_layer/FC/weights`, as in the published checkpoints.
"""

import dataclasses

from nets import nasnet_cells
from tf2_compat.slim_compat import slim, tf


@dataclasses.dataclass(frozen=True)
class NasNetConfig:
  """The hyper-parameters of a published NASNet or PNASNet (upstream's
  HParams, under their names).

  Attributes:
    num_cells: the cells of the three stacks (3 x N in the papers'
      "N @ penultimate filters" notation), not counting the reduction and
      stem cells.
    num_conv_filters: the channels of each operation in the first stack.
    stem_multiplier: the first convolution has 32 x this channels
      (ImageNet), or num_conv_filters x this (CIFAR).
    drop_path_keep_prob: the keep probability drop path ends at for the
      last cell (1.0: no drop path); see nasnet_cells.DropPath.
    total_training_steps: the global step at which drop path reaches it,
      unless the network is told another.
    skip_reduction_layer_input: whether the cell after a stride-2 step
      reads, as its second input, the output of the cell before the step
      rather than the step's input.
    use_aux_head: whether training builds the auxiliary classifier.
    imagenet_stem: the 3x3 stride-2 convolution and two stem cells (True),
      or CIFAR's 3x3 convolution alone (False).
    filter_scaling_rate: the filters grow by this factor at each stride-2
      step.
    num_reduction_layers: the stride-2 steps between the stacks.
  """
  num_cells: int
  num_conv_filters: int
  stem_multiplier: float
  drop_path_keep_prob: float
  total_training_steps: int
  skip_reduction_layer_input: bool
  use_aux_head: bool = True
  imagenet_stem: bool = True
  filter_scaling_rate: float = 2.0
  num_reduction_layers: int = 2

  def filters(self, filter_scaling):
    return int(self.num_conv_filters * filter_scaling)

  def reduction_indices(self):
    """The cells before which a stride-2 step comes, e.g. [6, 12] for 18."""
    return [int(step / (self.num_reduction_layers + 1) * self.num_cells)
            for step in range(1, self.num_reduction_layers + 1)]

  def aux_head_index(self):
    """The cell the auxiliary classifier reads, or None."""
    reductions = self.reduction_indices()
    if not self.use_aux_head or len(reductions) < 2:
      return None
    return reductions[1] - 1

  def drop_path(self, is_training, total_cells, total_training_steps=None):
    """The DropPath of a network of `total_cells` cells, or None (in
    evaluation, or with drop_path_keep_prob 1)."""
    if not is_training or self.drop_path_keep_prob >= 1:
      return None
    if total_training_steps is None:
      total_training_steps = self.total_training_steps
    return nasnet_cells.DropPath(self.drop_path_keep_prob, total_cells,
                                 total_training_steps)


def training_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon):
  """Layer defaults of NASNet and PNASNet: convolutions without bias or
  activation (the cells place ReLU and batch norm themselves), He
  initialization over the fan-out, L2 decay of every weight, and batch norm
  with beta and gamma.

  Takes the arguments of the networks' arg scopes, without their defaults:
  each network's arg scope keeps the values of its published training.
  """
  with slim.arg_scope(
      [slim.fully_connected, slim.conv2d, slim.separable_conv2d],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=slim.variance_scaling_initializer(mode='FAN_OUT')):
    with slim.arg_scope([slim.fully_connected], activation_fn=None):
      with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                          activation_fn=None, biases_initializer=None):
        with slim.arg_scope([slim.batch_norm], decay=batch_norm_decay,
                            epsilon=batch_norm_epsilon, scale=True,
                            fused=True) as scope:
          return scope


def imagenet_stem(inputs, config, stem_cell, drop_path):
  """The 3x3 stride-2 convolution `conv0` and the cells `cell_stem_0` and
  `cell_stem_1` (cell numbers 0 and 1 of the drop-path schedule).

  Returns:
    The stem's output and the list of outputs the cells read: [None,
    conv0, cell_stem_0, cell_stem_1].
  """
  net = slim.conv2d(inputs, int(32 * config.stem_multiplier), [3, 3],
                    stride=2, padding='VALID', scope='conv0')
  net = slim.batch_norm(net, scope='conv0_bn')
  outputs = [None, net]
  for index in range(2):
    filter_scaling = config.filter_scaling_rate ** (index - 2)
    net = nasnet_cells.cell(
        net, outputs[-2], stem_cell, config.filters(filter_scaling), stride=2,
        scope='cell_stem_%d' % index, drop_path=drop_path, cell_number=index)
    outputs.append(net)
  return net, outputs


def aux_head(net, num_classes, scope):
  """The auxiliary classifier of a cell's output: [batch, num_classes]."""
  with tf.variable_scope(scope), tf.variable_scope('aux_logits'):
    net = slim.avg_pool2d(tf.nn.relu(net), [5, 5], stride=3, padding='VALID')
    net = slim.conv2d(net, 128, [1, 1], scope='proj')
    net = tf.nn.relu(slim.batch_norm(net, scope='aux_bn0'))
    # A convolution over the whole map, to one pixel.
    net = slim.conv2d(net, 768, net.shape[1:3], padding='VALID', scope='Conv')
    net = tf.nn.relu(slim.batch_norm(net, scope='aux_bn1'))
    return slim.fully_connected(slim.flatten(net), num_classes, scope='FC')


def final_layer(net, num_classes, dropout_keep_prob, end_points):
  """The classifier, in scope `final_layer`; fills end_points.

  Returns:
    The logits [batch, num_classes], or the pooled features [batch, depth]
    when num_classes is 0 or None.
  """
  with tf.variable_scope('final_layer'):
    net = tf.reduce_mean(tf.nn.relu(net), [1, 2], name='global_pool')
    end_points['global_pool'] = net
    if not num_classes:
      return net
    net = slim.dropout(net, dropout_keep_prob, scope='dropout')
    logits = slim.fully_connected(net, num_classes, scope='FC')
    end_points['Logits'] = logits
    end_points['Predictions'] = tf.nn.softmax(logits, name='predictions')
  return logits


def published_network(build, config, name, default_image_size,
                      min_image_size, default_num_classes=1001,
                      default_dropout_keep_prob=0.5):
  """The network function of a published configuration.

  Args:
    build: `nasnet.nasnet` or `pnasnet.pnasnet`.
    config: the NasNetConfig.
    name: the network's name, e.g. 'nasnet_large'.
    default_image_size: the side it was trained at.
    min_image_size: the smallest side it builds at in training.
    default_num_classes: the classes of its checkpoint (or dataset).
    default_dropout_keep_prob: the keep probability of its training.

  Returns:
    network(inputs, num_classes, is_training, dropout_keep_prob,
    total_training_steps) -> (logits, end_points), with the attributes
    `default_image_size`, `min_image_size` and, when it drops paths,
    `total_training_steps`: the length of its drop-path schedule unless
    told another (train_image_classifier.py passes the run's
    --max_number_of_steps; training/schedule.py).
  """

  def network(inputs, num_classes=default_num_classes, is_training=True,
              dropout_keep_prob=default_dropout_keep_prob,
              total_training_steps=None):
    return build(inputs, config, num_classes, is_training, dropout_keep_prob,
                 total_training_steps)

  network.__name__ = network.__qualname__ = name
  network.__doc__ = ('Builds %s on `inputs` [batch, %d, %d, 3]: `%s` with '
                     'its published configuration; see there for the '
                     'arguments.' % (name, default_image_size,
                                     default_image_size, build.__name__))
  network.default_image_size = default_image_size
  network.min_image_size = min_image_size
  if config.drop_path_keep_prob < 1:
    network.total_training_steps = config.total_training_steps
  return network


def published_arg_scope(name, weight_decay, batch_norm_decay,
                        batch_norm_epsilon):
  """The arg-scope function of a published network: `training_arg_scope`
  with the values of its published training as defaults.

  Args:
    name: the network's name, e.g. 'nasnet_large'.
    weight_decay, batch_norm_decay, batch_norm_epsilon: the defaults.

  Returns:
    <name>_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon).
  """

  def arg_scope(weight_decay=weight_decay, batch_norm_decay=batch_norm_decay,
                batch_norm_epsilon=batch_norm_epsilon):
    return training_arg_scope(weight_decay, batch_norm_decay,
                              batch_norm_epsilon)

  arg_scope.__name__ = arg_scope.__qualname__ = name + '_arg_scope'
  arg_scope.__doc__ = (
      'Layer defaults of `%s` (see nasnet_common.training_arg_scope).\n\n'
      '  Args:\n'
      '    weight_decay: L2 regularization coefficient of the weights.\n'
      '    batch_norm_decay: decay of the batch-norm moving averages.\n'
      '    batch_norm_epsilon: added to the variance before normalizing.\n\n'
      '  Returns:\n'
      '    An arg_scope to build `%s` in.\n' % (name, name))
  return arg_scope
