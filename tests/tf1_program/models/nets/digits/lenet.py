"""LeNet for 8x8 digits, written for TF 1.x as the test program's own model.

Same-padded convolutions keep the small images: 8x8 -> pool 4x4 -> pool
2x2 -> 256 features -> 128 hidden units -> 10 logits.
"""

import tensorflow as tf

from nets import custom_layers

slim = tf.contrib.slim


def lenet(images, num_classes=10, is_training=True, dropout_keep_prob=0.8,
          scope='DigitsLeNet'):
  end_points = {}
  with tf.variable_scope(scope, 'DigitsLeNet', [images]):
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        activation_fn=tf.nn.relu,
                        weights_initializer=tf.glorot_uniform_initializer()):
      with slim.arg_scope([custom_layers.keep_prob_dropout],
                          is_training=is_training):
        net = slim.conv2d(images, 32, [3, 3], scope='conv1')
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
        net = slim.conv2d(net, 64, [3, 3], scope='conv2')
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
        net = slim.flatten(net, scope='flatten')
        net = slim.fully_connected(net, 128, scope='fc3')
        net = custom_layers.keep_prob_dropout(net, dropout_keep_prob,
                                              scope='dropout3')
        logits = slim.fully_connected(net, num_classes, activation_fn=None,
                                      scope='fc4')
  end_points['Logits'] = logits
  end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
  return logits, end_points


lenet.default_image_size = 8
