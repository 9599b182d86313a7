"""tf2_compat.contrib_stubs: `import tensorflow.contrib...` on TF 2.21."""

import importlib
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from tensorflow.python.ops import lookup_ops
from tf2_compat import contrib_data
from tf2_compat import contrib_hparams
from tf2_compat import contrib_opt
from tf2_compat import contrib_stubs
from tf2_compat import patching
from tf2_compat.slim_compat import slim, tf
from tests.script_runner import REPO, run_script, script_env

# Importing the module installed the stubs; each test installs its own, so
# that no other test module sees them.
contrib_stubs.uninstall()


@pytest.fixture(autouse=True)
def stubs():
  """Installed for each test, removed after: other tests never see them."""
  contrib_stubs.install()
  yield
  contrib_stubs.uninstall()


def test_contrib_slim_is_tf_slim():
  # pylint: disable=g-import-not-at-top
  from tensorflow.contrib import slim as contrib_slim
  import tensorflow.contrib.slim as imported_slim
  import tensorflow
  assert contrib_slim is slim
  assert imported_slim is slim
  assert tensorflow.contrib.slim is slim


@pytest.mark.parametrize('contrib_name, tf_slim_name', [
    ('tensorflow.contrib.slim.nets', 'tf_slim.nets'),
    ('tensorflow.contrib.slim.nets.resnet_v1', 'tf_slim.nets.resnet_v1'),
    ('tensorflow.contrib.slim.python.slim.learning', 'tf_slim.learning'),
    ('tensorflow.contrib.slim.python.slim.data.tfexample_decoder',
     'tf_slim.data.tfexample_decoder'),
    ('tensorflow.contrib.framework.python.ops.arg_scope',
     'tf_slim.ops.arg_scope'),
    ('tensorflow.contrib.layers.python.layers.layers',
     'tf_slim.layers.layers'),
    ('tensorflow.contrib.layers.python.layers.initializers',
     'tf_slim.layers.initializers'),
    ('tensorflow.contrib.layers.python.layers.utils', 'tf_slim.layers.utils'),
    ('tensorflow.contrib.training.python.training.evaluation',
     'tf_slim.training.evaluation'),
    ('tensorflow.contrib.training.python.training.training',
     'tf_slim.training.training'),
    ('tensorflow.contrib.framework.python.framework.checkpoint_utils',
     'tensorflow.python.training.checkpoint_utils'),
    ('tensorflow.contrib.losses.metric_learning',
     'tf_slim.losses.metric_learning'),
])
def test_contrib_modules_tf_slim_took_over_are_tf_slims(contrib_name,
                                                       tf_slim_name):
  assert (importlib.import_module(contrib_name)
          is importlib.import_module(tf_slim_name))


def test_from_import_of_a_submodule_gets_the_tf_slim_module():
  # pylint: disable=g-import-not-at-top
  from tensorflow.contrib.framework.python.ops import variables
  from tensorflow.contrib.slim.nets import vgg
  assert variables is sys.modules['tf_slim.ops.variables']
  assert vgg is sys.modules['tf_slim.nets.vgg']


@pytest.mark.parametrize('module, name, expected', [
    ('framework.python.ops', 'add_arg_scope', lambda: slim.add_arg_scope),
    ('framework.python.ops', 'arg_scope', lambda: slim.arg_scope),
    ('framework.python.ops', 'get_variables_to_restore',
     lambda: slim.get_variables_to_restore),
    ('framework.python.framework', 'load_variable',
     lambda: tf.train.load_variable),
    ('layers.python.layers', 'conv2d', lambda: slim.conv2d),
    ('training.python.training', 'create_train_op',
     lambda: slim.training.create_train_op),
    ('framework', 'arg_scope', lambda: slim.arg_scope),
    ('framework', 'add_arg_scope', lambda: slim.add_arg_scope),
    ('framework', 'get_or_create_global_step',
     lambda: slim.get_or_create_global_step),
    ('framework', 'assign_from_checkpoint_fn',
     lambda: slim.assign_from_checkpoint_fn),
    ('framework', 'get_variables_to_restore',
     lambda: slim.get_variables_to_restore),
    ('framework', 'sort', lambda: tf.sort),
    ('framework', 'load_variable', lambda: tf.train.load_variable),
    ('training', 'create_train_op', lambda: slim.training.create_train_op),
    ('training', 'train', lambda: slim.training.train),
    ('training', 'evaluate_once', lambda: slim.train_eval.evaluate_once),
    ('training', 'checkpoints_iterator',
     lambda: slim.train_eval.checkpoints_iterator),
    ('layers', 'conv2d', lambda: slim.conv2d),
    ('layers', 'xavier_initializer', lambda: slim.xavier_initializer),
    ('layers', 'l2_regularizer', lambda: slim.l2_regularizer),
    ('metrics', 'streaming_accuracy', lambda: slim.metrics.streaming_accuracy),
    ('losses', 'softmax_cross_entropy',
     lambda: slim.losses.softmax_cross_entropy),
])
def test_kept_names_are_the_tf_slim_or_core_objects(module, name, expected):
  contrib_module = importlib.import_module('tensorflow.contrib.' + module)
  assert getattr(contrib_module, name) is expected()


def test_add_arg_scope_from_contribs_internal_path_decorates():
  # pylint: disable=g-import-not-at-top
  from tensorflow.contrib.framework.python.ops import add_arg_scope
  from tensorflow.contrib.framework.python.ops import arg_scope

  @add_arg_scope
  def scaled(value, factor=1):
    return value * factor

  with arg_scope([scaled], factor=3):
    assert scaled(2) == 6


def test_a_module_tf_slim_lacks_under_an_aliased_path_raises_when_called():
  # contrib's training/python/training/ has no tf-slim twin of this one.
  from tensorflow.contrib.training.python.training import sequence_queueing_state_saver as saver  # pylint: disable=g-import-not-at-top,line-too-long
  with pytest.raises(
      contrib_stubs.RemovedInTF2Error,
      match=r'sequence_queueing_state_saver\.batch_sequences_with_states\(\)'):
    saver.batch_sequences_with_states(None, None, None, None, None)


def test_a_homeless_name_under_its_internal_path_is_the_rewritten_one():
  from tensorflow.contrib.training.python.training import hparam  # pylint: disable=g-import-not-at-top
  assert hparam.HParams(learning_rate=0.1).learning_rate == 0.1


def _tf_slim(module, name):
  return lambda: getattr(importlib.import_module('tf_slim.' + module), name)


def _rnn_cell(name):  # As a TF 1.x program's tf.nn.rnn_cell gives it.
  return lambda: getattr(tf.compat.v1.nn.rnn_cell, name)


# A name TF 1.x programs reach through a module of its family, and the
# object the family's name is.
PATHS_BELOW_A_FAMILY = [
    ('layers.summaries', 'summarize_activation',
     _tf_slim('layers.summaries', 'summarize_activation')),
    ('layers.summaries', 'summarize_tensors',
     _tf_slim('layers.summaries', 'summarize_tensors')),
    ('layers.python.layers', 'conv2d', _tf_slim('layers', 'conv2d')),
    ('layers.python.layers.summaries', 'summarize_collection',
     _tf_slim('layers.summaries', 'summarize_collection')),
    ('framework.python.ops', 'add_arg_scope',
     _tf_slim('ops.arg_scope', 'add_arg_scope')),
    ('framework.python.ops.variables', 'model_variable',
     _tf_slim('ops.variables', 'model_variable')),
    ('rnn', 'DropoutWrapper', _rnn_cell('DropoutWrapper')),
    ('rnn', 'ResidualWrapper', _rnn_cell('ResidualWrapper')),
    ('rnn', 'DeviceWrapper', _rnn_cell('DeviceWrapper')),
    ('rnn', 'LSTMStateTuple', _rnn_cell('LSTMStateTuple')),
    ('rnn.python.ops.rnn_cell', 'LSTMCell', _rnn_cell('LSTMCell')),
    ('rnn.python.ops.core_rnn_cell', 'DropoutWrapper',
     _rnn_cell('DropoutWrapper')),
    ('training.python.training.hparam', 'HParams',
     lambda: contrib_hparams.HParams),
]


@pytest.mark.parametrize('module, name, expected', PATHS_BELOW_A_FAMILY)
def test_a_path_tf1_accepted_gives_the_familys_object(module, name,
                                                       expected):
  from_import = getattr(
      importlib.import_module('tensorflow.contrib.' + module), name)
  attributes = contrib_stubs.install()
  for attribute in module.split('.') + [name]:
    attributes = getattr(attributes, attribute)
  assert (from_import, attributes) == (expected(), expected())


def test_a_removed_name_below_a_family_names_the_programs_path():
  from tensorflow.contrib.layers.python.layers import feature_column  # pylint: disable=g-import-not-at-top
  with pytest.raises(contrib_stubs.RemovedInTF2Error) as raised:
    feature_column.real_valued_column('age')
  assert str(raised.value) == (
      'tensorflow.contrib.layers.python.layers.feature_column.'
      'real_valued_column() was removed in TF 2.x; %s'
      % contrib_stubs.MODULE_ADVICE['layers'])


def test_an_rnn_cell_wrapper_of_contrib_wraps_a_cell():
  from tensorflow.contrib import rnn  # pylint: disable=g-import-not-at-top
  cell = rnn.DropoutWrapper(rnn.LSTMCell(4), output_keep_prob=0.5)
  assert cell.output_size == 4


def test_package_attributes_lead_to_the_internal_modules():
  from tensorflow.contrib import layers  # pylint: disable=g-import-not-at-top
  assert layers.python.layers.utils is sys.modules['tf_slim.layers.utils']


def test_contrib_keras_is_tf_keras():
  # pylint: disable=g-import-not-at-top
  import tf_keras
  from tensorflow.contrib import keras
  from tensorflow.contrib.keras.api.keras import layers
  assert keras is tf_keras
  assert layers.Dense is tf_keras.layers.Dense


def test_framework_nest_is_tensorflows_nest():
  from tensorflow.contrib import framework  # pylint: disable=g-import-not-at-top
  assert framework.nest.flatten({'a': 1, 'b': [2, 3]}) == [1, 2, 3]


@pytest.mark.parametrize('target', sorted(contrib_stubs.REPLACEMENTS.values()))
def test_every_replacement_exists_on_this_tensorflow(target):
  assert patching.resolve(target) is not None  # Raises when it is missing.


@pytest.mark.parametrize('source', sorted(
    {source for sources in contrib_stubs.SOURCES.values()
     for source in sources} | {
         target for target in contrib_stubs.ALIASES.values() if target}))
def test_every_tf_slim_module_named_exists(source):
  assert isinstance(contrib_stubs.source_module(source), types.ModuleType)


def test_quantize_imports_and_its_calls_name_the_replacement():
  # The import line of upstream's train_image_classifier.py.
  from tensorflow.contrib import quantize as contrib_quantize  # pylint: disable=g-import-not-at-top
  with pytest.raises(contrib_stubs.RemovedInTF2Error) as raised:
    contrib_quantize.create_training_graph(quant_delay=0)
  assert str(raised.value) == (
      'tensorflow.contrib.quantize.create_training_graph() was removed in '
      'TF 2.x; build the network quantization-aware instead: '
      'nets.quantize.quantization_aware() around it '
      '(train_image_classifier.py --quantize_delay does so), or the TF Model '
      'Optimization Toolkit for Keras models')


@pytest.mark.parametrize('name, replacement', [
    # From TensorFlow's own upgrade tables (tf_upgrade_v2).
    # Renamed by the tool, which rewrites the arguments of a call too: the
    # renamed object called as TF 1.x called it would misbehave.
    ('summary.scalar', 'use tf.compat.v2.summary.scalar'),
    ('image.rotate', 'TensorFlow Addons had it as tfa.image.rotate'),
    # From NAME_ADVICE and MODULE_ADVICE.
    ('training.bucket_by_sequence_length',
     'use tf.data.Dataset.bucket_by_sequence_length'),
    ('framework.with_shape', 'use tf_slim for arg scopes and variable '
                             'helpers'),
    ('quantize.experimental_create_eval_graph', 'quantization_aware()'),
    ('tpu.TPUEstimator', 'use tf.compat.v1.tpu or tf.distribute.'
                         'TPUStrategy'),
    ('no_such_module.anything', 'tensorflow.contrib was removed in TF 2.0'),
])
def test_a_removed_call_names_itself_and_what_replaces_it(name, replacement):
  module_name, attribute = name.split('.')
  module = importlib.import_module('tensorflow.contrib.' + module_name)
  removed = getattr(module, attribute)
  with pytest.raises(contrib_stubs.RemovedInTF2Error) as raised:
    removed()
  message = str(raised.value)
  assert message.startswith('tensorflow.contrib.%s() was removed in TF 2.x; '
                            % name)
  assert replacement in message


@pytest.mark.parametrize('module, name, expected', [
    ('data', 'AUTOTUNE', lambda: tf.data.experimental.AUTOTUNE),
    ('rnn', 'LSTMStateTuple', lambda: tf.nn.rnn_cell.LSTMStateTuple),
    # From TensorFlow's upgrade tables, renames that change nothing else.
    ('util', 'constant_value', lambda: tf.get_static_value),
    ('data', 'parallel_interleave',
     lambda: tf.data.experimental.parallel_interleave),
    ('rnn', 'LSTMCell', lambda: tf.nn.rnn_cell.LSTMCell),
    ('cluster_resolver', 'TFConfigClusterResolver',
     lambda: tf.distribute.cluster_resolver.TFConfigClusterResolver),
    # Re-exported by TF 1.x's contrib under their own names.
    ('lookup', 'HashTable', lambda: lookup_ops.HashTable),
    ('lookup', 'KeyValueTensorInitializer',
     lambda: tf.lookup.KeyValueTensorInitializer),
    ('lookup', 'index_to_string_table_from_tensor',
     lambda: lookup_ops.index_to_string_table_from_tensor),
    ('data', 'TFRecordDataset', lambda: tf.data.TFRecordDataset),
    ('data', 'map_and_batch', lambda: tf.data.experimental.map_and_batch),
    # Homeless: written again here.
    ('training', 'HParams', lambda: contrib_hparams.HParams),
    ('opt', 'MovingAverageOptimizer',
     lambda: contrib_opt.MovingAverageOptimizer),
    ('data', 'batch_and_drop_remainder',
     lambda: contrib_data.batch_and_drop_remainder),
])
def test_names_with_a_tf2_home_are_that_object(module, name, expected):
  contrib_module = importlib.import_module('tensorflow.contrib.' + module)
  assert getattr(contrib_module, name) is expected()


def test_a_source_this_tensorflow_lacks_leaves_its_names_removed(
    monkeypatch):
  # As rnn's cells are with Keras 3 (TF_USE_LEGACY_KERAS=0).
  monkeypatch.setitem(contrib_stubs.SOURCES, 'rnn',
                      ('tensorflow.compat.v1:nn.no_such_module',))
  from tensorflow.contrib import rnn  # pylint: disable=g-import-not-at-top
  assert repr(rnn.LSTMStateTuple) == (
      '<removed in TF 2.x: tensorflow.contrib.rnn.LSTMStateTuple>')


def test_isinstance_of_contribs_lstm_state_tuple_is_true_of_a_state():
  from tensorflow.contrib import rnn  # pylint: disable=g-import-not-at-top
  state = tf.nn.rnn_cell.LSTMStateTuple(c=1.0, h=2.0)
  assert isinstance(state, rnn.LSTMStateTuple)


# A removed name used as each of these: how the error says it was used.
VALUE_USES = [
    pytest.param(lambda removed: isinstance(1, removed),
                 'given to isinstance()', id='isinstance'),
    pytest.param(lambda removed: issubclass(int, removed),
                 'given to issubclass()', id='issubclass'),
    pytest.param(lambda removed: removed == 'MirroredStrategy', 'compared',
                 id='equals'),
    pytest.param(lambda removed: 'MirroredStrategy' in [removed], 'compared',
                 id='in_a_list'),
    pytest.param(lambda removed: removed < 1, 'compared', id='less_than'),
    pytest.param(lambda removed: removed + 1, 'used in arithmetic',
                 id='plus'),
    pytest.param(lambda removed: range(removed), 'used as a number',
                 id='range'),
    pytest.param(lambda removed: list(removed), 'iterated', id='list'),
    pytest.param(lambda removed: np.asarray(removed),
                 'converted to a NumPy array', id='numpy'),
    pytest.param(lambda removed: tf.convert_to_tensor(removed),
                 'converted to a tensor', id='tensor'),
    pytest.param(lambda removed: tf.data.Dataset.range(3).map(
        tf.identity, num_parallel_calls=removed), 'converted to a tensor',
                 id='num_parallel_calls'),
    pytest.param(lambda removed: removed.num_replicas_in_sync,
                 'read (.num_replicas_in_sync)', id='attribute'),
    pytest.param(lambda removed: removed._extended, 'read (._extended)',  # pylint: disable=protected-access
                 id='private_attribute'),
]


@pytest.mark.parametrize('use, how', VALUE_USES)
def test_a_removed_name_used_as_a_value_names_itself_and_the_replacement(
    use, how):
  from tensorflow.contrib import distribute  # pylint: disable=g-import-not-at-top
  with pytest.raises(contrib_stubs.RemovedNameUsedError) as raised:
    use(distribute.MirroredStrategy)
  assert str(raised.value) == (
      'tensorflow.contrib.distribute.MirroredStrategy was removed in TF 2.x, '
      'so it cannot be %s; use tf.distribute' % how)


# A feature test of a removed name, and what TF 1.x's class answered.
FEATURE_TESTS = [
    pytest.param(bool, True, id='truth'),
    pytest.param(lambda removed: removed is None, False, id='is_none'),
    pytest.param(callable, True, id='callable'),
    pytest.param(lambda removed: removed.__name__, 'MirroredStrategy',
                 id='name'),
    pytest.param(lambda removed: getattr(removed, '__name__', None),
                 'MirroredStrategy', id='getattr_name'),
]


@pytest.mark.parametrize('feature_test, tf1_answer', FEATURE_TESTS)
def test_a_feature_test_of_a_removed_name_answers_as_tf1_did(
    feature_test, tf1_answer):
  from tensorflow.contrib import distribute  # pylint: disable=g-import-not-at-top
  assert feature_test(distribute.MirroredStrategy) == tf1_answer


def test_a_removed_attribute_read_with_a_default_stops_rather_than_default():
  # TF 1.x's class had the attribute; a default would be another branch.
  from tensorflow.contrib import distribute  # pylint: disable=g-import-not-at-top
  with pytest.raises(contrib_stubs.RemovedNameUsedError,
                     match=r'cannot be read \(\.extended\)'):
    getattr(distribute.MirroredStrategy, 'extended', None)


def test_a_removed_name_can_be_a_dict_key():
  from tensorflow.contrib import rnn  # pylint: disable=g-import-not-at-top
  cells = {rnn.LSTMBlockCell: 'lstm_block', rnn.GRUBlockCell: 'gru_block'}
  assert cells[rnn.GRUBlockCell] == 'gru_block'


# What the tester of issue 26 ran, under `run_slim --tf1`.
VALUES_PROGRAM = """\
import tensorflow as tf
dataset = tf.data.Dataset.range(3).map(
    lambda x: x * 2, num_parallel_calls=tf.contrib.data.AUTOTUNE)
doubled = tf.data.make_one_shot_iterator(dataset).get_next()
with tf.Session() as session:
  print('doubled', [int(session.run(doubled)) for _ in range(3)])
state = tf.nn.rnn_cell.LSTMStateTuple(c=1.0, h=2.0)
print('a state', isinstance(state, tf.contrib.rnn.LSTMStateTuple))
if tf.contrib.distribute.MirroredStrategy:
  print('branch: contrib')
else:
  print('branch: fallback')
print('a block cell', isinstance(state, tf.contrib.rnn.LSTMBlockCell))
"""


def test_tf1_contrib_names_as_values_resolve_take_tf1s_branch_or_stop(tmp_path):
  path = tmp_path / 'values.py'
  path.write_text(VALUES_PROGRAM)
  result = subprocess.run(
      [sys.executable, '-m', 'tf2_compat.run_slim', '--tf1', str(path)],
      cwd=REPO, env=script_env(), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, timeout=180, check=False)
  assert result.returncode == 2, result.stderr
  assert result.stdout.splitlines() == [
      'doubled [0, 2, 4]', 'a state True', 'branch: contrib']
  assert result.stderr == (
      'error: %s:13: tensorflow.contrib.rnn.LSTMBlockCell was removed in TF '
      '2.x, so it cannot be given to isinstance(); use '
      'tf.compat.v1.nn.rnn_cell, or tf.keras.layers (LSTM, GRU, RNN)\n'
      % path)


# The feature test of the issue, as a TF 1.x program writes it.
FEATURE_TEST_PROGRAM = """\
import tensorflow as tf
if tf.contrib.distribute.MirroredStrategy:
  print('branch: contrib')
  strategy = tf.contrib.distribute.MirroredStrategy(num_gpus=2)
else:
  print('branch: fallback')
"""


def test_tf1_feature_test_takes_tf1s_branch_and_stops_at_the_first_use(
    tmp_path):
  path = tmp_path / 'strategy.py'
  path.write_text(FEATURE_TEST_PROGRAM)
  result = run_script(os.path.join('tf2_compat', 'run_slim.py'), '--tf1',
                      str(path))
  assert result.returncode == 1, result.stdout
  assert result.stdout == (
      'branch: contrib\n'
      'error: %s:4: tensorflow.contrib.distribute.MirroredStrategy() was '
      'removed in TF 2.x; use tf.distribute\n' % path)


def test_subclassing_a_removed_class_raises():
  from tensorflow.contrib import rnn  # pylint: disable=g-import-not-at-top
  with pytest.raises(contrib_stubs.RemovedInTF2Error, match='LSTMBlockCell'):
    class MyCell(rnn.LSTMBlockCell):  # pylint: disable=unused-variable
      pass


def test_from_import_of_a_removed_name_works_until_called():
  # pylint: disable=g-import-not-at-top
  from tensorflow.contrib.training import GreedyLoadBalancingStrategy
  from tensorflow.contrib.learn.python.learn import learn_runner
  assert repr(GreedyLoadBalancingStrategy) == (
      '<removed in TF 2.x: '
      'tensorflow.contrib.training.GreedyLoadBalancingStrategy>')
  with pytest.raises(contrib_stubs.RemovedInTF2Error,
                     match=r'learn\.python\.learn\.learn_runner\.run\(\)'):
    learn_runner.run(None)


def test_dunder_lookups_stay_attribute_errors():
  from tensorflow.contrib import quantize  # pylint: disable=g-import-not-at-top
  assert not hasattr(quantize, '__wrapped__')
  assert not hasattr(quantize.create_training_graph, '__wrapped__')


def test_install_leaves_a_real_contrib_package_alone(monkeypatch):
  contrib_stubs.uninstall()
  real = object()
  monkeypatch.setattr(contrib_stubs.importlib.util, 'find_spec',
                      lambda name: real)
  monkeypatch.setitem(sys.modules, 'tensorflow.contrib', real)
  assert contrib_stubs.install() is real
  assert not contrib_stubs.installed()


def test_install_twice_adds_one_finder():
  contrib_stubs.install()
  assert sys.meta_path.count(contrib_stubs._FINDER) == 1  # pylint: disable=protected-access


def test_uninstall_makes_contrib_unimportable_again():
  import tensorflow  # pylint: disable=g-import-not-at-top
  importlib.import_module('tensorflow.contrib.quantize')
  contrib_stubs.uninstall()
  assert not contrib_stubs.installed()
  assert not any(name.startswith('tensorflow.contrib') for name in sys.modules)
  assert not hasattr(tensorflow, 'contrib')
  with pytest.raises(ImportError):
    importlib.import_module('tensorflow.contrib.quantize')
