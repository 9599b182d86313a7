"""Layers of the TF 1.x test program that slim does not have."""

import tensorflow as tf
from tensorflow.contrib.framework.python.ops import add_arg_scope


@add_arg_scope
def keep_prob_dropout(inputs, keep_prob=0.5, is_training=True, scope=None):
  """Dropout written against TF 1.x's tf.nn.dropout(x, keep_prob)."""
  with tf.name_scope(scope, 'KeepProbDropout', [inputs]):
    if not is_training:
      return tf.identity(inputs)
    return tf.nn.dropout(inputs, keep_prob=keep_prob)
