"""Moving averages of the weights, applied after each update.

deploy(variable_averages=...) takes a tf.train.ExponentialMovingAverage.
With most optimizers the step applies it right after the optimizer's
update, to the updated weights. A SyncReplicasOptimizer applies it itself,
once per global step, on the chief; it takes the variables only at
construction, before the model exists, so they are handed to it here.
"""

from tf2_compat.slim_compat import tf


def _variables(variables_to_average):
  if variables_to_average is None:
    variables_to_average = tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)
  if callable(variables_to_average):
    variables_to_average = variables_to_average()
  variables_to_average = list(variables_to_average)
  if not variables_to_average:
    raise ValueError(
        'variable_averages: no variables to average; model_fn created no '
        'model variables (slim layers add theirs), so pass '
        'variables_to_average')
  return variables_to_average


def _give_to_sync_optimizer(optimizer, variable_averages, variables):
  """Makes the chief apply the averages after each aggregated update."""
  # pylint: disable=protected-access
  if optimizer._variable_averages is not None:
    raise ValueError('variable_averages given both to deploy() and to the '
                     'SyncReplicasOptimizer; give it to deploy() only')
  optimizer._variable_averages = variable_averages
  optimizer._variables_to_average = variables
  # pylint: enable=protected-access


def after_apply(optimizer, variable_averages, variables_to_average=None):
  """fn(apply_op) -> the op that runs `apply_op`, then the averages.

  Call once the model's variables exist and before the optimizer's apply
  is built (a SyncReplicasOptimizer is given the averages here).

  Args:
    optimizer: the step's optimizer.
    variable_averages: a tf.train.ExponentialMovingAverage, or None (the
      returned function then returns `apply_op` itself).
    variables_to_average: a list, or a function returning one; None: the
      model variables (slim.get_model_variables()).

  Raises:
    ValueError: no variables to average, or the SyncReplicasOptimizer has
      averages of its own.
  """
  if variable_averages is None:
    return lambda apply_op: apply_op
  variables = _variables(variables_to_average)
  if isinstance(optimizer, tf.train.SyncReplicasOptimizer):
    _give_to_sync_optimizer(optimizer, variable_averages, variables)
    return lambda apply_op: apply_op  # The chief applies them.

  def apply_then_average(apply_op):
    # The shadow variables are created outside these dependencies, by
    # init_scope.
    with tf.control_dependencies([apply_op]):
      return tf.group(apply_op, variable_averages.apply(variables))

  return apply_then_average
