"""A SavedModel for TensorFlow Serving: encoded images in, classes out.

    DIR/1/saved_model.pb, DIR/1/variables/   (--saved_model_dir=DIR)

TensorFlow Serving serves the highest numbered folder of DIR, so a new
version goes beside the old ones (--saved_model_version). Two signatures
share one network:

  serving_default  images: string [batch], each a JPEG or PNG file's bytes,
                   decoded to the dataset's channels and run through the
                   net's eval preprocessing inside the model.
  predict_images   images: float32 [batch, size, size, channels], already
                   preprocessed (what the frozen graph's `input` takes).

Both return classes: int64 [batch] and probabilities: float32 [batch,
num_classes]. The float input is a placeholder whose default is the
decoded batch: feeding it skips the decoding.
"""

from exporting import graph as graph_lib
from tf2_compat.slim_compat import tf

FLOAT_SIGNATURE = 'predict_images'
SERVING_SIGNATURE = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY


def _decoded_images(model, encoded):
  """float32 [batch, size, size, channels]: the encoded images decoded and
  preprocessed as the eval input pipeline does."""
  size = model.image_size

  def decode_and_preprocess(one_encoded):
    image = tf.io.decode_image(one_encoded, channels=model.dataset_channels,
                               expand_animations=False)
    return model.preprocess_fn(image, size, size)

  images = tf.map_fn(decode_and_preprocess, encoded,
                     fn_output_signature=tf.float32)
  images.set_shape([None] + model.input_shape)
  return images


def _signature(images, graph):
  return tf.saved_model.signature_def_utils.predict_signature_def(
      inputs={'images': images},
      outputs={'classes': tf.argmax(graph.probabilities, 1),
               'probabilities': graph.probabilities})


def write(model, checkpoint, moving_average_decay, export_dir):
  """Writes the SavedModel of `model` with the weights of `checkpoint`.

  Args:
    model: an ExportModel.
    checkpoint: the checkpoint prefix to read the weights from.
    moving_average_decay: read the moving averages kept with this decay;
      None: the weights.
    export_dir: the version folder to create; it must not exist.
  """
  with tf.Graph().as_default():
    encoded = tf.placeholder(tf.string, [None], name='encoded_images')
    images = tf.placeholder_with_default(
        _decoded_images(model, encoded), [None] + model.input_shape,
        name=graph_lib.INPUT_NAME)
    graph = graph_lib.inference_graph(model, images)
    saver = tf.train.Saver(
        graph_lib.variables_to_restore(moving_average_decay))
    with tf.Session() as session:
      saver.restore(session, checkpoint)
      builder = tf.saved_model.Builder(export_dir)
      builder.add_meta_graph_and_variables(
          session, [tf.saved_model.SERVING],
          signature_def_map={SERVING_SIGNATURE: _signature(encoded, graph),
                             FLOAT_SIGNATURE: _signature(images, graph)},
          strip_default_attrs=True)
      builder.save()
