"""What Inception v4 and Inception-ResNet v2 share: blocks as tables, heads.

Both networks of "Inception-v4, Inception-ResNet and the Impact of Residual
Connections on Learning", Szegedy et al., 2016
(https://arxiv.org/abs/1602.07261), are made of the same parts:

* layers named after their kernel, as Slim names them: `Conv2d_0b_1x7` is
  a convolution 1 pixel high and 7 wide, `MaxPool_1a_3x3` a 3x3 max pool.
  The tables below give a layer's name and the kernel is read from it;
* Inception blocks: branches `Branch_0`, `Branch_1`, ... built side by side
  on the block's input and concatenated along the channels (`Mixed`), a
  branch sometimes ending in parallel layers concatenated too (`Split`);
* an auxiliary classifier `AuxLogits` on a 17x17 grid: a 5x5 average pool
  of stride 3, a 1x1 convolution to 128 channels, a convolution to 768
  channels as large as what is left of the grid, and a fully connected
  layer;
* a classifier `Logits`: an average pool over the whole grid, dropout and a
  fully connected layer.

Layers are stride 1 and SAME unless the table says otherwise; batch norm
and activations come from the network's arg scope (`inception_arg_scope`
for Inception v4).
"""

import collections

from tf2_compat.slim_compat import slim, tf


def kernel_size(scope):
  """'Conv2d_0b_1x7' -> [1, 7]: the kernel a Slim layer name ends in."""
  height, width = scope.rsplit('_', 1)[1].split('x')
  return [int(height), int(width)]


class Conv(collections.namedtuple('Conv', ['scope', 'depth', 'stride',
                                           'padding'],
                                  defaults=(1, 'SAME'))):
  """A convolution to `depth` channels, its kernel read from `scope`."""
  __slots__ = ()

  def build(self, net):
    return slim.conv2d(net, self.depth, kernel_size(self.scope),
                       stride=self.stride, padding=self.padding,
                       scope=self.scope)


class _Pool(collections.namedtuple('Pool', ['scope', 'stride', 'padding'],
                                   defaults=(1, 'SAME'))):
  """A pooling layer, its kernel read from `scope`; see the subclasses."""
  __slots__ = ()
  pool_fn = None

  def build(self, net):
    return self.pool_fn(net, kernel_size(self.scope), stride=self.stride,
                        padding=self.padding, scope=self.scope)


class MaxPool(_Pool):
  """A max pool, its kernel read from `scope`."""
  __slots__ = ()
  pool_fn = staticmethod(slim.max_pool2d)


class AvgPool(_Pool):
  """An average pool, its kernel read from `scope`."""
  __slots__ = ()
  pool_fn = staticmethod(slim.avg_pool2d)


class Split(collections.namedtuple('Split', ['layers'])):
  """Layers side by side on one input, their outputs concatenated."""
  __slots__ = ()

  def build(self, net):
    return tf.concat([layer.build(net) for layer in self.layers], 3)


# Both networks start so (the paper's Figure 3): 299x299x3 -> 147x147x64.
FIRST_CONVS = (
    Conv('Conv2d_1a_3x3', 32, 2, 'VALID'),
    Conv('Conv2d_2a_3x3', 32, 1, 'VALID'),
    Conv('Conv2d_2b_3x3', 64),
)


def concat_branches(net, branches):
  """Builds each branch (a sequence of layers) on `net` in its scope
  `Branch_i` and concatenates their outputs along the channels."""
  outputs = []
  for i, branch in enumerate(branches):
    with tf.variable_scope('Branch_%d' % i):
      output = net
      for layer in branch:
        output = layer.build(output)
      outputs.append(output)
  return tf.concat(outputs, 3)


class Mixed(collections.namedtuple('Mixed', ['scope', 'branches'])):
  """An Inception block: branches on one input, concatenated."""
  __slots__ = ()

  def build(self, net):
    with tf.variable_scope(self.scope):
      return concat_branches(net, self.branches)


def stack(net, layers, end_points):
  """Builds `layers` one after the other, each output an end point named
  after the layer's scope.

  Args:
    net: the input tensor.
    layers: `Conv`, `MaxPool`, `AvgPool` or `Mixed` entries.
    end_points: dict the outputs are added to.

  Returns:
    The output of the last layer.
  """
  for layer in layers:
    net = end_points[layer.scope] = layer.build(net)
  return net


class HeadNames(collections.namedtuple(
    'HeadNames', ['aux_pool', 'aux_conv', 'aux_logits', 'pool', 'dropout'])):
  """The names of the layers of both classifiers that differ between the
  published checkpoints: the auxiliary classifier's 5x5 pool, its
  convolution to 768 channels and its fully connected layer; the
  classifier's average pool and dropout."""
  __slots__ = ()


def _aux_logits(net, num_classes, names):
  """The auxiliary classifier on a 17x17 grid, in scope `AuxLogits`; its
  input's side must be at least 5."""
  with tf.variable_scope('AuxLogits'):
    net = slim.avg_pool2d(net, [5, 5], stride=3, padding='VALID',
                          scope=names.aux_pool)
    net = slim.conv2d(net, 128, [1, 1], scope='Conv2d_1b_1x1')
    # 5x5 at the default image size: the convolution covers the whole grid.
    net = slim.conv2d(net, 768, net.get_shape().as_list()[1:3],
                      padding='VALID', scope=names.aux_conv)
    net = slim.flatten(net)
    return slim.fully_connected(net, num_classes, activation_fn=None,
                                scope=names.aux_logits)


def _classifier(net, num_classes, dropout_keep_prob, end_points, names):
  """Average pool over the whole grid, dropout and logits, in `Logits`."""
  with tf.variable_scope('Logits'):
    grid = net.get_shape()[1:3]
    if grid.is_fully_defined():
      net = slim.avg_pool2d(net, grid.as_list(), padding='VALID',
                            scope=names.pool)
    else:
      net = tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')
    end_points['global_pool'] = net
    net = slim.flatten(net, scope='PreLogitsFlatten')
    if not num_classes:
      return net
    net = end_points['PreLogitsFlatten'] = slim.dropout(
        net, dropout_keep_prob, scope=names.dropout)
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes, activation_fn=None, scope='Logits')
    end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
  return logits


def heads(net, aux_input, num_classes, create_aux_logits, dropout_keep_prob,
          end_points, names):
  """Both classifiers: the auxiliary one on `aux_input`, if asked for and
  there are classes, and the one on `net`.

  Args:
    net: the last feature map [batch, height, width, depth].
    aux_input: the last 17x17 block's output (at least 5x5).
    num_classes: number of classes; 0 or None builds neither classifier
      and returns the pooled features.
    create_aux_logits: whether to build the auxiliary classifier.
    dropout_keep_prob: probability that a feature is kept in training.
    end_points: dict 'global_pool' (the pooled map [batch, 1, 1, depth])
      and, with classes, 'AuxLogits' (if created), 'PreLogitsFlatten' (the
      features after dropout), 'Logits' and 'Predictions' are added to.
    names: the network's `HeadNames`.

  Returns:
    The logits [batch, num_classes], or the pooled features [batch, depth]
    (before dropout) when num_classes is 0 or None.
  """
  if create_aux_logits and num_classes:
    end_points['AuxLogits'] = _aux_logits(aux_input, num_classes, names)
  return _classifier(net, num_classes, dropout_keep_prob, end_points, names)


def batch_norm_params(decay, epsilon, updates_collections, scale):
  """The batch norm of both networks' convolutions: fused where the input
  allows, gamma only if `scale` (the published checkpoints have none)."""
  return {'decay': decay, 'epsilon': epsilon,
          'updates_collections': updates_collections, 'fused': None,
          'scale': scale}


def inception_arg_scope(
    weight_decay=0.00004,
    use_batch_norm=True,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    activation_fn=tf.nn.relu,
    batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS,
    batch_norm_scale=False):
  """Layer defaults of Inception v4, upstream's `inception_arg_scope`.

  Every convolution is followed by batch norm and `activation_fn`, its
  weights drawn by the variance-scaling (He) initializer; the weights of
  the convolutions and of the fully connected layers, not their biases,
  are decayed.

  Args:
    weight_decay: L2 regularization coefficient of the weights.
    use_batch_norm: whether batch norm follows each convolution; without
      it, the convolutions have biases.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.
    activation_fn: activation of the convolutions.
    batch_norm_updates_collections: collection of the moving-average
      updates.
    batch_norm_scale: whether batch norm has a trained gamma.

  Returns:
    An arg_scope to build the network in.
  """
  if use_batch_norm:
    normalizer_fn = slim.batch_norm
    normalizer_params = batch_norm_params(
        batch_norm_decay, batch_norm_epsilon, batch_norm_updates_collections,
        batch_norm_scale)
  else:
    normalizer_fn, normalizer_params = None, {}
  with slim.arg_scope([slim.conv2d, slim.fully_connected],
                      weights_regularizer=slim.l2_regularizer(weight_decay)):
    with slim.arg_scope(
        [slim.conv2d],
        weights_initializer=slim.variance_scaling_initializer(),
        activation_fn=activation_fn, normalizer_fn=normalizer_fn,
        normalizer_params=normalizer_params) as scope:
      return scope
