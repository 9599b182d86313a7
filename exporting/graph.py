"""The inference graph: upstream's placeholder `input`, then the network.

    graph = inference_graph(model, input_placeholder(model, None))
    # graph.images: float32 [batch, size, size, channels], named 'input'
    #   ([batch, frames, size, size, channels] for a video network)
    # graph.probabilities: the net's end_points['Predictions']
    # graph.output: what the export ends at: the probabilities, or the end
    #   point --final_endpoint names

`frozen_graph_def` turns the variables of a session into constants (what
upstream's separate freeze_graph step did), keeping only what the output
needs. The network is built whole, as it was trained, so that any
checkpoint of it restores; an export to an end point keeps what that end
point needs (`graph_def_up_to`).
"""

import collections

from google.protobuf import message
from google.protobuf import text_format

from tf2_compat.slim_compat import slim, tf

INPUT_NAME = 'input'

InferenceGraph = collections.namedtuple(
    'InferenceGraph', ['images', 'logits', 'probabilities', 'output'])


def input_placeholder(model, batch_size):
  """The float32 input [batch_size] + model.input_shape named 'input'
  (batch_size None: any batch)."""
  return tf.placeholder(tf.float32, [batch_size] + model.input_shape,
                        name=INPUT_NAME)


def inference_graph(model, images):
  """Builds the network of `model` on `images`, in the default graph.

  Args:
    model: an ExportModel.
    images: its input, a float32 [batch] + model.input_shape tensor.

  Returns:
    An InferenceGraph of tensors.
  """
  logits, end_points = model.network_fn(images)
  return InferenceGraph(images, logits, end_points['Predictions'],
                        end_points[model.output_name])


def graph_def_up_to(graph_def, output):
  """The part of `graph_def` that tensor `output` needs."""
  return tf.graph_util.extract_sub_graph(graph_def, [output.op.name])


def variables_to_restore(moving_average_decay):
  """{checkpoint name: variable} of the default graph: the weights, or
  their moving averages when training kept them with this decay."""
  if not moving_average_decay:
    return slim.get_variables_to_restore()
  averages = tf.train.ExponentialMovingAverage(moving_average_decay)
  return averages.variables_to_restore(slim.get_model_variables())


def frozen_graph_def(session, outputs):
  """The GraphDef of what `outputs` need, variables as constants read from
  `session`."""
  return tf.graph_util.convert_variables_to_constants(
      session, session.graph.as_graph_def(),
      [tensor.op.name for tensor in outputs])


def write_graph_def(graph_def, path, as_text):
  """Writes a GraphDef, binary or (as_text) in protobuf text format."""
  mode, content = (('w', text_format.MessageToString(graph_def)) if as_text
                   else ('wb', graph_def.SerializeToString()))
  with open(path, mode) as f:
    f.write(content)


def read_graph_def(path):
  """The GraphDef of a file write_graph_def wrote (binary or text)."""
  graph_def = tf.GraphDef()
  with open(path, 'rb') as f:
    content = f.read()
  try:
    graph_def.ParseFromString(content)
  except message.DecodeError:
    text_format.Parse(content.decode('utf-8'), graph_def)
  return graph_def
