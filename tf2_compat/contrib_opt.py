"""`tf.contrib.opt.MovingAverageOptimizer` for TF 1.x programs, on TF 2.x.

An optimizer that keeps an exponential moving average of every variable
it updates, and a saver that writes those averages under the variables'
own names, so that evaluation and export restore the averaged model with a
plain Saver:

  optimizer = MovingAverageOptimizer(
      tf.train.MomentumOptimizer(0.01, 0.9), average_decay=0.999)
  train_op = optimizer.minimize(loss, global_step=global_step)
  saver = optimizer.swapping_saver()   # After minimize/apply_gradients.

As in TF 1.x, the averages are updated after the wrapped optimizer's
update (`sequential_update=True`) or beside it, and `swapping_saver` saves
each average under its variable's name and the variable under the
average's name (so a restore with the same saver puts each back).
"""

from tf2_compat.slim_compat import tf


class MovingAverageOptimizer(tf.train.Optimizer):
  """Wraps `opt`, averaging the variables it updates (see the module)."""

  def __init__(self, opt, average_decay=0.9999, num_updates=None,
               sequential_update=True):
    super().__init__(use_locking=False, name='MovingAverageOptimizer')
    self._optimizer = opt
    self._ema = tf.train.ExponentialMovingAverage(average_decay,
                                                  num_updates=num_updates)
    self._sequential_update = sequential_update
    self._swapped_names = None

  def compute_gradients(self, *args, **kwargs):
    return self._optimizer.compute_gradients(*args, **kwargs)

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    grads_and_vars = list(grads_and_vars)
    train_op = self._optimizer.apply_gradients(
        grads_and_vars, global_step=global_step, name=name)
    variables = [var for grad, var in grads_and_vars if grad is not None]
    if self._sequential_update:
      with tf.control_dependencies([train_op]):
        average_op = self._ema.apply(variables)
    else:
      average_op = self._ema.apply(variables)
    self._swapped_names = {}
    for var in variables:
      average = self._ema.average(var).op.name
      self._swapped_names[var.op.name] = average
      self._swapped_names[average] = var.op.name
    return tf.group(train_op, average_op, name='train_with_avg')

  def get_slot(self, var, name):
    return self._optimizer.get_slot(var, name)

  def get_slot_names(self):
    return self._optimizer.get_slot_names()

  def variables(self):
    return self._optimizer.variables()

  def swapping_saver(self, var_list=None, name='swapping_saver', **kwargs):
    """A tf.train.Saver that saves each average under its variable's name
    and the variable under its average's.

    Args:
      var_list: the variables to save (a list, or a dict of checkpoint
        names); None: every global variable.
      name: the saver's name.
      **kwargs: passed to tf.train.Saver.

    Raises:
      RuntimeError: before apply_gradients (or minimize) made the averages.
    """
    if self._swapped_names is None:
      raise RuntimeError('swapping_saver() needs the moving averages: call '
                         'apply_gradients() or minimize() first')
    if var_list is None:
      var_list = tf.global_variables()
    if not isinstance(var_list, dict):
      var_list = {var.op.name: var for var in var_list}
    by_name = {var.op.name: var for var in var_list.values()}
    by_name.update((var.op.name, var) for var in tf.global_variables())
    swapped = {}
    for key, var in var_list.items():
      other = self._swapped_names.get(var.op.name)
      swapped[key] = by_name[other] if other in by_name else var
    return tf.train.Saver(swapped, name=name, **kwargs)
