"""The network an export builds, and the images it takes: `ExportModel`.

An export needs the dataset only for its number of classes and the
channels of its images, which a converted dataset's module states
(`SPEC`); so, as upstream, --dataset_dir may be left out. Given, the split
is opened instead (a `folder` dataset reads its classes there).

The input's channels are those the net's eval preprocessing makes of the
dataset's images: LeNet keeps digits' single channel, the RGB nets get
three (their preprocessing tiles a gray channel), --use_grayscale one.
A video network (--is_video_model) takes clips of --num_frames RGB frames
(gray with --use_grayscale), as upstream's export: no preprocessing.
"""

import dataclasses
import typing

from datasets import dataset_factory
from datasets import split_check
from nets import nets_factory
from nets import quantize
from preprocessing import preprocessing_factory
from tf2_compat.slim_compat import tf
from training import lookup
from training.errors import UsageError
from training.errors import call_for_flag


@dataclasses.dataclass(frozen=True)
class ExportModel:
  """A network to export and the images it takes.

  Attributes:
    model_name: --model_name.
    num_classes: the dataset's classes minus --labels_offset.
    image_size: the side of the input images.
    channels: the channels of the input images.
    dataset_channels: the channels the dataset's images decode to.
    network_fn: builds the network: (images) -> (logits, end_points).
    preprocess_fn: the net's eval preprocessing of one decoded uint8 image:
      (image, height, width) -> float32 [height, width, channels]; None
      for a video network.
    num_frames: the frames of each input clip of a video network; None:
      the input is images.
    final_endpoint: the end point the exported graph ends at; None: the
      net's Predictions.
  """
  model_name: str
  num_classes: int
  image_size: int
  channels: int
  dataset_channels: int
  network_fn: typing.Callable
  preprocess_fn: typing.Optional[typing.Callable]
  num_frames: typing.Optional[int] = None
  final_endpoint: typing.Optional[str] = None

  @property
  def input_shape(self):
    """[height, width, channels] of one input image, [num_frames, height,
    width, channels] of one clip."""
    frames = [self.num_frames] if self.num_frames else []
    return frames + [self.image_size, self.image_size, self.channels]

  @property
  def output_name(self):
    """The end point the exported graph ends at."""
    return self.final_endpoint or 'Predictions'


def _dataset(f):
  """The dataset's spec (num_classes, image_channels), or its split when
  --dataset_dir is given or the dataset has no spec."""
  spec = getattr(dataset_factory.datasets_map.get(f.dataset_name), 'SPEC',
                 None)
  if spec is not None and not f.dataset_dir:
    return spec
  return call_for_flag(
      '--dataset_name=%s --dataset_split_name=%s' % (f.dataset_name,
                                                     f.dataset_split_name),
      dataset_factory.get_dataset, f.dataset_name, f.dataset_split_name,
      f.dataset_dir)


def _preprocessed_channels(preprocess_fn, dataset_channels, image_size):
  """The channels preprocess_fn outputs for images of dataset_channels
  (the same at any valid image_size)."""
  with tf.Graph().as_default():
    image = tf.zeros([image_size, image_size, dataset_channels], tf.uint8)
    return preprocess_fn(image, image_size, image_size).shape[-1]


def export_model(f, is_training):
  """Looks up what --dataset_name, --model_name and --image_size name.

  Args:
    f: the flags (dataset_name, dataset_split_name, dataset_dir,
      labels_offset, model_name, preprocessing_name, use_grayscale,
      image_size, quantize: build the network quantization-aware).
    is_training: build the network in training mode.

  Returns:
    An ExportModel.

  Raises:
    UsageError: an unknown dataset or network, a video network without
      --is_video_model or an image network with it, an unknown
      --final_endpoint, missing dataset files, or --labels_offset leaving
      no class; naming the flag.
  """
  dataset = _dataset(f)
  num_classes = call_for_flag('--labels_offset=%d' % f.labels_offset,
                              split_check.classes_after_offset, dataset,
                              f.labels_offset)
  network_fn = call_for_flag('--model_name', nets_factory.get_network_fn,
                             f.model_name, num_classes=num_classes,
                             is_training=is_training)
  _check_input_kind(f, network_fn)
  if f.quantize:
    network_fn = quantize.quantized_network_fn(network_fn, is_training)
  image_size = f.image_size or network_fn.default_image_size
  if f.is_video_model:
    preprocess_fn = None
    channels = 1 if f.use_grayscale else 3
  else:
    preprocess_fn = call_for_flag(
        '--preprocessing_name', preprocessing_factory.get_preprocessing,
        f.preprocessing_name or f.model_name, is_training=False,
        use_grayscale=f.use_grayscale)
    channels = _preprocessed_channels(preprocess_fn, dataset.image_channels,
                                      network_fn.default_image_size)
  model = ExportModel(
      model_name=f.model_name, num_classes=num_classes, image_size=image_size,
      channels=channels, dataset_channels=dataset.image_channels,
      network_fn=network_fn, preprocess_fn=preprocess_fn,
      num_frames=f.num_frames if f.is_video_model else None,
      final_endpoint=f.final_endpoint)
  # Built at a size and clip length that are valid (else the flag checks
  # report those).
  if f.final_endpoint and image_size >= network_fn.min_image_size and (
      not f.is_video_model or (f.num_frames or 0) >= 1):
    _check_end_point(model)
  return model


def _check_input_kind(f, network_fn):
  """A video network is exported with --is_video_model, an image network
  without it."""
  if lookup.is_video_network(network_fn) and not f.is_video_model:
    raise UsageError(
        '--model_name=%s is a video network: it takes clips [batch, frames, '
        'height, width, 3]; export it with --is_video_model --num_frames=N '
        '(it was made for %d)' % (f.model_name,
                                  network_fn.default_num_frames))
  if f.is_video_model and not lookup.is_video_network(network_fn):
    raise UsageError(
        '--is_video_model with --model_name=%s, an image network: it takes '
        'images [batch, height, width, channels]; drop --is_video_model, or '
        'export a video network (i3d, s3dg)' % f.model_name)


def end_point_names(model):
  """The names of the end points of `model`'s network, in build order."""
  with tf.Graph().as_default():
    _, end_points = model.network_fn(
        tf.zeros([1] + model.input_shape, tf.float32))
  return list(end_points)


def _check_end_point(model):
  names = end_point_names(model)
  if model.final_endpoint not in names:
    raise UsageError('--final_endpoint=%s is not an end point of %s; use '
                     'one of %s' % (model.final_endpoint, model.model_name,
                                    ', '.join(names)))
