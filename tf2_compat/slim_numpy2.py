"""tf-slim 1.1.0 on NumPy 2: the one library call written for NumPy 1.x.

`slim.assign_from_checkpoint` (and `assign_from_checkpoint_fn`, which calls
it) cuts out the part of a checkpoint value that each partition of a
partitioned variable holds with `value[[slice(...), slice(...)]]`. NumPy
1.23 stopped reading a list of slices as a tuple, so every partitioned
variable fails with "IndexError: only integers, slices (`:`), ellipsis
(`...`), numpy.newaxis (`None`) and integer or boolean arrays are valid
indices" (tf-slim's own `testLoadPartitionedVariables` finds it once its
test code is fixed for NumPy 2; see docs/tf_slim_test_suite.md).

`install()` wraps the function: partitions are assigned here, cut with a
tuple; every other variable still goes through tf-slim's code. A call
without partitioned variables is tf-slim's call. `uninstall()` puts the
function back.
"""

import collections
import functools
import importlib

import tensorflow.compat.v1 as tf
from tf2_compat import patching


def _slice_info(variable):
  return getattr(variable, '_save_slice_info', None)


def _split_partitions(var_list):
  """Splits var_list into (the rest, {checkpoint name: [partitions]}).

  The rest has var_list's form: a list, or a dict from checkpoint names to
  a variable or a list of variables.
  """
  partitions = collections.OrderedDict()
  if not isinstance(var_list, dict):
    rest = []
    for variable in var_list:
      info = _slice_info(variable)
      if info is None:
        rest.append(variable)
      else:
        partitions.setdefault(info.full_name, []).append(variable)
    return rest, partitions
  rest = {}
  for name, value in var_list.items():
    variables = list(value) if isinstance(value, (list, tuple)) else [value]
    sliced = [v for v in variables if _slice_info(v) is not None]
    whole = [v for v in variables if _slice_info(v) is None]
    if sliced:
      partitions.setdefault(name, []).extend(sliced)
    if whole:
      rest[name] = whole if isinstance(value, (list, tuple)) else whole[0]
  return rest, partitions


def _assign_partitions(model_path, partitions, ignore_missing_vars):
  """Assign ops and their feeds for each partition, as tf-slim means them."""
  # The reader tf-slim uses: model_path is a prefix, even where a folder of
  # that name exists (load_checkpoint would look inside the folder).
  reader = tf.train.NewCheckpointReader(model_path)
  assign_ops, feed_dict = [], {}
  for name, variables in partitions.items():
    if not reader.has_tensor(name):
      message = 'Checkpoint is missing variable [%s]' % name
      if not ignore_missing_vars:
        raise ValueError(message)
      tf.logging.warning(message)
      continue
    value = reader.get_tensor(name)
    for variable in variables:
      info = _slice_info(variable)
      part = tuple(slice(offset, offset + size)
                   for offset, size in zip(info.var_offset, info.var_shape))
      placeholder = tf.placeholder(variable.dtype.base_dtype,
                                   variable.get_shape(),
                                   name='placeholder/' + variable.op.name)
      assign_ops.append(variable.assign(placeholder))
      feed_dict[placeholder] = value[part].reshape(info.var_shape)
  return assign_ops, feed_dict


def _assigning_partitions_here(assign_from_checkpoint):
  @functools.wraps(assign_from_checkpoint)
  def wrapper(model_path, var_list, ignore_missing_vars=False):
    rest, partitions = _split_partitions(var_list)
    if not partitions:
      return assign_from_checkpoint(model_path, var_list, ignore_missing_vars)
    assign_op, feed_dict = assign_from_checkpoint(model_path, rest,
                                                  ignore_missing_vars)
    partition_ops, partition_feeds = _assign_partitions(
        model_path, partitions, ignore_missing_vars)
    feed_dict.update(partition_feeds)
    return tf.group(assign_op, *partition_ops), feed_dict
  return wrapper


def _targets():
  # tf_slim binds the function again at import (`from ... import *`).
  return tuple((importlib.import_module(owner), 'assign_from_checkpoint',
                _assigning_partitions_here)
               for owner in ('tf_slim.ops.variables', 'tf_slim'))


def installed():
  return patching.installed(_targets())


def install():
  """Wraps slim.assign_from_checkpoint; returns the names wrapped now."""
  return patching.install(_targets())


def uninstall():
  patching.uninstall(_targets())
