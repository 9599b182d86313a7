"""slim.assign_from_checkpoint restores partitioned variables on NumPy 2."""

import os

import numpy as np
import pytest

from tf2_compat import slim_numpy2
from tf2_compat.slim_compat import slim, tf

VALUES = np.arange(24, dtype=np.float32).reshape(6, 4)


def _partitioned(name, initializer):
  """A 6x4 variable in 3 partitions of 2 rows."""
  return tf.get_variable(name, [6, 4], initializer=initializer,
                         partitioner=tf.fixed_size_partitioner(3))


@pytest.fixture
def checkpoint(tmp_path):
  """A checkpoint of 'table' (VALUES, saved in 3 partitions) and 'bias'."""
  with tf.Graph().as_default():
    table = _partitioned('table', tf.zeros_initializer())
    tf.get_variable('bias', [2], initializer=tf.constant_initializer(7.0))
    rows = [part.assign(VALUES[2 * i:2 * i + 2])
            for i, part in enumerate(table)]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      session.run(rows)
      return tf.train.Saver().save(session, os.path.join(tmp_path, 'ckpt'))


def _restore(checkpoint_path, var_list_of, **kwargs):
  with tf.Graph().as_default():
    table = _partitioned('table', tf.zeros_initializer())
    bias = tf.get_variable('bias', [2], initializer=tf.zeros_initializer())
    assign_op, feed_dict = slim.assign_from_checkpoint(
        checkpoint_path, var_list_of(list(table), bias), **kwargs)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      session.run(assign_op, feed_dict)
      return session.run([tf.concat(list(table), axis=0), bias])


@pytest.mark.parametrize('var_list_of', [
    lambda parts, bias: parts + [bias],
    lambda parts, bias: {'table': parts, 'bias': bias},
    lambda parts, bias: {'table': parts, 'bias': [bias]},
], ids=['list', 'dict', 'dict_of_lists'])
def test_partitions_and_whole_variables_are_restored(checkpoint, var_list_of):
  table, bias = _restore(checkpoint, var_list_of)
  np.testing.assert_array_equal(table, VALUES)
  np.testing.assert_array_equal(bias, [7.0, 7.0])


def test_without_the_fix_partitions_fail_on_numpy_2(checkpoint):
  # Pins what slim_numpy2 is for: when this fails, tf-slim or NumPy changed.
  slim_numpy2.uninstall()
  try:
    with pytest.raises(IndexError, match='valid indices'):
      _restore(checkpoint, lambda parts, bias: parts)
  finally:
    slim_numpy2.install()


def test_a_missing_partitioned_variable_raises_as_tf_slim_does(checkpoint):
  with pytest.raises(ValueError,
                     match=r'Checkpoint is missing variable \[other\]'):
    _restore(checkpoint, lambda parts, bias: {'other': parts})


def test_a_missing_partitioned_variable_can_be_ignored(checkpoint):
  table, bias = _restore(checkpoint,
                         lambda parts, bias: {'other': parts, 'bias': bias},
                         ignore_missing_vars=True)
  np.testing.assert_array_equal(table, np.zeros([6, 4]))
  np.testing.assert_array_equal(bias, [7.0, 7.0])


def test_a_checkpoint_prefix_is_read_even_beside_a_folder_of_its_name(
    tmp_path):
  # tf-slim reads model_path as a prefix, as its own tests save them.
  prefix = str(tmp_path / 'model')
  os.makedirs(prefix)
  with tf.Graph().as_default():
    table = _partitioned('table', tf.ones_initializer())
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      tf.train.Saver().save(session, prefix)
  table, _ = _restore(prefix, lambda parts, bias: parts)
  np.testing.assert_array_equal(table, np.ones([6, 4]))


def test_assign_from_checkpoint_fn_restores_partitions(checkpoint):
  with tf.Graph().as_default():
    table = _partitioned('table', tf.zeros_initializer())
    init_fn = slim.assign_from_checkpoint_fn(checkpoint, list(table))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      init_fn(session)
      np.testing.assert_array_equal(
          session.run(tf.concat(list(table), axis=0)), VALUES)


def test_installed_on_both_names_once():
  assert slim_numpy2.installed()
  assert slim_numpy2.install() == []
  assert slim.assign_from_checkpoint is not (
      slim.assign_from_checkpoint._slim_compat_original)  # pylint: disable=protected-access
