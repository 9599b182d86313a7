"""TFLite conversion of the inference graph, float or quantized.

  none     float32 weights and activations.
  float16  weights stored as float16 (about half the file), computed in
           float32.
  int8     full-integer post-training quantization: weights and activations
           int8, input and output too; the activation ranges are calibrated
           on images of the training split, preprocessed as in evaluation.
           The file is about a quarter of the float one and runs on
           integer-only devices. Each output channel of a convolution's
           weights has its own scale (per-channel), and so has its bias.
  int8_per_tensor
           int8 with one scale per weight tensor. A channel's scale and
           zero point take 12 bytes in the file (float32 and int64), and
           its bias's as many again: in small layers, such as
           mobilenet_v1_025's 3x3 depthwise ones (9 weight bytes a
           channel), they outweigh the weights. Per-tensor drops them, at
           the price of a coarser grid for channels of small weights.

A quantization-aware graph (export --quantize) carries the ranges of its
weights (one per tensor) and activations in its FakeQuant ops. Its int8
file takes them (int8_per_tensor writes the same file):
the converter's quantization-aware path, whose only calibrated range is
the input's (the representative images' min and max). none keeps the
FakeQuant ops as quantize-dequantize pairs, computing what the graph
computes.
"""

from tf2_compat.slim_compat import tf

QUANTIZATIONS = ('none', 'float16', 'int8', 'int8_per_tensor')


def convert(session, graph, quantization, representative_images=None,
            quantization_aware=False):
  """The TFLite flatbuffer (bytes) of an inference graph.

  Args:
    session: a session holding the graph's weights.
    graph: the exporting.graph.InferenceGraph, converted from its images
      to its output; a placeholder batch of None becomes 1.
    quantization: one of QUANTIZATIONS.
    representative_images: for int8 and int8_per_tensor, float32
      [n, size, size, channels] preprocessed images, n >= 1.
    quantization_aware: the graph is quantization-aware (FakeQuant ops).

  Returns:
    The bytes of the .tflite file.
  """
  converter = tf.lite.TFLiteConverter.from_session(
      session, [graph.images], [graph.output])
  if quantization == 'float16':
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
  elif quantization.startswith('int8') and quantization_aware:
    converter.inference_type = tf.int8
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    converter.quantized_input_stats = {
        graph.images.op.name: _int8_stats(representative_images)}
  elif quantization.startswith('int8'):
    # The converter's own switch, an experimental attribute: the
    # post-training quantizer reads it when it quantizes the weights.
    # pylint: disable-next=protected-access
    converter._experimental_disable_per_channel = (
        quantization == 'int8_per_tensor')
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (
        [image[None]] for image in representative_images)
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
  return converter.convert()


def _int8_stats(images):
  """(mean, std) with int8 = real x std + mean mapping the images' range
  (widened to include 0) onto -128..127."""
  low = min(float(images.min()), 0.0)
  high = max(float(images.max()), 0.0)
  std = 255.0 / ((high - low) or 1.0)
  return (-128.0 - low * std, std)
