"""I3D, with the variable names of upstream's Slim definition.

"Quo Vadis, Action Recognition? A New Model and the Kinetics Dataset",
Carreira and Zisserman, 2017 (https://arxiv.org/abs/1705.07750).

Inception v1 inflated to clips: every kxk kernel becomes kxkxk (the first
one 7x7x7), from `Conv2d_2c_3x3` on; see nets/video_common.py. Variables
keep Inception v1's names with a time axis in front: `InceptionV1/
Conv2d_1a_7x7/weights` [7, 7, 7, 3, 64], ..., `InceptionV1/Logits/
Conv2d_0c_1x1/weights` [1, 1, 1, 1024, num_classes].

Usage:
  with slim.arg_scope(i3d_arg_scope()):
    logits, end_points = i3d(clips, num_classes=400, is_training=False)
where clips are [batch, frames, 224, 224, 3] (64 frames in the paper).
"""

from nets import video_common
from tf2_compat.slim_compat import slim


def i3d_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999,
                  batch_norm_epsilon=0.001, use_renorm=False,
                  separable_conv3d=False):
  """Layer defaults for I3D: batch norm, ReLU, L2 decay.

  Args:
    weight_decay: L2 regularization coefficient of the weights.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.
    use_renorm: whether batch norm uses batch renormalization.
    separable_conv3d: whether to split the 3x3x3 convolutions into 1x3x3
      and 3x1x1 ones (S3D without gating).

  Returns:
    An arg_scope to build `i3d` in.
  """
  return video_common.video_arg_scope(
      weight_decay, batch_norm_decay, batch_norm_epsilon,
      use_renorm=use_renorm, separable_conv3d=separable_conv3d)


def i3d_base(inputs, final_endpoint='Mixed_5c', scope='InceptionV1'):
  """I3D from the clips to `final_endpoint`.

  Args:
    inputs: clips [batch, frames, height, width, channels].
    final_endpoint: the last layer built, one of video_common.END_POINTS.
    scope: the variable scope.

  Returns:
    (net, end_points): the output of `final_endpoint` and a dict with the
    output of every layer up to it.
  """
  return video_common.inception_3d_base(
      inputs, first_temporal_kernel_size=7,
      temporal_conv_startat='Conv2d_2c_3x3', gating_startat=None,
      final_endpoint=final_endpoint, scope=scope)


def i3d(inputs,
        num_classes=1000,
        dropout_keep_prob=0.8,
        is_training=True,
        prediction_fn=slim.softmax,
        spatial_squeeze=True,
        reuse=None,
        scope='InceptionV1'):
  """I3D: inflated Inception v1 on clips.

  Args:
    inputs: clips [batch, frames, height, width, 3].
    num_classes: number of classes; 0 or None builds no classifier and
      returns the features [batch, 1024] (pooled as the logits would be,
      before dropout).
    dropout_keep_prob: probability that a feature is kept in training.
    is_training: whether batch norm and dropout run in training mode.
    prediction_fn: turns logits into predictions.
    spatial_squeeze: whether to return [batch, num_classes] rather than
      [batch, 1, 1, num_classes].
    reuse: whether to reuse the variables of `scope`.
    scope: the variable scope.

  Returns:
    (logits, end_points): logits [batch, num_classes] averaged over frames;
    end_points has every layer of video_common.END_POINTS and, with
    classes, 'Logits' and 'Predictions'.
  """
  return video_common.classify_clips(
      inputs, i3d_base, num_classes, dropout_keep_prob, is_training,
      prediction_fn, spatial_squeeze, reuse, scope)


i3d.default_image_size = 224
# SAME padding throughout, and the last pooling shrinks to the features.
i3d.min_image_size = 1
# The clip length of the paper's training and of upstream's tests.
i3d.default_num_frames = 64
