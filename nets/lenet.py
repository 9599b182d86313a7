"""LeNet, the small MNIST convolutional network of the Slim model zoo.

Two 5x5 convolutions with 2x2 max pooling, one 1024-unit hidden layer with
dropout, and a linear classifier. Variable names follow the Slim `lenet`
network (`LeNet/conv1/weights`, ..., `LeNet/fc4/biases`).

Usage:
  with slim.arg_scope(lenet_arg_scope()):
    logits, end_points = lenet(images, num_classes=10, is_training=False)
"""

from tf2_compat.slim_compat import slim, tf


def lenet(images,
          num_classes=10,
          is_training=False,
          dropout_keep_prob=0.5,
          prediction_fn=slim.softmax,
          scope='LeNet'):
  """Builds LeNet on `images`.

  Args:
    images: float tensor [batch, 28, 28, channels] (MNIST has one channel).
    num_classes: number of classes. 0 or None returns the 1024 features of
      the hidden layer `fc3` instead of logits.
    is_training: whether dropout is active.
    dropout_keep_prob: probability that a hidden unit is kept in training.
    prediction_fn: turns logits into end_points['Predictions'].
    scope: variable scope of the network.

  Returns:
    logits: [batch, num_classes] (or [batch, 1024] features when
      num_classes is 0 or None).
    end_points: dict with 'conv1', 'pool1', 'conv2', 'pool2', 'Flatten',
      'fc3' and, with classes, 'dropout3', 'Logits', 'Predictions'.
  """
  end_points = {}
  with tf.variable_scope(scope, 'LeNet', [images]):
    net = end_points['conv1'] = slim.conv2d(images, 32, [5, 5], scope='conv1')
    net = end_points['pool1'] = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
    net = end_points['conv2'] = slim.conv2d(net, 64, [5, 5], scope='conv2')
    net = end_points['pool2'] = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
    net = end_points['Flatten'] = slim.flatten(net, scope='Flatten')
    net = end_points['fc3'] = slim.fully_connected(net, 1024, scope='fc3')
    if not num_classes:
      return net, end_points
    net = end_points['dropout3'] = slim.dropout(
        net, dropout_keep_prob, is_training=is_training, scope='dropout3')
    logits = end_points['Logits'] = slim.fully_connected(
        net, num_classes, activation_fn=None, scope='fc4')
  end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
  return logits, end_points


lenet.default_image_size = 28
# Two 2x2 max poolings, VALID: 4 -> 2 -> 1.
lenet.min_image_size = 4


def lenet_arg_scope(weight_decay=0.0):
  """Layer defaults for LeNet: ReLU, truncated-normal weights, L2 decay.

  Args:
    weight_decay: L2 regularization coefficient of the weights.

  Returns:
    An arg_scope to build `lenet` in.
  """
  with slim.arg_scope(
      [slim.conv2d, slim.fully_connected],
      weights_regularizer=slim.l2_regularizer(weight_decay),
      weights_initializer=tf.truncated_normal_initializer(stddev=0.1),
      activation_fn=tf.nn.relu) as scope:
    return scope
