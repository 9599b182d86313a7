"""Inception preprocessing (also used by MobileNet, NASNet, ...).

Training: a random crop covering part of the image (or of its bounding
boxes) with a random aspect ratio (`tf.image.sample_distorted_bounding_box`),
resize to the output size, random left-right flip, random color
distortion, scale to [-1, 1].
Evaluation: central crop of 87.5% of the image, resize, scale to [-1, 1].

Both start with a crop, so both are `CroppingPreprocessor`s; in training,
where crops average about half the image, the input pipeline decodes only
the crop window of JPEGs. In `fast_mode` (the
default) the resize always uses bilinear interpolation and the color
distortion only brightness and saturation; otherwise each image draws one
of 4 resize methods and one of 4 orderings of brightness, saturation, hue
and contrast.
"""

from tf2_compat.slim_compat import tf
from preprocessing import cropping
from preprocessing import image_ops

CENTRAL_FRACTION = 0.875
_RESIZE_METHODS = ('bilinear', 'nearest', 'bicubic', 'area')


def apply_with_random_selector(image, func, num_cases):
  """Returns func(image, case) for one case in [0, num_cases) drawn at random.

  Only the drawn branch runs.
  """
  if num_cases == 1:
    return func(image, 0)
  case = tf.random.uniform([], maxval=num_cases, dtype=tf.int32)
  return tf.switch_case(case, [lambda c=c: func(image, c)
                               for c in range(num_cases)])


def resize_with_random_method(image, output_height, output_width,
                              num_methods):
  """Resizes with one of the first num_methods of bilinear, nearest, bicubic
  and area, drawn uniformly for each image (bilinear when num_methods is 1).
  """
  return apply_with_random_selector(
      image,
      lambda x, method: tf.compat.v2.image.resize(
          x, [output_height, output_width], method=_RESIZE_METHODS[method]),
      num_methods)


def distort_color(image, color_ordering=0, fast_mode=True):
  """Randomly distorts the colors of a float [h, w, 3] image in [0, 1].

  Args:
    image: float32 RGB values in [0, 1].
    color_ordering: 0..3 in full mode, 0..1 in fast mode; which order of
      operations to apply (they do not commute).
    fast_mode: only brightness and saturation.

  Returns:
    The distorted image, clipped to [0, 1].
  """
  brightness = lambda x: tf.image.random_brightness(x, max_delta=32. / 255.)
  saturation = lambda x: tf.image.random_saturation(x, lower=0.5, upper=1.5)
  hue = lambda x: tf.image.random_hue(x, max_delta=0.2)
  contrast = lambda x: tf.image.random_contrast(x, lower=0.5, upper=1.5)
  if fast_mode:
    orderings = [(brightness, saturation), (saturation, brightness)]
  else:
    orderings = [(brightness, saturation, hue, contrast),
                 (saturation, brightness, contrast, hue),
                 (contrast, hue, brightness, saturation),
                 (hue, saturation, contrast, brightness)]
  if not 0 <= color_ordering < len(orderings):
    raise ValueError('color_ordering must be in [0, %d), got %d'
                     % (len(orderings), color_ordering))
  for operation in orderings[color_ordering]:
    image = operation(image)
  return tf.clip_by_value(image, 0.0, 1.0)


def distorted_crop_window(image_shape, bbox=None, min_object_covered=0.1,
                          aspect_ratio_range=(0.75, 1.33),
                          area_range=(0.05, 1.0), max_attempts=100):
  """Samples the random training crop as [offset_y, offset_x, height, width].

  Args:
    image_shape: int32 [height, width, channels] of the full image.
    bbox: float32 [1, num_boxes, 4] boxes (ymin, xmin, ymax, xmax) in
      [0, 1] the crop should overlap; None means the whole image.
    min_object_covered: the crop holds at least this share of some box.
    aspect_ratio_range: allowed width / height of the crop.
    area_range: allowed share of the image area.
    max_attempts: after this many failures the whole image is used.
  """
  if bbox is None:
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
  begin, size, _ = tf.compat.v2.image.sample_distorted_bounding_box(
      image_shape, bounding_boxes=bbox,
      min_object_covered=min_object_covered,
      aspect_ratio_range=aspect_ratio_range, area_range=area_range,
      max_attempts=max_attempts, use_image_if_no_bounding_boxes=True)
  return tf.stack([begin[0], begin[1], size[0], size[1]])


def preprocess_cropped_for_train(cropped_image, output_height, output_width,
                                 fast_mode=True, use_grayscale=False):
  """Resize, flip, color distortion and [-1, 1] scaling of a cropped image."""
  image = tf.image.convert_image_dtype(image_ops.ensure_rgb(cropped_image),
                                       tf.float32)
  image = resize_with_random_method(
      image, output_height, output_width,
      1 if fast_mode else len(_RESIZE_METHODS))
  image.set_shape([output_height, output_width, 3])
  image = image_ops.random_flip(image)
  image = apply_with_random_selector(
      image, lambda x, ordering: distort_color(x, ordering, fast_mode),
      2 if fast_mode else 4)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  return (image - 0.5) * 2.0


def preprocess_cropped_for_eval(cropped_image, output_height, output_width,
                                use_grayscale=False):
  """Resize and [-1, 1] scaling of a centrally cropped image."""
  image = tf.image.convert_image_dtype(image_ops.ensure_rgb(cropped_image),
                                       tf.float32)
  image = tf.compat.v2.image.resize(image, [output_height, output_width])
  image = tf.clip_by_value(image, 0.0, 1.0)
  if use_grayscale:
    image = image_ops.to_grayscale(image)
  return (image - 0.5) * 2.0


def cropping_preprocessor(is_training, use_grayscale=False, fast_mode=True,
                          central_fraction=CENTRAL_FRACTION):
  """The inception preprocessing as a cropping.CroppingPreprocessor.

  The returned function takes `bbox=` (training) as a keyword argument.
  """
  if is_training:

    def train_window(image_shape, unused_height, unused_width, bbox):
      return distorted_crop_window(image_shape, bbox)

    def train_rest(cropped_image, output_height, output_width):
      return preprocess_cropped_for_train(
          cropped_image, output_height, output_width, fast_mode=fast_mode,
          use_grayscale=use_grayscale)

    return cropping.CroppingPreprocessor(train_window, train_rest)

  def eval_window(image_shape, unused_height, unused_width, unused_bbox):
    return cropping.central_crop_window(image_shape, central_fraction)

  def eval_rest(cropped_image, output_height, output_width):
    return preprocess_cropped_for_eval(cropped_image, output_height,
                                       output_width,
                                       use_grayscale=use_grayscale)

  # The central crop keeps 77% of the pixels: decoding the whole JPEG is
  # cheaper than decoding the window (see cropping.py).
  return cropping.CroppingPreprocessor(eval_window, eval_rest,
                                       fold_into_decode=False)


def preprocess_image(image, output_height, output_width, is_training=False,
                     bbox=None, fast_mode=True, use_grayscale=False):
  """uint8 (or float [0, 1]) [h, w, c] -> float32 in [-1, 1].

  Returns [output_height, output_width, 3], or 1 channel with use_grayscale.
  """
  preprocessor = cropping_preprocessor(is_training, use_grayscale, fast_mode)
  return preprocessor(image, output_height, output_width, bbox=bbox)
