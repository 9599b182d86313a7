"""Session hooks of the training loop: progress log and checkpoint guard."""

import time


from deployment.slim_compat import tf


class NonFiniteWeightsError(RuntimeError):
  """A checkpoint was about to hold NaN or infinite weights."""


class CheckpointWriteError(RuntimeError):
  """Writing a checkpoint failed (a full disk, a read-only directory)."""


class CheckpointSaverHook(tf.train.CheckpointSaverHook):
  """tf.train.CheckpointSaverHook whose failed writes say what happened.

  TensorFlow writes a checkpoint's files first and updates the
  `checkpoint` file that names the latest one last, so a failed write
  leaves the previous checkpoint the latest, readable. This raises
  CheckpointWriteError naming the directory, the step and that checkpoint.
  """

  def _save(self, session, step):
    try:
      return super()._save(session, step)
    except (tf.errors.OpError, OSError) as e:
      latest = tf.train.latest_checkpoint(self._checkpoint_dir)
      raise CheckpointWriteError(
          'writing the checkpoint of step %d to %s failed (%s); the latest '
          'checkpoint is still %s. Free space or fix the directory, then '
          'resume.' % (step, self._checkpoint_dir, _write_error_reason(e),
                       latest or 'none')) from None


def _write_error_reason(error):
  """'File too large' from TF's multi-line 'Graph execution error: ...'."""
  if not isinstance(error, tf.errors.OpError):
    return str(error)
  lines = [line.strip() for line in error.message.splitlines()
           if line.strip() and not line.strip().startswith('[[')]
  # The operating system's reason ends the line naming the file.
  return lines[-1].rsplit('; ', 1)[-1] if lines else type(error).__name__


class ProgressLogHook(tf.train.SessionRunHook):
  """Logs step, loss, learning rate, examples/sec and time left.

  Rates come from the global step, so they are those of the whole run (all
  workers): examples/sec = global steps per second x the global batch of
  the BatchPlan (which counts the replicas a sync step aggregates). The
  first window starts after this process's first step, which also pays for
  the session's start-up.

  Args:
    loss: the total loss tensor.
    learning_rate: the learning-rate tensor.
    global_batch_size: examples one global step consumes.
    every_n_steps: log period, in steps of this process.
    last_step: the global step training stops at (None: unknown).
    log_fn: where lines go (tf.logging.info by default).
  """

  def __init__(self, loss, learning_rate, global_batch_size, every_n_steps,
               last_step=None, log_fn=None):
    self._fetches = {'loss': loss, 'learning_rate': learning_rate,
                     'step': tf.train.get_global_step()}
    self._global_batch_size = global_batch_size
    self._every_n_steps = max(1, every_n_steps)
    self._last_step = last_step
    self._log = log_fn or tf.logging.info
    self._local_steps = 0
    self._window = None  # (time, global step) where the window began.

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._fetches)

  def after_run(self, run_context, run_values):
    values = run_values.results
    now = time.time()
    self._local_steps += 1
    if self._window is None:
      self._window = (now, values['step'])
      return
    if self._local_steps % self._every_n_steps:
      return
    start_time, start_step = self._window
    self._window = (now, values['step'])
    steps_per_second = (values['step'] - start_step) / max(
        now - start_time, 1e-9)
    line = 'step %d: loss = %.4f, learning rate = %.6g, %.1f examples/sec' % (
        values['step'], values['loss'], values['learning_rate'],
        steps_per_second * self._global_batch_size)
    if self._last_step and steps_per_second > 0:
      left = max(0, self._last_step - values['step']) / steps_per_second
      line += ', %s left' % _format_duration(left)
    self._log(line)


class SessionRecoveryLogHook(tf.train.SessionRunHook):
  """Logs each time the monitored session is re-created, and the steps lost.

  MonitoredTrainingSession outlives a ps task that dies and is restarted: a
  step fails with tf.errors.UnavailableError or AbortedError, the session
  is closed and created again, the chief restores the latest checkpoint
  onto the restarted task (the other workers wait until it has), and
  training goes on from that checkpoint's step. The global steps run since
  that checkpoint are run again. TensorFlow logs only the error; this says
  where training resumed and how many steps were lost, as far as this
  worker knows: it sees the global step at its own steps only, so the
  cluster lost the largest of the workers' figures.

  Args:
    log_fn: where lines go (tf.logging.warning by default).
  """

  def __init__(self, log_fn=None):
    self._log = log_fn or tf.logging.warning
    self._global_step = None
    self._sessions = 0
    self._last_step = None  # The global step after this worker's last step.
    self.steps_lost = []  # One figure per re-creation.

  def begin(self):
    self._global_step = tf.train.get_global_step()

  def after_create_session(self, session, coord):
    self._sessions += 1
    if self._sessions == 1:
      return
    step = session.run(self._global_step)
    if self._last_step is None:
      self._log('the session was re-created (a ps task restarted or a '
                'connection dropped) before any step of this worker; '
                'training goes on from global step %d', step)
      return
    lost = max(0, self._last_step - step)
    self.steps_lost.append(lost)
    self._log('the session was re-created (a ps task restarted or a '
              'connection dropped): training goes on from global step %d; '
              'this worker last saw global step %d, so %d step(s) since '
              'the restored checkpoint are run again', step, self._last_step,
              lost)

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    self._last_step = run_values.results


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


def session_hooks(total_loss, is_chief, chief_hooks, hooks):
  """All hooks of a training session, in the order they must run.

  MonitoredSession calls `after_run` hook by hook, in list order, and an
  exception stops the rest and skips every `end` (where the checkpoint
  saver writes its final checkpoint). The NaN-loss hook therefore comes
  first: on a step whose loss is NaN it raises before the checkpoint and
  summary hooks see that step. The chief's hooks are passed here rather
  than as MonitoredTrainingSession's `chief_only_hooks`, which runs them
  before all others. Weights that became non-finite while the loss was
  still finite are kept out of checkpoints by FiniteWeightsGuard.

  Args:
    total_loss: the loss tensor to watch.
    is_chief: whether `chief_hooks` (checkpoints, summaries) are wanted.
    chief_hooks: hooks of the chief only.
    hooks: hooks of every worker.

  Returns:
    The list of hooks to pass as MonitoredTrainingSession's `hooks`.
  """
  nan_hook = tf.train.NanTensorHook(total_loss, fail_on_nan_loss=True)
  return [nan_hook] + (list(chief_hooks) if is_chief else []) + list(hooks)
