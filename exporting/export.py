"""Writes the artifacts an ExportConfig asks for, each whole or not at all.

  GraphDef   the inference graph from `input` to the net's Predictions (or
             to the --final_endpoint end point, keeping only what it
             needs); frozen (variables as constants) when a checkpoint is
             given.
  TFLite     converted from the same graph and weights.
  SavedModel built in a graph of its own (exporting/saved_model.py).

The checkpoint is checked against the graph before anything is written.
"""

from exporting import graph as graph_lib
from exporting import outputs
from exporting import saved_model
from exporting import split_images
from exporting import tflite
from tf2_compat.slim_compat import tf
from training import checkpoint_fit
from training.errors import UsageError


def _describe(tensor):
  """'name:0 float32 [None, 28, 28, 1]'."""
  return '%s %s %s' % (tensor.name, tensor.dtype.name,
                       tensor.shape.as_list())


def _representative_images(calibration):
  images, _ = split_images.read(calibration.inputs, calibration.model,
                                limit=calibration.num_images)
  if images.shape[0] == 0:
    raise UsageError(
        '--dataset_split_name=%s of %s holds no image to calibrate the int8 '
        'model; give a split with images' % (
            calibration.inputs.dataset_split_name,
            calibration.inputs.dataset_name))
  return images


def export(config):
  """Writes each artifact of `config`; returns the lines that describe
  them (tensor names and shapes, paths).

  Raises:
    UsageError: the checkpoint does not fit the model; the calibration
      split has no image.
    LastingFailure: an artifact could not be written for a reason a second
      run would meet again, a full or read-only disk (outputs.written_whole).
  """
  lines = []
  with tf.Graph().as_default():
    graph = graph_lib.inference_graph(
        config.model, graph_lib.input_placeholder(config.model,
                                                  config.batch_size))
    lines += ['input: %s' % _describe(graph.images),
              'output: %s' % _describe(graph.output)]
    saver = None
    if config.checkpoint:
      to_restore = graph_lib.variables_to_restore(
          config.moving_average_decay)
      checkpoint_fit.check_export(config.checkpoint_path, config.checkpoint,
                                  to_restore, config.choices)
      saver = tf.train.Saver(to_restore)
    representative = (_representative_images(config.calibration)
                      if config.calibration else None)
    with tf.Session() as session:
      if saver:
        saver.restore(session, config.checkpoint)
      if config.output_file:
        graph_def = (graph_lib.frozen_graph_def(session, [graph.output])
                     if saver else session.graph.as_graph_def())
        if config.model.final_endpoint:
          graph_def = graph_lib.graph_def_up_to(graph_def, graph.output)
        with outputs.written_whole('output_file',
                                   config.output_file) as partial:
          graph_lib.write_graph_def(graph_def, partial,
                                    config.write_text_graphdef)
        lines.append('graph: %s (%s)' % (
            config.output_file, 'frozen' if saver else 'no weights'))
      if config.tflite_file:
        content = tflite.convert(session, graph, config.tflite_quantization,
                                 representative, config.quantize)
        with outputs.written_whole('tflite_file',
                                   config.tflite_file) as partial:
          with open(partial, 'wb') as f:
            f.write(content)
        lines.append('tflite: %s (%s)' % (config.tflite_file,
                                          config.tflite_quantization))
  if config.saved_model_path:
    with outputs.written_whole('saved_model_dir',
                               config.saved_model_path) as partial:
      saved_model.write(config.model, config.checkpoint,
                        config.moving_average_decay, partial)
    lines.append('saved model: %s (signatures %s: encoded images, %s: '
                 'float images)' % (config.saved_model_path,
                                    saved_model.SERVING_SIGNATURE,
                                    saved_model.FLOAT_SIGNATURE))
  return lines
