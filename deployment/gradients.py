"""The clones' gradients: each on its clone's device, summed per variable
without densifying sparse ones."""

from deployment import clone_losses
from tf2_compat.slim_compat import tf


def _sum_sparse(grads, name):
  """Sums IndexedSlices by concatenation: duplicate indices add up on apply."""
  with tf.name_scope(name):
    values = tf.concat([g.values for g in grads], axis=0)
    indices = tf.concat([g.indices for g in grads], axis=0)
  return tf.IndexedSlices(values, indices, grads[0].dense_shape)


def sum_gradient(grads, name):
  """Sums the gradients of one variable computed on several clones.

  Args:
    grads: list of gradients (Tensors or tf.IndexedSlices), none of them None.
    name: name for the sum op.

  Returns:
    One gradient. When every input is a tf.IndexedSlices, so is the result
    (values and indices concatenated); `tf.add_n` would have converted them
    into a dense tensor of the variable's full shape.
  """
  if len(grads) == 1:
    return grads[0]
  if all(isinstance(g, tf.IndexedSlices) for g in grads):
    return _sum_sparse(grads, name)
  return tf.add_n([tf.convert_to_tensor(g) for g in grads], name=name)


def sum_clones_gradients(clone_grads):
  """Sums gradients across clones, variable by variable.

  Args:
    clone_grads: one list of (gradient, variable) pairs per clone, all lists
      over the same variables in the same order (as `compute_gradients` gives
      them for the same var_list).

  Returns:
    A list of (gradient, variable) pairs, one per variable that has a
    gradient on at least one clone; None gradients are skipped.
  """
  summed = []
  for grads_and_var in zip(*clone_grads):
    var = grads_and_var[0][1]
    grads = [g for g, v in grads_and_var if g is not None]
    for _, v in grads_and_var:
      if v is not var:
        raise ValueError('clones list different variables at one position: '
                         '%s vs %s' % (var.op.name, v.op.name))
    if grads:
      summed.append((sum_gradient(grads, var.op.name + '/sum_grads'), var))
  return summed


def clone_gradients(clones, gradients_fn, regularization_losses=None):
  """Each clone's gradients, on the clone's device, summed over the clones.

  Args:
    clones: the Clones of model_deploy.create_clones.
    gradients_fn: fn(clone_loss) -> (gradient, variable) pairs, e.g. an
      optimizer's compute_gradients; called under the clone's device and
      name scope, for each clone with a loss.
    regularization_losses: added to the first clone's loss; None gathers
      tf.GraphKeys.REGULARIZATION_LOSSES (see clone_losses.gather_losses).

  Returns:
    (gathered, grads_and_vars): the clones' clone_losses.GatheredLosses,
    and their gradients summed per variable (see sum_clones_gradients).
  """

  def on_device(clone, clone_loss):
    with tf.device(clone.device):
      return gradients_fn(clone_loss)

  gathered = clone_losses.gather_losses(clones, regularization_losses,
                                       on_device)
  return gathered, sum_clones_gradients(gathered.results)
