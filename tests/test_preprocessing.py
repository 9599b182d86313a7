"""preprocessing_factory and the per-network preprocessing functions."""

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from preprocessing import cifarnet_preprocessing
from preprocessing import cropping
from preprocessing import image_ops
from preprocessing import inception_preprocessing
from preprocessing import lenet_preprocessing
from preprocessing import preprocessing_factory
from preprocessing import two_stage
from preprocessing import vgg_preprocessing

UPSTREAM_NAMES = {
    'cifarnet': cifarnet_preprocessing,
    'inception': inception_preprocessing,
    'inception_v1': inception_preprocessing,
    'inception_v2': inception_preprocessing,
    'inception_v3': inception_preprocessing,
    'inception_v4': inception_preprocessing,
    'inception_resnet_v2': inception_preprocessing,
    'lenet': lenet_preprocessing,
    'mobilenet_v1': inception_preprocessing,
    'mobilenet_v2': inception_preprocessing,
    'mobilenet_v2_140': inception_preprocessing,
    'nasnet_mobile': inception_preprocessing,
    'resnet_v1_50': vgg_preprocessing,
    'resnet_v1_152': vgg_preprocessing,
    'resnet_v2_101': vgg_preprocessing,
    'vgg': vgg_preprocessing,
    'vgg_a': vgg_preprocessing,
    'vgg_16': vgg_preprocessing,
    'vgg_19': vgg_preprocessing,
    'alexnet_v2': vgg_preprocessing,
    'overfeat': vgg_preprocessing,
    'mobilenet_v3_small': inception_preprocessing,
    'mobilenet_v3_large': inception_preprocessing,
    'mobilenet_v3_small_minimalistic': inception_preprocessing,
    'mobilenet_v3_large_minimalistic': inception_preprocessing,
    'mobilenet_edgetpu': inception_preprocessing,
    'mobilenet_edgetpu_075': inception_preprocessing,
    'nasnet_large': inception_preprocessing,
    'pnasnet_mobile': inception_preprocessing,
    'pnasnet_large': inception_preprocessing,
    # Upstream has no entry: its CIFAR-10 network takes CifarNet's.
    'nasnet_cifar': cifarnet_preprocessing,
}


def _run(tensors):
  with tf.Session() as session:
    return session.run(tensors)


def _image(height, width, channels=3, seed=0):
  pixels = np.random.RandomState(seed).randint(
      0, 256, (height, width, channels)).astype(np.uint8)
  return pixels, tf.constant(pixels)


@pytest.mark.parametrize('name', sorted(UPSTREAM_NAMES))
def test_upstream_name_maps_to_its_preprocessing(name):
  assert preprocessing_factory.preprocessing_fn_map[name] is (
      UPSTREAM_NAMES[name])


@pytest.mark.parametrize('name', ['i3d', 's3dg'])
def test_video_networks_have_no_preprocessing_as_upstream(name):
  # Upstream's factory maps no clip preprocessing to its video networks.
  assert name not in preprocessing_factory.preprocessing_fn_map


def test_unknown_name_lists_known_names():
  with pytest.raises(ValueError, match=r"'lenet5'.*alexnet_v2, cifarnet, "):
    preprocessing_factory.get_preprocessing('lenet5')


# (name, input [h, w, c], output side, expected output channels)
SHAPE_CASES = [
    ('lenet', (8, 8, 1), 28, 1),
    ('lenet', (28, 28, 1), 28, 1),
    ('cifarnet', (32, 32, 3), 32, 3),
    ('cifarnet', (28, 28, 1), 32, 3),
    ('inception_v3', (120, 90, 3), 75, 3),
    ('mobilenet_v1', (8, 8, 1), 32, 3),
    ('vgg_16', (60, 80, 3), 48, 3),
    ('resnet_v1_50', (28, 28, 1), 24, 3),
]


@pytest.mark.parametrize('is_training', [True, False])
@pytest.mark.parametrize('name, input_shape, side, channels', SHAPE_CASES)
def test_output_shape_and_dtype(graph, name, input_shape, side, channels,
                                is_training):
  del graph
  _, image = _image(*input_shape)
  fn = preprocessing_factory.get_preprocessing(name, is_training)
  output = fn(image, side, side)
  value = _run(output)
  assert value.shape == (side, side, channels)
  assert value.dtype == np.float32
  assert output.shape.as_list() == [side, side, channels]


@pytest.mark.parametrize('is_training', [True, False])
@pytest.mark.parametrize('name', ['lenet', 'cifarnet', 'inception', 'vgg'])
def test_use_grayscale_gives_one_channel(graph, name, is_training):
  del graph
  _, image = _image(40, 40)
  fn = preprocessing_factory.get_preprocessing(name, is_training,
                                               use_grayscale=True)
  assert _run(fn(image, 32, 32)).shape == (32, 32, 1)


def test_lenet_maps_0_to_minus_1_and_255_to_127_over_128(graph):
  del graph
  image = tf.constant([[[0], [255]], [[128], [64]]], tf.uint8)
  value = _run(preprocessing_factory.get_preprocessing('lenet')(image, 2, 2))
  np.testing.assert_array_equal(value[:, :, 0],
                                [[-1.0, 0.9921875], [0.0, -0.5]])


def test_lenet_resizes_8x8_digits_to_28x28(graph):
  del graph
  image = tf.fill([8, 8, 1], tf.constant(255, tf.uint8))
  value = _run(lenet_preprocessing.preprocess_image(image, 28, 28))
  assert value.shape == (28, 28, 1)
  np.testing.assert_allclose(value, 0.9921875, rtol=1e-6)


def test_cifarnet_eval_is_a_central_crop_then_standardization(graph):
  del graph
  pixels, image = _image(36, 36)
  value = _run(preprocessing_factory.get_preprocessing('cifarnet')(
      image, 32, 32))
  crop = pixels[2:34, 2:34].astype(np.float64)
  expected = (crop - crop.mean()) / max(crop.std(), 1 / np.sqrt(crop.size))
  np.testing.assert_allclose(value, expected, atol=1e-4)


def test_cifarnet_training_output_is_standardized(graph):
  del graph
  _, image = _image(32, 32)
  value = _run(preprocessing_factory.get_preprocessing('cifarnet', True)(
      image, 32, 32))
  assert abs(value.mean()) < 1e-4 and abs(value.std() - 1.0) < 1e-3


@pytest.mark.parametrize('is_training', [True, False])
def test_inception_scales_to_minus_1_1(graph, is_training):
  del graph
  black = tf.zeros([50, 60, 3], tf.uint8)
  white = tf.fill([50, 60, 3], tf.constant(255, tf.uint8))
  fn = inception_preprocessing.cropping_preprocessor(is_training)
  if is_training:
    # Color distortion moves flat images; the range is what is promised.
    values = _run([fn(_image(50, 60, seed=s)[1], 40, 40) for s in range(4)])
    for value in values:
      assert value.min() >= -1.0 and value.max() <= 1.0
  else:
    black_value, white_value = _run([fn(black, 40, 40), fn(white, 40, 40)])
    np.testing.assert_allclose(black_value, -1.0)
    np.testing.assert_allclose(white_value, 1.0)


def test_inception_random_resize_draws_each_of_the_four_methods(graph):
  del graph
  _, uint8_image = _image(50, 60)
  image = tf.cast(uint8_image, tf.float32) / 255.0
  resized = inception_preprocessing.resize_with_random_method(image, 30, 30,
                                                              4)
  candidates = {method: tf.compat.v2.image.resize(image, [30, 30],
                                                  method=method)
                for method in ('bilinear', 'nearest', 'bicubic', 'area')}
  with tf.Session() as session:
    expected = session.run(candidates)
    # 60 draws miss one of 4 methods with probability 4 * 0.75**60 < 1e-6.
    outputs = [session.run(resized) for _ in range(60)]
  drawn = [[method for method, value in expected.items()
            if np.array_equal(output, value)] for output in outputs]
  assert all(len(methods) == 1 for methods in drawn)  # The 4 images differ.
  assert {methods[0] for methods in drawn} == set(expected)


@pytest.mark.parametrize('fast_mode, num_methods', [(False, 4), (True, 1)])
def test_inception_training_resizes_with_4_methods_or_bilinear_only(
    graph, monkeypatch, fast_mode, num_methods):
  del graph
  requested = []
  resize = inception_preprocessing.resize_with_random_method

  def recording_resize(image, height, width, methods):
    requested.append(methods)
    return resize(image, height, width, methods)

  monkeypatch.setattr(inception_preprocessing, 'resize_with_random_method',
                      recording_resize)
  _, image = _image(50, 60)
  output = inception_preprocessing.preprocess_image(
      image, 30, 30, is_training=True, fast_mode=fast_mode)
  assert requested == [num_methods]
  value = _run(output)
  assert value.min() >= -1.0 and value.max() <= 1.0


def test_inception_eval_crops_the_central_87_5_percent(graph):
  del graph
  window = _run(cropping.central_crop_window(tf.constant([100, 80, 3]),
                                             0.875))
  # tf.image.central_crop's arithmetic: int((100 - 87.5) / 2) = 6.
  np.testing.assert_array_equal(window, [6, 5, 88, 70])


def test_cropping_preprocessor_preprocesses_the_central_crop(graph):
  del graph
  pixels, image = _image(64, 48)
  fn = preprocessing_factory.get_preprocessing('inception_v1')
  assert isinstance(fn, cropping.CroppingPreprocessor)
  # 87.5% of 64 x 48 is 56 x 42: int((64 - 56) / 2) = 4 rows and
  # int((48 - 42) / 2) = 3 columns off each side, as tf.image.central_crop.
  crop = pixels[4:60, 3:45]
  expected = inception_preprocessing.preprocess_cropped_for_eval(
      tf.constant(crop), 32, 32)
  output, expected_value, tf_crop = _run(
      [fn(image, 32, 32), expected, tf.image.central_crop(image, 0.875)])
  np.testing.assert_array_equal(tf_crop, crop)
  np.testing.assert_array_equal(output, expected_value)


def test_inception_training_crop_stays_inside_the_box(graph):
  del graph
  box = tf.constant([[[0.5, 0.5, 1.0, 1.0]]])  # The bottom-right quarter.
  windows = _run([inception_preprocessing.distorted_crop_window(
      tf.constant([100, 100, 3]), box, min_object_covered=1.0)
                  for _ in range(5)])
  for offset_y, offset_x, height, width in windows:
    assert offset_y <= 50 and offset_x <= 50
    assert offset_y + height >= 100 and offset_x + width >= 100


def test_vgg_eval_subtracts_the_rgb_means(graph):
  del graph
  image = tf.fill([300, 400, 3], tf.constant(200, tf.uint8))
  value = _run(preprocessing_factory.get_preprocessing('vgg_16')(
      image, 224, 224))
  np.testing.assert_allclose(value[0, 0], 200 - np.array(
      vgg_preprocessing.RGB_MEANS), rtol=1e-5)


def test_vgg_aspect_preserving_resize_sets_the_smaller_side(graph):
  del graph
  resized = vgg_preprocessing.aspect_preserving_resize(
      tf.zeros([300, 400, 3], tf.uint8), 256)
  assert _run(tf.shape(resized)).tolist() == [256, 341, 3]


def test_vgg_training_resize_side_is_in_range(graph):
  del graph
  _, image = _image(60, 80)
  value = _run(vgg_preprocessing.preprocess_image(
      image, 50, 50, is_training=True, resize_side_min=50,
      resize_side_max=60))
  assert value.shape == (50, 50, 3)
  assert value.max() <= 255 - min(vgg_preprocessing.RGB_MEANS) + 1e-3


@pytest.mark.parametrize('low, high', [(-1.0, 1.0), (0.0, 1.0), (0.0, 255.0)])
def test_uint8_to_range_equals_cast_then_scale_for_every_value(graph, low,
                                                               high):
  del graph
  values = np.arange(256, dtype=np.uint8)
  scale = np.float32((high - low) / 255.0)
  expected = values.astype(np.float32) * scale + np.float32(low)
  output = _run(image_ops.uint8_to_range(tf.constant(values), low, high))
  assert output.dtype == np.float32
  np.testing.assert_array_equal(output, expected)


def test_uint8_to_range_equals_the_three_op_tf_formula_on_a_batch(graph):
  del graph
  pixels = np.random.RandomState(0).randint(
      0, 256, (4, 16, 16, 3)).astype(np.uint8)
  images = tf.constant(pixels)
  three_ops = tf.cast(images, tf.float32) * (2.0 / 255.0) - 1.0
  one_op = image_ops.uint8_to_range(images, -1.0, 1.0)
  assert one_op.shape.as_list() == [4, 16, 16, 3]
  one_op_value, three_ops_value = _run([one_op, three_ops])
  np.testing.assert_array_equal(one_op_value, three_ops_value)


def test_uint8_to_range_refuses_float_images(graph):
  del graph
  with pytest.raises(TypeError, match='needs uint8 images, got float32'):
    image_ops.uint8_to_range(tf.zeros([2, 2, 3]), -1.0, 1.0)


def _fixed_crop(image, height, width):
  return image[1:1 + height, 2:2 + width]


def _scale_to_minus_1_1(images):
  return image_ops.uint8_to_range(images, -1.0, 1.0)


def test_two_stage_call_is_the_batch_stage_of_a_batch_of_one(graph):
  del graph
  pixels, image = _image(10, 12)
  fn = two_stage.TwoStagePreprocessor(_fixed_crop, _scale_to_minus_1_1)
  staged = fn.batch_stage(tf.expand_dims(fn.image_stage(image, 6, 8), 0))
  output, staged_value = _run([fn(image, 6, 8), staged])
  expected = pixels[1:7, 2:10].astype(np.float32) * np.float32(
      2 / 255) - np.float32(1)
  assert output.shape == (6, 8, 3)
  np.testing.assert_array_equal(output, expected)
  np.testing.assert_array_equal(staged_value[0], expected)


def test_two_stage_batch_stage_equals_each_image_preprocessed_alone(graph):
  del graph
  images = [_image(10, 12, seed=seed)[1] for seed in range(3)]
  fn = two_stage.TwoStagePreprocessor(_fixed_crop, _scale_to_minus_1_1)
  batch = fn.batch_stage(tf.stack([fn.image_stage(image, 6, 8)
                                   for image in images]))
  alone = [fn(image, 6, 8) for image in images]
  batch_value, alone_values = _run([batch, alone])
  np.testing.assert_array_equal(batch_value, np.stack(alone_values))


def test_two_stage_without_batch_fn_is_its_image_stage(graph):
  del graph
  pixels, image = _image(10, 12)
  fn = two_stage.TwoStagePreprocessor(_fixed_crop)
  batch = tf.stack([image[:6, :8]])
  assert fn.batch_stage(batch) is batch
  np.testing.assert_array_equal(_run(fn(image, 6, 8)), pixels[1:7, 2:10])


def test_cropping_preprocessor_runs_crop_rest_then_batch_stage(graph):
  del graph
  pixels, image = _image(10, 12)
  fn = cropping.CroppingPreprocessor(
      lambda unused_shape, height, width, unused_bbox: tf.constant(
          [3, 1, height, width]),
      lambda cropped, unused_height, unused_width: tf.reverse(cropped, [1]),
      batch_fn=_scale_to_minus_1_1)
  image_stage = fn.image_stage(image, 5, 7)
  assert image_stage.dtype == tf.uint8
  output, image_stage_value = _run([fn(image, 5, 7), image_stage])
  mirrored_crop = pixels[3:8, 1:8][:, ::-1]
  np.testing.assert_array_equal(image_stage_value, mirrored_crop)
  np.testing.assert_array_equal(
      output, mirrored_crop.astype(np.float32) * np.float32(2 / 255) - 1)
