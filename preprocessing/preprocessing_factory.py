"""Looks up the preprocessing of a network by the network's name.

    preprocess = get_preprocessing('inception_v3', is_training=True)
    image = preprocess(image, 299, 299)

Every returned function maps a decoded uint8 image [h, w, c] to a float32
[output_height, output_width, c'] image. Networks built for RGB get 3
channels even from grayscale datasets (the channel is tiled); LeNet keeps
the input's channels. With use_grayscale=True the output has 1 channel.
"""

from preprocessing import cifarnet_preprocessing
from preprocessing import inception_preprocessing
from preprocessing import lenet_preprocessing
from preprocessing import vgg_preprocessing

_INCEPTION_STYLE = (
    'inception', 'inception_v1', 'inception_v2', 'inception_v3',
    'inception_v4', 'inception_resnet_v2', 'mobilenet_v1', 'mobilenet_v1_075',
    'mobilenet_v1_050', 'mobilenet_v1_025', 'mobilenet_v2',
    'mobilenet_v2_035', 'mobilenet_v2_140', 'mobilenet_v3_small',
    'mobilenet_v3_large', 'mobilenet_v3_small_minimalistic',
    'mobilenet_v3_large_minimalistic', 'mobilenet_edgetpu',
    'mobilenet_edgetpu_075', 'nasnet_mobile', 'nasnet_large',
    'pnasnet_mobile', 'pnasnet_large')
_VGG_STYLE = (
    'alexnet_v2', 'overfeat', 'resnet_v1_50', 'resnet_v1_101',
    'resnet_v1_152', 'resnet_v1_200', 'resnet_v2_50', 'resnet_v2_101',
    'resnet_v2_152', 'resnet_v2_200', 'vgg', 'vgg_a', 'vgg_16', 'vgg_19')

preprocessing_fn_map = dict(
    # nasnet_cifar has no entry upstream (--preprocessing_name=cifarnet
    # there): CIFAR-10's preprocessing, as CifarNet's.
    [('cifarnet', cifarnet_preprocessing), ('lenet', lenet_preprocessing),
     ('nasnet_cifar', cifarnet_preprocessing)]
    + [(name, inception_preprocessing) for name in _INCEPTION_STYLE]
    + [(name, vgg_preprocessing) for name in _VGG_STYLE])


def get_preprocessing(name, is_training=False, use_grayscale=False):
  """Returns fn(image, output_height, output_width, **kwargs) for a network.

  Args:
    name: a network name, e.g. 'lenet', 'cifarnet', 'inception_v3',
      'resnet_v1_50'; see `preprocessing_fn_map`.
    is_training: training preprocessing (random augmentation) or
      evaluation preprocessing (deterministic).
    use_grayscale: convert the output to 1 channel.

  Returns:
    The preprocessing function. For inception-style names it is a
    `cropping.CroppingPreprocessor`, whose crop the input pipeline can fold
    into JPEG decoding.

  Raises:
    ValueError: unknown name.
  """
  if name not in preprocessing_fn_map:
    raise ValueError('unknown preprocessing name %r; known names: %s'
                     % (name, ', '.join(sorted(preprocessing_fn_map))))
  module = preprocessing_fn_map[name]
  if module is inception_preprocessing:
    return inception_preprocessing.cropping_preprocessor(
        is_training, use_grayscale=use_grayscale)

  def preprocessing_fn(image, output_height, output_width, **kwargs):
    return module.preprocess_image(image, output_height, output_width,
                                   is_training=is_training,
                                   use_grayscale=use_grayscale, **kwargs)

  return preprocessing_fn
