"""eval_image_classifier.py --exported_model refuses, with one line each,
what it cannot evaluate: a file or folder that is not an artifact of
export_inference_graph.py, and an artifact whose input or output does not
fit the dataset and the flags."""

import os
import re

import numpy as np
import pytest

from exporting import artifacts
from tf2_compat.slim_compat import tf
from training.errors import UsageError
from tests.script_runner import assert_one_usage_error
from tests.script_runner import run_script
from tests.test_export import _export
from tests.test_export import _untrained_checkpoint

ADVICE = ('; give a frozen graph, SavedModel or .tflite file that '
          'export_inference_graph.py wrote')


def _another_programs_saved_model(path):
  """A SavedModel with only a 'serving_default' signature, of x + 1."""
  with tf.Graph().as_default(), tf.Session() as session:
    x = tf.placeholder(tf.float32, [None, 3], name='x')
    tf.saved_model.simple_save(session, path, inputs={'x': x},
                               outputs={'y': x + 1})


# Each is read as its name says, and each gave a traceback before.
@pytest.mark.parametrize('name, content, reason', [
    ('empty.pb', b'', r'frozen graph \(no one output fed from an `input` '
     r'node\)'),
    ('text.pb', b'not a graph\n', r'frozen graph \(.+\)'),
    ('random.pb', np.random.RandomState(0).bytes(300),
     r'frozen graph \(.+\)'),
    ('random.tflite', np.random.RandomState(0).bytes(300), r'TFLite \(.+\)'),
    ('saved_model', None, r"SavedModel \(no 'predict_images' signature\)"),
])
def test_a_file_that_is_no_artifact_is_named(tmp_path, name, content,
                                             reason):
  path = str(tmp_path / name)
  if content is None:
    _another_programs_saved_model(path)
  else:
    with open(path, 'wb') as f:
      f.write(content)
  with pytest.raises(UsageError) as raised:
    artifacts.load(path)
  [line] = raised.value.lines
  assert re.fullmatch(
      re.escape('--exported_model=%s cannot be read as a ' % path) + reason +
      re.escape(ADVICE), line), line


def test_an_artifact_of_another_end_point_or_size_is_refused(digits_dir,
                                                             tmp_path):
  # An end point's features gave "accuracy 0.00%" and exit 0; an artifact
  # of another image size, a traceback.
  prefix, _ = _untrained_checkpoint(str(tmp_path), 'lenet', [28, 28, 1])
  pool2, large = str(tmp_path / 'pool2.pb'), str(tmp_path / 'large.pb')
  _export('--final_endpoint=pool2', '--checkpoint_path=%s' % prefix,
          '--output_file=%s' % pool2)
  # LeNet's fc3 depends on the image size: a checkpoint of its own.
  os.mkdir(str(tmp_path / 'at_32'))
  prefix_32, _ = _untrained_checkpoint(str(tmp_path / 'at_32'), 'lenet',
                                       [32, 32, 1])
  _export('--image_size=32', '--checkpoint_path=%s' % prefix_32,
          '--output_file=%s' % large)
  expected = {
      pool2: r'error: --exported_model=%s gives outputs of 7x7x64 per '
             r'image, not scores of the 10 classes of the dataset \(with '
             r'--labels_offset\): export it without --final_endpoint, from '
             r'a checkpoint of this dataset',
      large: r'error: --exported_model=%s takes images of 32x32x1 \(height, '
             r'width, channels\); the flags give 28x28x1 \(--model_name\'s '
             r'preprocessing at --eval_image_size, or at its default\): '
             r'export at that size \(--image_size\), or evaluate at the '
             r'artifact\'s with --eval_image_size',
  }
  for path, pattern in expected.items():
    result = run_script(
        'eval_image_classifier.py', '--dataset_name=digits',
        '--dataset_dir=%s' % digits_dir, '--dataset_split_name=test',
        '--model_name=lenet', '--checkpoint_path=%s' % prefix,
        '--exported_model=%s' % path, '--eval_dir=%s' % (tmp_path / 'eval'))
    assert_one_usage_error(result, pattern % path)
  assert not os.path.exists(str(tmp_path / 'eval'))
