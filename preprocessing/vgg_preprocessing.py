"""VGG / ResNet preprocessing.

Training: resize so the smaller side is a random length in [256, 512]
(aspect ratio kept), random crop to the output size, random left-right
flip, subtract the ImageNet RGB means. Evaluation: resize the smaller side
to 256, central crop to the output size, subtract the means. Values stay
in the 0..255 scale minus the means.
"""

from tf2_compat.slim_compat import tf
from preprocessing import image_ops

RGB_MEANS = (123.68, 116.78, 103.94)
RESIZE_SIDE_MIN = 256
RESIZE_SIDE_MAX = 512


def aspect_preserving_resize(image, smallest_side):
  """Resizes so the smaller side is smallest_side (bilinear, float32)."""
  shape = tf.shape(image)
  height = tf.cast(shape[0], tf.float32)
  width = tf.cast(shape[1], tf.float32)
  scale = tf.cast(smallest_side, tf.float32) / tf.minimum(height, width)
  new_height = tf.cast(tf.round(height * scale), tf.int32)
  new_width = tf.cast(tf.round(width * scale), tf.int32)
  resized = tf.compat.v2.image.resize(image_ops.to_float(image),
                                      tf.stack([new_height, new_width]))
  resized.set_shape([None, None, image_ops.num_channels(image)])
  return resized


def central_crop(image, crop_height, crop_width):
  shape = tf.shape(image)
  offset_y = (shape[0] - crop_height) // 2
  offset_x = (shape[1] - crop_width) // 2
  return image_ops.crop_to_window(
      image, tf.stack([offset_y, offset_x, crop_height, crop_width]))


def subtract_means(image, means=RGB_MEANS):
  return image - tf.constant(means, dtype=image.dtype)


def preprocess_for_train(image, output_height, output_width,
                         resize_side_min=RESIZE_SIDE_MIN,
                         resize_side_max=RESIZE_SIDE_MAX,
                         use_grayscale=False):
  image = image_ops.ensure_rgb(image)
  resize_side = tf.random.uniform([], minval=resize_side_min,
                                  maxval=resize_side_max + 1, dtype=tf.int32)
  image = aspect_preserving_resize(image, resize_side)
  image = tf.image.random_crop(image, [output_height, output_width, 3])
  image = subtract_means(image_ops.random_flip(image))
  if use_grayscale:
    # A weighted sum of channels: graying after subtracting the means
    # equals subtracting the gray mean.
    image = image_ops.to_grayscale(image)
  return image


def preprocess_for_eval(image, output_height, output_width,
                        resize_side=RESIZE_SIDE_MIN, use_grayscale=False):
  image = image_ops.ensure_rgb(image)
  image = aspect_preserving_resize(image, resize_side)
  image = central_crop(image, output_height, output_width)
  image.set_shape([output_height, output_width, 3])
  image = subtract_means(image)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  return image


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, **kwargs):
  """uint8 [h, w, 1 or 3] -> float32 [output_height, output_width, 3 or 1].

  Keyword args: resize_side_min / resize_side_max (training) or
  resize_side (evaluation).
  """
  if is_training:
    return preprocess_for_train(image, output_height, output_width,
                                use_grayscale=use_grayscale, **kwargs)
  return preprocess_for_eval(image, output_height, output_width,
                             use_grayscale=use_grayscale, **kwargs)
