"""An exported model against the checkpoint it came from, on one split.

    comparison = verify.compare(eval_config, 'lenet.tflite')
    comparison.accuracy, comparison.checkpoint_accuracy, comparison.agreement

Both run on the same preprocessed images (exporting/split_images.py): the
checkpoint through the network built here, the artifact through
exporting/artifacts.py. `agreement` is the fraction of images whose top-1
class is the same for both.
"""

import collections

import numpy as np

from exporting import artifacts
from exporting import graph as graph_lib
from exporting import split_images
from tf2_compat.slim_compat import tf
from training import checkpoint_fit
from training.errors import UsageError

Comparison = collections.namedtuple(
    'Comparison', ['kind', 'accuracy', 'checkpoint_accuracy', 'agreement',
                   'num_examples'])


def checkpoint_predictor(config, input_shape, num_threads=None):
  """A SessionPredictor of the checkpoint an EvalConfig names, for images
  of input_shape [height, width, channels], on at most num_threads threads
  (None: TensorFlow's default).

  Raises:
    UsageError: the checkpoint does not fit the model.
  """
  graph = tf.Graph()
  with graph.as_default():
    images = tf.placeholder(tf.float32, [None] + list(input_shape))
    _, end_points = config.model.network_fn(images)
    to_restore = graph_lib.variables_to_restore(config.moving_average_decay)
    checkpoint_fit.check_eval(config.checkpoint_path, config.checkpoint,
                              to_restore, config.choices)
    session = artifacts.session_for(graph, num_threads)
    tf.train.Saver(to_restore).restore(session, config.checkpoint)
  return artifacts.SessionPredictor(session, images,
                                    end_points['Predictions'])


def _check_fits(predictor, path, image_shape, num_classes):
  """Raises a UsageError unless the artifact takes images of `image_shape`
  ([height, width, channels], as the flags preprocess them) and gives
  scores of `num_classes` classes."""
  taken = predictor.input_shape[1:]
  if taken != image_shape:
    raise UsageError(
        '--exported_model=%s takes images of %s (height, width, channels); '
        'the flags give %s (--model_name\'s preprocessing at '
        '--eval_image_size, or at its default): export at that size '
        '(--image_size), or evaluate at the artifact\'s with '
        '--eval_image_size'
        % (path, _shape(taken), _shape(image_shape)))
  if predictor.output_shape[1:] != [num_classes]:
    raise UsageError(
        '--exported_model=%s gives outputs of %s per image, not scores of '
        'the %d classes of the dataset (with --labels_offset): export it '
        'without --final_endpoint, from a checkpoint of this dataset'
        % (path, _shape(predictor.output_shape[1:]), num_classes))


def _shape(dims):
  return 'x'.join('?' if n is None else str(n) for n in dims) or 'scalar'


def compare(config, exported_model):
  """Evaluates `exported_model` and config's checkpoint on config's split.

  Args:
    config: the EvalConfig of eval_image_classifier.py; max_num_batches
      limits the images to that many batches.
    exported_model: the artifact's path (see artifacts.load).

  Returns:
    A Comparison.

  Raises:
    UsageError: an artifact that does not load, a checkpoint that does not
      fit, an empty split.
  """
  predictor = artifacts.load(exported_model)
  limit = (config.max_num_batches * config.inputs.batch_size
           if config.max_num_batches else None)
  images, labels = split_images.read(config.inputs, config.model, limit)
  _check_fits(predictor, exported_model, list(images.shape[1:]),
              config.model.num_classes)
  if labels.size == 0:
    raise UsageError('split %s of %s is empty' % (
        config.inputs.dataset_split_name, config.inputs.dataset_name))
  exported = np.argmax(predictor.predict(images), 1)
  trained = np.argmax(checkpoint_predictor(config, images.shape[1:]).predict(
      images), 1)
  return Comparison(
      kind=artifacts.kind(exported_model),
      accuracy=float(np.mean(exported == labels)),
      checkpoint_accuracy=float(np.mean(trained == labels)),
      agreement=float(np.mean(exported == trained)),
      num_examples=len(labels))
