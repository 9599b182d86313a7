"""Encodes and decodes images for the converters, in eager or graph mode.

The converters run from `download_and_convert_data.py` (eager) and may be
called from a training script that builds a graph, so the coder keeps its
own small graph and session and never touches the caller's default graph.
"""

import numpy as np

from tf2_compat.slim_compat import tf


def image_format(image_data):
  """Returns b'jpeg' or b'png' from the file's magic bytes, else None."""
  if image_data[:3] == b'\xff\xd8\xff':
    return b'jpeg'
  if image_data[:8] == b'\x89PNG\r\n\x1a\n':
    return b'png'
  return None


class ImageCoder:
  """PNG/JPEG encoding and decoding through one private TF session."""

  def __init__(self):
    self._graph = tf.Graph()
    with self._graph.as_default():
      self._pixels = tf.placeholder(tf.uint8, shape=[None, None, None])
      self._png = tf.image.encode_png(self._pixels)
      self._encoded = tf.placeholder(tf.string, shape=[])
      self._decoded = tf.io.decode_image(self._encoded, channels=3,
                                         expand_animations=False)
    self._session = tf.Session(graph=self._graph)
    self._jpeg_by_quality = {}

  def encode_png(self, pixels):
    """uint8 array [height, width, channels] -> PNG bytes."""
    return self._session.run(
        self._png, {self._pixels: np.asarray(pixels, np.uint8)})

  def encode_jpeg(self, pixels, quality=95):
    """uint8 array [height, width, 1 or 3] -> JPEG bytes."""
    if quality not in self._jpeg_by_quality:
      # `quality` is an op attribute, not an input: one op per value.
      with self._graph.as_default():
        self._jpeg_by_quality[quality] = tf.image.encode_jpeg(
            self._pixels, quality=quality)
    return self._session.run(self._jpeg_by_quality[quality],
                             {self._pixels: np.asarray(pixels, np.uint8)})

  def decode_rgb(self, image_data):
    """PNG/JPEG/GIF/BMP bytes -> uint8 array [height, width, 3].

    Raises:
      tf.errors.InvalidArgumentError: the bytes are not a decodable image.
    """
    return self._session.run(self._decoded, {self._encoded: image_data})

  def close(self):
    self._session.close()

  def __enter__(self):
    return self

  def __exit__(self, *unused_exc_info):
    self.close()
