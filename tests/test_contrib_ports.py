"""The contrib pieces TF 2.x has no home for, written again with their TF
1.x behaviour: tf2_compat.contrib_hparams, contrib_data, contrib_opt."""

import numpy as np
import pytest

from tf2_compat.contrib_data import batch_and_drop_remainder
from tf2_compat.contrib_data import padded_batch_and_drop_remainder
from tf2_compat.contrib_hparams import HParams
from tf2_compat.contrib_opt import MovingAverageOptimizer
from tf2_compat import contrib_tfprof
from tf2_compat.slim_compat import tf


def _hparams():
  return HParams(learning_rate=0.1, steps=100, layers=[64, 32],
                 use_bn=True, optimizer='adam')


def test_hparams_parse_overrides_scalars_lists_and_indices():
  hparams = _hparams().parse(
      'learning_rate=0.05, layers=[16,8,4],use_bn=false,optimizer=sgd,'
      'steps=7')
  assert hparams.values() == {'learning_rate': 0.05, 'steps': 7,
                              'layers': [16, 8, 4], 'use_bn': False,
                              'optimizer': 'sgd'}
  assert _hparams().parse('layers[1]=3').layers == [64, 3]


def test_hparams_keep_each_type_and_make_an_int_a_float():
  hparams = _hparams()
  hparams.set_hparam('learning_rate', 1)
  assert hparams.learning_rate == 1.0
  assert isinstance(hparams.learning_rate, float)
  with pytest.raises(ValueError, match=r'steps is of type int; got 0\.5'):
    hparams.set_hparam('steps', 0.5)
  with pytest.raises(ValueError, match='use_bn is of type bool; got 1'):
    hparams.set_hparam('use_bn', 1)
  with pytest.raises(ValueError, match='layers is a list'):
    hparams.set_hparam('layers', 3)
  with pytest.raises(ValueError, match="cannot parse 'fast' as the float"):
    hparams.parse('learning_rate=fast')
  with pytest.raises(ValueError, match='unknown hyperparameter momentum'):
    hparams.parse('momentum=0.9')
  with pytest.raises(ValueError, match=r'write layers=\[8\]'):
    hparams.parse('layers=8')


def test_hparams_json_dict_get_and_names():
  hparams = _hparams()
  assert hparams.to_json(sort_keys=True) == (
      '{"layers": [64, 32], "learning_rate": 0.1, "optimizer": "adam", '
      '"steps": 100, "use_bn": true}')
  hparams.parse_json('{"steps": 5, "layers": [1]}')
  hparams.override_from_dict({'optimizer': 'momentum'})
  assert (hparams.steps, hparams.layers, hparams.optimizer) == (
      5, [1], 'momentum')
  assert hparams.get('steps', 1) == 5
  assert hparams.get('missing', 'x') == 'x'
  with pytest.raises(ValueError, match='steps is of type int'):
    hparams.get('steps', 'many')
  assert 'steps' in hparams and 'missing' not in hparams
  hparams.add_hparam('momentum', 0.9)
  hparams.del_hparam('optimizer')
  assert sorted(hparams.values()) == [
      'layers', 'learning_rate', 'momentum', 'steps', 'use_bn']
  with pytest.raises(ValueError, match='reserved or taken: values'):
    hparams.add_hparam('values', 1)
  assert repr(HParams(a=1)) == "HParams([('a', 1)])"


def _batches(dataset):
  return [tuple(np.asarray(part).tolist() for part in batch)
          if isinstance(batch, tuple) else np.asarray(batch).tolist()
          for batch in dataset.as_numpy_iterator()]


def test_batch_and_drop_remainder_batches_whole_batches_only():
  dataset = tf.data.Dataset.range(7).apply(batch_and_drop_remainder(3))
  assert dataset.element_spec.shape.as_list() == [3]
  assert _batches(dataset) == [[0, 1, 2], [3, 4, 5]]


def test_padded_batch_and_drop_remainder_pads_to_the_longest():
  dataset = tf.data.Dataset.range(1, 6).map(
      lambda n: tf.fill([n], n)).apply(
          padded_batch_and_drop_remainder(2, [None]))
  assert _batches(dataset) == [[[1, 0], [2, 2]], [[3, 3, 3, 0],
                                                  [4, 4, 4, 4]]]


def test_moving_average_optimizer_averages_after_each_update(tmp_path):
  with tf.Graph().as_default():
    weight = tf.get_variable('w', initializer=1.0)
    optimizer = MovingAverageOptimizer(
        tf.train.GradientDescentOptimizer(0.5), average_decay=0.5)
    with pytest.raises(RuntimeError, match='call apply_gradients'):
      optimizer.swapping_saver()
    train_op = optimizer.minimize(2.0 * weight)  # Gradient 2: w -= 1.
    average = optimizer._ema.average(weight)  # pylint: disable=protected-access
    saver = optimizer.swapping_saver()
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      values = []
      for _ in range(3):
        session.run(train_op)
        values.append(session.run([weight, average]))
      # w: 0, -1, -2; the average starts at 1, then 0.5 a + 0.5 w.
      assert values == [[0.0, 0.5], [-1.0, -0.25], [-2.0, -1.125]]
      path = saver.save(session, str(tmp_path / 'model.ckpt'))
  assert tf.train.load_variable(path, 'w') == -1.125
  assert tf.train.load_variable(path, 'w/ExponentialMovingAverage') == -2.0


def test_print_model_analysis_counts_the_trainable_parameters(capfd):
  with tf.Graph().as_default() as graph:
    with tf.variable_scope('net'):
      tf.get_variable('weights', [3, 4])
      tf.get_variable('biases', [4])
    tf.get_variable('step', [], trainable=False)
    profile = contrib_tfprof.print_model_analysis(graph)
  assert profile.total_parameters == 16
  assert 'net/weights (3x4, 12/12 params)' in capfd.readouterr().out
