"""S3D-G, with the variable names of upstream's Slim definition.

"Rethinking Spatiotemporal Feature Learning For Video Understanding",
Xie et al., 2017 (https://arxiv.org/abs/1712.04851).

Inception v1 on clips as I3D (nets/i3d.py), but the first convolution spans
3 frames, each later 3x3x3 convolution is a 1x3x3 one followed by a 3x1x1
one (`<layer>/temporal`, with biases), and from `Conv2d_2c_3x3` on every
branch is self-gated (`<layer>/self_gating/transformer_W`); see
nets/video_common.py. Variables keep Inception v1's names: `InceptionV1/
Conv2d_1a_7x7/weights` [3, 7, 7, 3, 64], `InceptionV1/Conv2d_2c_3x3/
temporal/weights` [3, 1, 1, 192, 192], ...

Usage:
  with slim.arg_scope(s3dg_arg_scope()):
    logits, end_points = s3dg(clips, num_classes=400, is_training=False)
where clips are [batch, frames, 224, 224, 3] (64 frames in the paper).
"""

import functools

from nets import video_common
from tf2_compat.slim_compat import slim


def s3dg_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999,
                   batch_norm_epsilon=0.001):
  """Layer defaults for S3D-G: batch norm, ReLU, L2 decay, separable 3-D.

  Args:
    weight_decay: L2 regularization coefficient of the weights.
    batch_norm_decay: decay of the batch-norm moving averages.
    batch_norm_epsilon: added to the variance before normalizing.

  Returns:
    An arg_scope to build `s3dg` in.
  """
  return video_common.video_arg_scope(
      weight_decay, batch_norm_decay, batch_norm_epsilon,
      separable_conv3d=True)


def s3dg_base(inputs,
              first_temporal_kernel_size=3,
              temporal_conv_startat='Conv2d_2c_3x3',
              gating_startat='Conv2d_2c_3x3',
              final_endpoint='Mixed_5c',
              min_depth=16,
              depth_multiplier=1.0,
              scope='InceptionV1'):
  """S3D-G from the clips to `final_endpoint`.

  Args: as video_common.inception_3d_base's. A later
  `temporal_conv_startat` gives the paper's "bottom-heavy" variants
  (2-D convolutions first).

  Returns:
    (net, end_points): the output of `final_endpoint` and a dict with the
    output of every layer up to it.
  """
  return video_common.inception_3d_base(
      inputs, first_temporal_kernel_size, temporal_conv_startat,
      gating_startat, final_endpoint=final_endpoint, min_depth=min_depth,
      depth_multiplier=depth_multiplier, scope=scope)


def s3dg(inputs,
         num_classes=1000,
         first_temporal_kernel_size=3,
         temporal_conv_startat='Conv2d_2c_3x3',
         gating_startat='Conv2d_2c_3x3',
         final_endpoint='Mixed_5c',
         min_depth=16,
         depth_multiplier=1.0,
         dropout_keep_prob=0.8,
         is_training=True,
         prediction_fn=slim.softmax,
         spatial_squeeze=True,
         reuse=None,
         scope='InceptionV1'):
  """S3D-G: separable, gated, inflated Inception v1 on clips.

  Args:
    inputs: clips [batch, frames, height, width, 3].
    num_classes: number of classes; 0 or None builds no classifier and
      returns the features [batch, depth] (pooled as the logits would be,
      before dropout).
    first_temporal_kernel_size, temporal_conv_startat, gating_startat,
      final_endpoint, min_depth, depth_multiplier: as
      video_common.inception_3d_base's.
    dropout_keep_prob: probability that a feature is kept in training.
    is_training: whether batch norm and dropout run in training mode.
    prediction_fn: turns logits into predictions.
    spatial_squeeze: whether to return [batch, num_classes] rather than
      [batch, 1, 1, num_classes].
    reuse: whether to reuse the variables of `scope`.
    scope: the variable scope.

  Returns:
    (logits, end_points): logits [batch, num_classes] averaged over frames;
    end_points has every layer up to `final_endpoint` and, with classes,
    'Logits' and 'Predictions'.

  Raises:
    ValueError: as video_common.inception_3d_base.
  """
  build_base = functools.partial(
      s3dg_base, first_temporal_kernel_size=first_temporal_kernel_size,
      temporal_conv_startat=temporal_conv_startat,
      gating_startat=gating_startat, final_endpoint=final_endpoint,
      min_depth=min_depth, depth_multiplier=depth_multiplier)
  return video_common.classify_clips(
      inputs, build_base, num_classes, dropout_keep_prob, is_training,
      prediction_fn, spatial_squeeze, reuse, scope)


s3dg.default_image_size = 224
# SAME padding throughout, and the last pooling shrinks to the features.
s3dg.min_image_size = 1
# The clip length of the paper's training and of upstream's tests.
s3dg.default_num_frames = 64
