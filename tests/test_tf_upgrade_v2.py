"""What TF 2.21's own tf_upgrade_v2 leaves of a TF 1.x Slim program.

docs/migration.md tells users which TF 1.x calls the upgrade
script does not convert; these tests run the script's converter (the code
behind the `tf_upgrade_v2` command) on those calls, and pin what the
unconverted calls then do on TF 2.21. They check that page's advice, not
the tool: they fail, and the page must change, when a TensorFlow release
changes what the tool converts or what the unconverted calls do.
"""

import pytest

from tf2_compat.slim_compat import tf
import tensorflow as tf2  # pylint: disable=g-import-not-at-top,wrong-import-order
from tensorflow.tools.compatibility import ast_edits
from tensorflow.tools.compatibility import tf_upgrade_v2


def _upgraded(tmp_path, line):
  source, target = tmp_path / 'tf1.py', tmp_path / 'tf2.py'
  source.write_text('import tensorflow as tf\n%s\n' % line)
  upgrader = ast_edits.ASTCodeUpgrader(tf_upgrade_v2.TFAPIChangeSpec())
  upgrader.process_file(str(source), str(target))
  return target.read_text().splitlines()[1]


@pytest.mark.parametrize('line', [
    "a = tf.summary.scalar('loss', loss)",
    "a = tf.summary.histogram('weights', weights)",
    "a = tf.summary.image('images', images)",
    'a = tf.layers.dropout(net, 0.5, training=True)',
    'a = tf.image.draw_bounding_boxes(images, boxes)',
    'slim = tf.contrib.slim',
])
def test_tf_upgrade_v2_leaves_these_tf1_calls_as_they_are(tmp_path, line):
  assert _upgraded(tmp_path, line) == line


@pytest.mark.parametrize('line, upgraded', [
    ('a = tf.summary.merge([a])', 'a = tf.compat.v1.summary.merge([a])'),
    ('a = tf.nn.dropout(net, keep_prob=0.8)',
     'a = tf.nn.dropout(net, rate=1 - (0.8))'),
    ('flags = tf.app.flags', 'flags = tf.compat.v1.app.flags'),
])
def test_tf_upgrade_v2_converts_these(tmp_path, line, upgraded):
  assert _upgraded(tmp_path, line) == upgraded


def test_tf2_summary_scalar_then_tf1_merge_is_a_type_error(graph):
  scalar = tf2.summary.scalar('loss', 1.0)  # No default writer: a bool.
  assert scalar.dtype == tf.bool
  with pytest.raises(TypeError, match='have types \\[bool\\]'):
    tf.summary.merge([scalar])


def test_tf2_draw_bounding_boxes_requires_colors(graph):
  with pytest.raises(TypeError, match='Missing required positional argument'):
    tf2.image.draw_bounding_boxes(tf.zeros([1, 4, 4, 3]), tf.zeros([1, 1, 4]))


def test_tf2_has_no_tf_layers():
  assert not hasattr(tf2, 'layers')
