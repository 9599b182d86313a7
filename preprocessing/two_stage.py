"""Preprocessing split into a per-image stage and a whole-batch stage.

Work that treats every image of a batch alike (a cast, a scale) costs the
same CPU per pixel whether it runs on one image or on 32, but done per
image it also makes the images float32 before batching: the batch then
copies four bytes per pixel instead of one, and every image pays the
per-op overhead. A `TwoStagePreprocessor` keeps what differs per image
(crop, flip) in `image_stage`, whose output may stay uint8, and does the
rest once per batch in `batch_stage`. The input pipeline calls the two
stages on either side of `batch`; called as a plain function it runs
both on one image, so

    fn(image, h, w) == fn.batch_stage(fn.image_stage(image, h, w)[None])[0]

and code that preprocesses single images (slim's queues, evaluation
scripts) sees exactly what a training step sees.
"""

from tf2_compat.slim_compat import tf


class TwoStagePreprocessor:
  """A preprocessing fn whose last part runs once per batch.

  Args:
    image_fn: (image, output_height, output_width, **kwargs) -> one image
      of a fixed shape; any dtype (uint8 keeps batching cheap).
    batch_fn: [batch, height, width, channels] -> the preprocessed batch.
      It must treat every image on its own (nothing drawn once for the
      whole batch, no statistics across images), so that batching does
      not change any image. None: images are final after image_fn.
  """

  def __init__(self, image_fn, batch_fn=None):
    self._image_fn = image_fn
    self._batch_fn = batch_fn

  def image_stage(self, image, output_height, output_width, **kwargs):
    """The per-image part; its outputs are batched."""
    return self._image_fn(image, output_height, output_width, **kwargs)

  def batch_stage(self, images):
    """The whole-batch part, applied to a batch of `image_stage` outputs."""
    if self._batch_fn is None:
      return images
    return self._batch_fn(images)

  def __call__(self, image, output_height, output_width, **kwargs):
    image = self.image_stage(image, output_height, output_width, **kwargs)
    if self._batch_fn is None:
      return image
    return self._batch_fn(tf.expand_dims(image, 0))[0]
