"""What MobileNet v1, v2 and v3 share: their layer defaults and their
classifier.

The networks train with the same arg scope (batch norm after every
convolution, ReLU6, truncated-normal weights, L2 decay) but for the decay
of the depthwise weights and the batch-norm decay, and all end in the
same classifier on globally pooled features: dropout, then a 1x1
convolution `Conv2d_1c_1x1`, inside their `Logits` scope. v2 and v3 also
pool and name their end points alike (`pooled_logits`).
"""

from tf2_compat.slim_compat import slim, tf


def training_arg_scope(weight_decay, stddev, regularize_depthwise,
                       batch_norm_decay, batch_norm_epsilon):
  """Layer defaults of the MobileNets: batch norm, ReLU6, L2 decay.

  Takes the arguments of `mobilenet_v1_arg_scope`, without their defaults:
  `mobilenet_v1_arg_scope` and `mobilenet_v2_arg_scope` keep the values of
  their published training.
  """
  batch_norm_params = {
      'center': True,
      'scale': True,
      'decay': batch_norm_decay,
      'epsilon': batch_norm_epsilon,
      'updates_collections': tf.GraphKeys.UPDATE_OPS,
  }
  regularizer = slim.l2_regularizer(weight_decay)
  depthwise_regularizer = regularizer if regularize_depthwise else None
  with slim.arg_scope(
      [slim.conv2d, slim.separable_conv2d],
      weights_initializer=tf.truncated_normal_initializer(stddev=stddev),
      activation_fn=tf.nn.relu6,
      normalizer_fn=slim.batch_norm):
    with slim.arg_scope([slim.batch_norm], **batch_norm_params):
      with slim.arg_scope([slim.conv2d], weights_regularizer=regularizer):
        with slim.arg_scope([slim.separable_conv2d],
                            weights_regularizer=depthwise_regularizer) as scope:
          return scope


def classifier(pooled, num_classes, dropout_keep_prob, spatial_squeeze,
               dropout_scope, **logits_kwargs):
  """The logits of pooled features, built in the network's `Logits` scope.

  Args:
    pooled: the pooled features [batch, 1, 1, depth].
    num_classes: number of classes; 0 or None builds nothing and returns
      the features.
    dropout_keep_prob: probability that a feature is kept in training.
    spatial_squeeze: whether to return [batch, depth] rather than
      [batch, 1, 1, depth].
    dropout_scope: the name of the dropout layer ('Dropout_1b' in v1,
      'Dropout' in v2).
    **logits_kwargs: further arguments of the `Conv2d_1c_1x1` convolution.

  Returns:
    The logits [batch, num_classes], or the features when num_classes is 0
    or None.
  """
  net = pooled
  if num_classes:
    net = slim.dropout(net, keep_prob=dropout_keep_prob, scope=dropout_scope)
    net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                      normalizer_fn=None, scope='Conv2d_1c_1x1',
                      **logits_kwargs)
  if spatial_squeeze:
    net = tf.squeeze(net, [1, 2], name='SpatialSqueeze')
  return net


def pooled_logits(net, end_points, num_classes, dropout_keep_prob,
                  spatial_squeeze, prediction_fn):
  """MobileNet v2's and v3's `Logits` scope: global pooling, classifier.

  Args:
    net: the last feature map [batch, height, width, depth].
    end_points: the network's end points; gets 'global_pool' and, with
      classes, 'Logits' and 'Predictions'.
    num_classes, dropout_keep_prob, spatial_squeeze: as for `classifier`.
    prediction_fn: turns logits into end_points['Predictions'].

  Returns:
    The logits [batch, num_classes], or the pooled features when
    num_classes is 0 or None.
  """
  with tf.variable_scope('Logits'):
    net = end_points['global_pool'] = tf.reduce_mean(
        net, [1, 2], keepdims=True, name='global_pool')
    logits = classifier(net, num_classes, dropout_keep_prob, spatial_squeeze,
                        dropout_scope='Dropout',
                        biases_initializer=tf.zeros_initializer())
  if num_classes:
    end_points['Logits'] = logits
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits
