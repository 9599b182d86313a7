"""CifarNet preprocessing.

Training: pad by 4 pixels, random crop back to the output size, random
left-right flip, random brightness and contrast, per-image standardization.
Evaluation: central crop (or zero pad) to the output size, per-image
standardization.
"""

from tf2_compat.slim_compat import tf
from preprocessing import image_ops

PADDING = 4


def preprocess_for_train(image, output_height, output_width,
                         padding=PADDING, use_grayscale=False):
  image = image_ops.ensure_rgb(image_ops.to_float(image))
  # Padding the output size (not the input) lets any input size through.
  image = tf.image.resize_with_crop_or_pad(
      image, output_height + 2 * padding, output_width + 2 * padding)
  image = tf.image.random_crop(image, [output_height, output_width, 3])
  image = image_ops.random_flip(image)
  image = tf.image.random_brightness(image, max_delta=63)
  image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  return tf.image.per_image_standardization(image)


def preprocess_for_eval(image, output_height, output_width,
                        use_grayscale=False):
  image = image_ops.ensure_rgb(image_ops.to_float(image))
  image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  return tf.image.per_image_standardization(image)


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False, **kwargs):
  """uint8 [h, w, 1 or 3] -> float32 [output_height, output_width, 3 or 1]."""
  if is_training:
    return preprocess_for_train(image, output_height, output_width,
                                use_grayscale=use_grayscale, **kwargs)
  return preprocess_for_eval(image, output_height, output_width,
                             use_grayscale=use_grayscale, **kwargs)
