"""Runs an exported model on preprocessed images, whatever its format.

    predictor = artifacts.load('model.tflite')   # or a .pb, a SavedModel
    scores = predictor.predict(images)          # [n, num_classes]

  frozen graph  a GraphDef file (binary or text) without variables: fed at
                `input`, read at its one output (the net's Predictions).
  SavedModel    a folder with saved_model.pb, or a folder of numbered
                versions (the highest is read): its `predict_images`
                signature.
  TFLite        a .tflite file, run by the LiteRT interpreter one image per
                call; int8 inputs and outputs are quantized and dequantized
                with the file's scales.

A predictor has the artifact's `input_shape` ([batch, height, width,
channels], batch None for any) and `output_shape` ([batch, classes]), as
the artifact declares them. A file or folder that is not one of the three
raises a UsageError naming it.

`num_threads` bounds the threads of each run (the benchmark's latency per
image is measured on one); None leaves TensorFlow's and LiteRT's defaults.
"""

import os

from ai_edge_litert import interpreter as litert
from google.protobuf import message
from google.protobuf import text_format
import numpy as np

from exporting import graph as graph_lib
from exporting import saved_model
from tf2_compat.slim_compat import tf
from training.errors import UsageError

_VARIABLE_OPS = frozenset(['VariableV2', 'VarHandleOp', 'Variable'])


class SessionPredictor:
  """Runs `output` of a graph fed at `images`, in batches of `batch_size`
  (the input's static batch, or any)."""

  def __init__(self, session, images, output):
    self._session = session
    self._images = images
    self._output = output
    self._batch_size = images.shape[0] or 100
    self.input_shape = images.shape.as_list()
    self.output_shape = output.shape.as_list()

  def predict(self, images):
    scores = []
    for start in range(0, len(images), self._batch_size):
      batch = images[start:start + self._batch_size]
      real = len(batch)
      if self._images.shape[0] is not None and real < self._batch_size:
        batch = np.concatenate([batch, np.zeros(
            (self._batch_size - real,) + batch.shape[1:], batch.dtype)])
      scores.append(self._session.run(self._output,
                                      {self._images: batch})[:real])
    return np.concatenate(scores)


def session_for(graph, num_threads=None):
  """A session of `graph` on at most num_threads threads (None: TF's
  default)."""
  config = (tf.ConfigProto(intra_op_parallelism_threads=num_threads,
                           inter_op_parallelism_threads=num_threads)
            if num_threads else None)
  return tf.Session(graph=graph, config=config)


def _frozen_graph(path, num_threads):
  graph_def = graph_lib.read_graph_def(path)
  variables = [node.name for node in graph_def.node
               if node.op in _VARIABLE_OPS]
  if variables:
    raise UsageError(
        '--exported_model=%s is not frozen (it holds variable %s); export '
        'it with --checkpoint_path' % (path, variables[0]))
  consumed = {name.lstrip('^').split(':')[0]
              for node in graph_def.node for name in node.input}
  sinks = [node.name for node in graph_def.node if node.name not in consumed]
  names = {node.name for node in graph_def.node}
  if graph_lib.INPUT_NAME not in names or len(sinks) != 1:
    raise _not_exported(path, 'frozen graph', 'no one output fed from an '
                        '`%s` node' % graph_lib.INPUT_NAME)
  graph = tf.Graph()
  with graph.as_default():
    tf.import_graph_def(graph_def, name='')
  return SessionPredictor(
      session_for(graph, num_threads),
      graph.get_tensor_by_name(graph_lib.INPUT_NAME + ':0'),
      graph.get_tensor_by_name(sinks[0] + ':0'))


def saved_model_version_dir(path):
  """The folder holding saved_model.pb: `path`, or its highest numbered
  version folder."""
  if os.path.exists(os.path.join(path, 'saved_model.pb')):
    return path
  versions = [name for name in os.listdir(path) if name.isdigit()
              and os.path.exists(os.path.join(path, name, 'saved_model.pb'))]
  if not versions:
    raise UsageError('--exported_model=%s holds no saved_model.pb, neither '
                     'itself nor in a version folder' % path)
  return os.path.join(path, max(versions, key=int))


def _saved_model(path, num_threads):
  graph = tf.Graph()
  session = session_for(graph, num_threads)
  with graph.as_default():
    meta_graph = tf.saved_model.loader.load(
        session, [tf.saved_model.SERVING], saved_model_version_dir(path))
  signature = meta_graph.signature_def.get(saved_model.FLOAT_SIGNATURE)
  if signature is None:
    raise _not_exported(path, 'SavedModel', 'no %r signature' %
                        saved_model.FLOAT_SIGNATURE)
  return SessionPredictor(
      session, graph.get_tensor_by_name(signature.inputs['images'].name),
      graph.get_tensor_by_name(signature.outputs['probabilities'].name))


class _LiteRTPredictor:
  """A .tflite file run by LiteRT, one image per invocation."""

  def __init__(self, path, num_threads):
    self._interpreter = litert.Interpreter(model_path=path,
                                           num_threads=num_threads)
    self._interpreter.allocate_tensors()
    self._input = self._interpreter.get_input_details()[0]
    self._output = self._interpreter.get_output_details()[0]
    self.input_shape = [int(n) for n in self._input['shape']]
    self.output_shape = [int(n) for n in self._output['shape']]

  def predict(self, images):
    scores = []
    for image in images:
      self._interpreter.set_tensor(self._input['index'],
                                   _quantized(image[None], self._input))
      self._interpreter.invoke()
      scores.append(_dequantized(
          self._interpreter.get_tensor(self._output['index']),
          self._output)[0])
    return np.stack(scores)


def _quantized(values, details):
  if details['dtype'] == np.float32:
    return values.astype(np.float32)
  scale, zero_point = details['quantization']
  info = np.iinfo(details['dtype'])
  return np.clip(np.round(values / scale) + zero_point, info.min,
                 info.max).astype(details['dtype'])


def _dequantized(values, details):
  if details['dtype'] == np.float32:
    return values
  scale, zero_point = details['quantization']
  return (values.astype(np.float32) - zero_point) * scale


def kind(path):
  """'SavedModel', 'TFLite' or 'frozen graph': the format of `path`.

  Raises:
    UsageError: nothing at `path`.
  """
  if os.path.isdir(path):
    return 'SavedModel'
  if not os.path.isfile(path):
    raise UsageError('--exported_model=%s does not exist' % path)
  return 'TFLite' if path.endswith('.tflite') else 'frozen graph'


def _not_exported(path, artifact_kind, reason):
  return UsageError(
      '--exported_model=%s cannot be read as a %s (%s); give a frozen '
      'graph, SavedModel or .tflite file that export_inference_graph.py '
      'wrote' % (path, artifact_kind, reason))


# What reading a file of another kind raises: protobuf's parse errors (a
# .pb of random bytes, of text), LiteRT's ValueError (a .tflite that is
# not one), TensorFlow's (a SavedModel it cannot load), a file that is not
# text.
_UNREADABLE = (message.DecodeError, text_format.ParseError,
               UnicodeDecodeError, ValueError, RuntimeError, OSError,
               tf.errors.OpError)


def load(path, num_threads=None):
  """A predictor of the artifact at `path`: predictor.predict(images
  float32 [n, size, size, channels]) -> scores [n, num_classes].

  Raises:
    UsageError: nothing at `path`, a graph that is not frozen, a folder
      without a SavedModel, a file or folder that is not an artifact of
      export_inference_graph.py.
  """
  artifact_kind = kind(path)
  loader = {'SavedModel': _saved_model, 'TFLite': _LiteRTPredictor,
            'frozen graph': _frozen_graph}[artifact_kind]
  try:
    return loader(path, num_threads)
  except _UNREADABLE as error:
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    raise _not_exported(path, artifact_kind, reason[:200]) from None
