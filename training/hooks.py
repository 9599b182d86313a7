"""Session hooks of the training loop: progress log and checkpoint guard."""

import time


from deployment.slim_compat import tf


class NonFiniteWeightsError(RuntimeError):
  """A checkpoint was about to hold NaN or infinite weights."""


class ProgressLogHook(tf.train.SessionRunHook):
  """Logs step, loss, learning rate, examples/sec and time left.

  Args:
    loss: the total loss tensor.
    learning_rate: the learning-rate tensor.
    examples_per_step: examples this process consumes per step.
    every_n_steps: log period in steps.
    last_step: the step training stops at (None: unknown).
    log_fn: where lines go (tf.logging.info by default).
  """

  def __init__(self, loss, learning_rate, examples_per_step, every_n_steps,
               last_step=None, log_fn=None):
    self._fetches = {'loss': loss, 'learning_rate': learning_rate,
                     'step': tf.train.get_global_step()}
    self._examples_per_step = examples_per_step
    self._every_n_steps = max(1, every_n_steps)
    self._last_step = last_step
    self._log = log_fn or tf.logging.info
    self._local_steps = 0
    self._window_start = None

  def before_run(self, run_context):
    if self._window_start is None:
      self._window_start = time.time()
    return tf.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    self._local_steps += 1
    if self._local_steps % self._every_n_steps:
      return
    now = time.time()
    seconds_per_step = (now - self._window_start) / self._every_n_steps
    self._window_start = now
    values = run_values.results
    line = 'step %d: loss = %.4f, learning rate = %.6g, %.1f examples/sec' % (
        values['step'], values['loss'], values['learning_rate'],
        self._examples_per_step / max(seconds_per_step, 1e-9))
    if self._last_step:
      left = max(0, self._last_step - values['step']) * seconds_per_step
      line += ', %s left' % _format_duration(left)
    self._log(line)


def _format_duration(seconds):
  minutes, seconds = divmod(int(round(seconds)), 60)
  hours, minutes = divmod(minutes, 60)
  if hours:
    return '%dh%02dm' % (hours, minutes)
  if minutes:
    return '%dm%02ds' % (minutes, seconds)
  return '%ds' % seconds


class FiniteWeightsGuard(tf.train.CheckpointSaverListener):
  """Refuses to save a checkpoint whose variables are not all finite.

  The NaN-loss hook stops training at the first NaN loss, but the step that
  produced it may already have written NaN into the weights; this keeps
  them out of train_dir so the last good checkpoint stays the latest.
  """

  def __init__(self, variables):
    checks = [tf.reduce_all(tf.math.is_finite(v)) for v in variables
              if v.dtype.base_dtype.is_floating]
    self._all_finite = tf.reduce_all(tf.stack(checks)) if checks else None

  def before_save(self, session, global_step_value):
    if self._all_finite is not None and not session.run(self._all_finite):
      raise NonFiniteWeightsError(
          'weights became NaN or infinite at step %d; the checkpoint was not '
          'saved. Lower --learning_rate or check the input data.'
          % global_step_value)
