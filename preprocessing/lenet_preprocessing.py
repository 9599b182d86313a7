"""LeNet preprocessing: resize to the network's size, then (x - 128) / 128.

The same in training and evaluation (no augmentation). Channels are kept,
so 1-channel mnist/digits images feed a 1-channel LeNet; 8x8 digits are
resized (bilinear) to the 28x28 LeNet expects.
"""

from tf2_compat.slim_compat import tf
from preprocessing import image_ops


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False):
  """Maps uint8 [h, w, c] to float32 [output_height, output_width, c].

  Pixel value 0 becomes -1.0 and 255 becomes 127/128 = 0.9921875.
  """
  del is_training  # Same in training and evaluation.
  image = image_ops.to_float(image)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  static_size = tuple(image.shape[:2]) if image.shape.rank == 3 else None
  if static_size != (output_height, output_width):
    image = image_ops.resize(image, output_height, output_width)
  return (image - 128.0) / 128.0
