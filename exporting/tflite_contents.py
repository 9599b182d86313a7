"""What the bytes of a TFLite file hold: constants by type, quantization
parameters, and the rest (operators, tensor names, metadata).

An int8 file is smaller than a float32 one by its weights (a byte instead
of four) but not by the rest, and it adds quantization parameters: per
quantized tensor a float32 scale and an int64 zero point, one pair per
output channel for per-channel weights and for their int32 biases. For a
network of small layers these parameters are a visible part of the file,
which is why benchmarks/export_artifacts.py lists them.

    contents = tflite_contents.read('export/mobilenet_int8.tflite')
    contents.constant_bytes.get('FLOAT32', 0)   # 0: no float weight left
"""

import dataclasses

from tensorflow.lite.python import schema_py_generated as schema

# Bytes of one quantization parameter pair: a float32 scale, an int64 zero
# point (the schema's types).
_SCALE_BYTES = 4
_ZERO_POINT_BYTES = 8

_TYPE_NAMES = {value: name for name, value in vars(schema.TensorType).items()
               if not name.startswith('_')}


@dataclasses.dataclass(frozen=True)
class Contents:
  """The parts of a TFLite file, in bytes.

  Attributes:
    file_bytes: the whole file.
    constant_bytes: {tensor type name ('INT8', 'INT32', 'FLOAT32', ...):
      bytes of the constant buffers (weights, biases) of that type}, each
      buffer counted once.
    quantization_bytes: the scales and zero points of every tensor.
    per_channel_tensors: how many tensors have more than one scale.
    channel_parameters: how many scale and zero point pairs those hold.
  """
  file_bytes: int
  constant_bytes: dict
  quantization_bytes: int
  per_channel_tensors: int
  channel_parameters: int

  @property
  def other_bytes(self):
    """The rest: operators, tensor shapes and names, metadata, padding."""
    return (self.file_bytes - sum(self.constant_bytes.values())
            - self.quantization_bytes)

  def describe(self):
    """One line, e.g. 'INT8 constants 205.1 KiB, INT32 constants 10.7 KiB,
    quantization parameters 64.7 KiB (2748 pairs in 56 per-channel
    tensors), other 20.7 KiB'."""
    parts = ['%s constants %.1f KiB' % (name, size / 1024)
             for name, size in sorted(self.constant_bytes.items())]
    parts.append('quantization parameters %.1f KiB (%d pairs in %d '
                 'per-channel tensors)' % (
                     self.quantization_bytes / 1024, self.channel_parameters,
                     self.per_channel_tensors))
    parts.append('other %.1f KiB' % (self.other_bytes / 1024))
    return ', '.join(parts)


def _buffer_bytes(buffer):
  if buffer.data is not None:
    return len(buffer.data)
  # A large model's buffers may sit after the flatbuffer, by offset.
  return buffer.size or 0


def read(path):
  """The Contents of the TFLite file at `path`."""
  with open(path, 'rb') as f:
    content = f.read()
  model = schema.ModelT.InitFromPackedBuf(content, 0)
  constant_bytes = {}
  counted = set()
  quantization_bytes = per_channel_tensors = channel_parameters = 0
  for subgraph in model.subgraphs:
    for tensor in subgraph.tensors:
      size = _buffer_bytes(model.buffers[tensor.buffer])
      if size and tensor.buffer not in counted:
        counted.add(tensor.buffer)
        name = _TYPE_NAMES[tensor.type]
        constant_bytes[name] = constant_bytes.get(name, 0) + size
      quantization = tensor.quantization
      scales = 0 if quantization is None or quantization.scale is None else (
          len(quantization.scale))
      zero_points = (0 if quantization is None
                     or quantization.zeroPoint is None
                     else len(quantization.zeroPoint))
      quantization_bytes += (scales * _SCALE_BYTES
                             + zero_points * _ZERO_POINT_BYTES)
      if scales > 1:
        per_channel_tensors += 1
        channel_parameters += scales
  return Contents(len(content), constant_bytes, quantization_bytes,
                  per_channel_tensors, channel_parameters)
