"""CifarNet, the CIFAR-10 network of the Slim model zoo.

The network of the classic TensorFlow CIFAR-10 tutorial: two 5x5
convolutions with max pooling and local response normalization, two fully
connected layers (384 and 192 units, dropout after the first) and a linear
classifier. Variable names follow the Slim `cifarnet` network
(`CifarNet/conv1/weights`, ..., `CifarNet/logits/biases`).

Usage:
  with slim.arg_scope(cifarnet_arg_scope()):
    logits, end_points = cifarnet(images, num_classes=10, is_training=False)
"""

from tf2_compat.slim_compat import slim, tf


def _truncated_normal(stddev):
  return tf.truncated_normal_initializer(stddev=stddev)


def _local_response_norm(net, name):
  # The normalization of the original CIFAR-10 tutorial (its `norm1`/`norm2`).
  return tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet(images,
             num_classes=10,
             is_training=False,
             dropout_keep_prob=0.5,
             prediction_fn=slim.softmax,
             scope='CifarNet'):
  """Builds CifarNet on `images`.

  Args:
    images: float tensor [batch, 32, 32, 3].
    num_classes: number of classes. 0 or None returns the 192 features of
      `fc4` instead of logits.
    is_training: whether dropout is active.
    dropout_keep_prob: probability that a unit of `fc3` is kept in training.
    prediction_fn: turns logits into end_points['Predictions'].
    scope: variable scope of the network.

  Returns:
    logits: [batch, num_classes] (or [batch, 192] features when num_classes
      is 0 or None).
    end_points: dict with 'conv1', 'pool1', 'conv2', 'pool2', 'Flatten',
      'fc3', 'fc4' and, with classes, 'Logits', 'Predictions'.
  """
  end_points = {}
  with tf.variable_scope(scope, 'CifarNet', [images]):
    net = end_points['conv1'] = slim.conv2d(images, 64, [5, 5], scope='conv1')
    net = end_points['pool1'] = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
    net = _local_response_norm(net, name='norm1')
    net = end_points['conv2'] = slim.conv2d(net, 64, [5, 5], scope='conv2')
    net = _local_response_norm(net, name='norm2')
    net = end_points['pool2'] = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
    net = end_points['Flatten'] = slim.flatten(net, scope='Flatten')
    net = end_points['fc3'] = slim.fully_connected(net, 384, scope='fc3')
    net = slim.dropout(
        net, dropout_keep_prob, is_training=is_training, scope='dropout3')
    net = end_points['fc4'] = slim.fully_connected(net, 192, scope='fc4')
    if not num_classes:
      return net, end_points
    logits = end_points['Logits'] = slim.fully_connected(
        net,
        num_classes,
        activation_fn=None,
        weights_initializer=_truncated_normal(1 / 192.0),
        weights_regularizer=None,
        biases_initializer=tf.zeros_initializer(),
        scope='logits')
  end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


cifarnet.default_image_size = 32
# Two 2x2 max poolings, VALID: 4 -> 2 -> 1.
cifarnet.min_image_size = 4


def cifarnet_arg_scope(weight_decay=0.004):
  """Layer defaults for CifarNet, as in the CIFAR-10 tutorial.

  Args:
    weight_decay: L2 regularization coefficient of the fully connected
      weights (the tutorial does not decay the convolutions).

  Returns:
    An arg_scope to build `cifarnet` in.
  """
  with slim.arg_scope(
      [slim.conv2d],
      weights_initializer=_truncated_normal(5e-2),
      activation_fn=tf.nn.relu):
    with slim.arg_scope(
        [slim.fully_connected],
        weights_initializer=_truncated_normal(0.04),
        weights_regularizer=slim.l2_regularizer(weight_decay),
        biases_initializer=tf.constant_initializer(0.1),
        activation_fn=tf.nn.relu) as scope:
      return scope
