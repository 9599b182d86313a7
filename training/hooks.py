"""Session hooks of the training loop: progress log, NaN, skipped-update
and checkpoint guards."""

import os
import time

import numpy as np

from clusters import script_contract
from deployment import collectives
from deployment import precision
from tf2_compat.slim_compat import tf
from training import failed_saves
from training.errors import NonFiniteGradients


class NonFiniteWeightsError(RuntimeError):
  """A checkpoint was about to hold NaN or infinite weights; `history` is
  the chief's CheckpointHistory (or None)."""

  def __init__(self, message, history=None):
    super().__init__(message)
    self.history = history


class CheckpointWriteError(RuntimeError):
  """Writing a checkpoint failed (a full disk, a read-only directory);
  `lasting` says whether a restart would meet the same failure."""

  def __init__(self, message, lasting=False):
    super().__init__(message)
    self.lasting = lasting


class CheckpointSaverHook(tf.train.CheckpointSaverHook):
  """tf.train.CheckpointSaverHook whose failed writes say what happened and
  leave no temporary file.

  TensorFlow writes a checkpoint's files first and updates the
  `checkpoint` file that names the latest one last, so a failed write
  leaves the previous checkpoint the latest, readable. This removes the
  temporary files the failed save left (training/failed_saves.py), and
  raises CheckpointWriteError naming the directory, the step and that
  checkpoint.

  A save that fails because a ps task went away (UnavailableError,
  AbortedError: the variables are read from it) is not a write failure:
  that error goes on as it is, and MonitoredTrainingSession re-creates the
  session as for a failed step.
  """

  def after_create_session(self, session, coord):
    self._start_step = int(session.run(self._global_step_tensor))
    super().after_create_session(session, coord)

  def _save(self, session, step):
    if self._is_the_restored_checkpoint(step):
      # Its listeners still see it: it is this run's checkpoint of `step`.
      for listener in self._listeners:
        listener.before_save(session, step)
      for listener in self._listeners:
        listener.after_save(session, step)
      return False
    attempt = failed_saves.SaveAttempt(self._save_path, step)
    try:
      try:
        return super()._save(session, step)
      except BaseException:  # Whatever stopped it, the files are waste.
        removed = attempt.remove_temporary_files()
        if removed:
          tf.logging.info('removed the temporary files of the failed save '
                          'of step %d from %s: %s', step,
                          self._checkpoint_dir, ', '.join(removed))
        raise
    except (tf.errors.UnavailableError, tf.errors.AbortedError):
      raise
    except (tf.errors.OpError, OSError) as e:
      reason = failed_saves.write_error_reason(e)
      latest = tf.train.latest_checkpoint(self._checkpoint_dir)
      raise CheckpointWriteError(
          'writing the checkpoint of step %d to %s failed (%s); the latest '
          'checkpoint is still %s. Free space or fix the directory, then '
          'resume.' % (step, self._checkpoint_dir, reason, latest or 'none'),
          lasting=failed_saves.is_lasting(reason)) from None


  def _is_the_restored_checkpoint(self, step):
    """Whether the save of `step` would write again the checkpoint this
    session restored: at the session's start (its first save) and at the
    end of a run that trained no step. That checkpoint is left as it is:
    written again by a graph of fewer variables it would lose the others."""
    latest = tf.train.latest_checkpoint(self._checkpoint_dir)
    return (step == getattr(self, '_start_step', None) and latest is not None
            and os.path.abspath(latest) == os.path.abspath(
                '%s-%d' % (self._save_path, step)))


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
    line = script_contract.progress_line(
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


class NanLossError(tf.train.NanLossDuringTrainingError):
  """The loss of a step was NaN; `history` is the chief's CheckpointHistory
  (None on other workers)."""

  def __init__(self, step, history):
    super().__init__()
    self.step = step
    self.history = history

  def __str__(self):
    return 'NaN loss during training at step %d' % self.step


class NanTensorHook(tf.train.NanTensorHook):
  """tf.train.NanTensorHook that also gives each loss to the chief's
  training.divergence.CheckpointHistory, and raises NanLossError.

  Args:
    loss: the loss tensor to watch.
    history: a CheckpointHistory, or None.
  """

  def __init__(self, loss, history=None):
    super().__init__(loss, fail_on_nan_loss=True)
    self._history = history
    self._global_step = None
    self._overflowed = None

  def begin(self):
    self._global_step = tf.train.get_global_step()
    self._overflowed = compression_overflowed()

  def after_run(self, run_context, run_values):
    loss = run_values.results
    if self._history is not None:
      self._history.add_loss(loss)
    if np.isnan(loss):
      # The step this run reached, as a checkpoint of it would be named.
      values = run_context.session.run(
          {'step': self._global_step, 'overflowed': self._overflowed}
          if self._overflowed is not None else {'step': self._global_step})
      if values.get('overflowed'):
        raise NonFiniteGradients(compression_overflow_line(values['step']))
      raise NanLossError(values['step'], self._history)


_COMPRESSION_FIX = (
    "Use --gradient_compression=bf16 (float32's range in 16 bits) or "
    '--gradient_compression=none and run again: it resumes from the latest '
    'checkpoint.')
_COMPRESSION_OVERFLOW = (
    'the all-reduce of the gradients, compressed to float16 by '
    '--gradient_compression=fp16, overflowed (a gradient averaged over the '
    "workers was beyond float16's largest value, 65504)")


def compression_overflowed():
  """A boolean tensor: whether the latest compressed all-reduce of finite
  gradients overflowed float16 (deployment/collectives.py). None without
  such an all-reduce, or with a loss scale: that skips the update of an
  overflow, and SkippedUpdatesHook reports a run of them."""
  if tf.get_collection(precision.LOSS_SCALE_STREAKS):
    return None
  return _any_overflow()


def _any_overflow():
  """Whether any compressed all-reduce's flag is set, or None."""
  flags = tf.get_collection(collectives.COMPRESSION_OVERFLOWED)
  if not flags:
    return None
  return tf.reduce_any([tf.convert_to_tensor(flag) for flag in flags])


def compression_overflow_line(step):
  """The error line of an overflow whose update reached the weights."""
  return ('training stopped at step %d: %s, and its update made the weights '
          'NaN or infinite; no checkpoint holds them. The learning rate is '
          'not the cause. %s' % (step, _COMPRESSION_OVERFLOW,
                                 _COMPRESSION_FIX))


class SkippedUpdatesHook(tf.train.SessionRunHook):
  """Stops a run whose dynamic loss scale skips every update, raising
  NonFiniteGradients with the reason and the fix.

  A skipped update leaves the weights and the global step as they were
  and halves the loss scale: a gradient that is never finite would make
  the run log the same step for ever. deployment/precision.py's LossScale
  counts the updates skipped in a row at its minimum scale; at
  SKIPS_AT_MINIMUM_TO_STOP this stops the run, before the checkpoint hooks
  see the step (see session_hooks), so no checkpoint is written at the
  stop. The reason is the compressed all-reduce when the latest one of
  finite gradients overflowed (deployment/collectives.py), else float16
  itself.

  The count is fetched with each step, read at a point the step's update
  is not ordered with, so it may be one update behind; only when it is one
  short of the bound is it read again after the step. The run stops at the
  same update every time, and costs nothing before.
  """

  def __init__(self):
    self._fetches = None
    self._streak = None

  def begin(self):
    # The most negative finite_steps: the longest streak of skips.
    self._streak = tf.reduce_min(tf.stack(
        tf.get_collection(precision.LOSS_SCALE_STREAKS)))
    self._fetches = {'finite_steps': self._streak,
                     'step': tf.train.get_global_step()}
    overflowed = _any_overflow()
    if overflowed is not None:
      self._fetches['overflowed'] = overflowed

  def before_run(self, run_context):
    return tf.train.SessionRunArgs(self._streak)

  def after_run(self, run_context, run_values):
    bound = precision.SKIPS_AT_MINIMUM_TO_STOP
    if precision.skips_at_minimum(run_values.results) < bound - 1:
      return
    values = run_context.session.run(self._fetches)
    if precision.skips_at_minimum(values['finite_steps']) < bound:
      return
    if values.get('overflowed'):
      reason = ('%s, and the loss scale cannot help: the gradients are '
                'unscaled before the all-reduce. %s'
                % (_COMPRESSION_OVERFLOW, _COMPRESSION_FIX))
    else:
      reason = (
          'the gradient was not finite even at loss scale %g (halved to its '
          'minimum, then %d updates in a row skipped there too): float16 '
          'overflows whatever the scale. Train with '
          "--precision=mixed_bfloat16 (float32's range) or --precision="
          'float32, or look for inf or NaN in the input data, and run again: '
          'it resumes from the latest checkpoint.'
          % (precision.MINIMUM_SCALE, bound))
    raise NonFiniteGradients(
        'training stopped at step %d: every update was skipped, the weights '
        'are those of the last finite one and no checkpoint is written at '
        'the stop; %s' % (values['step'], reason))


class FiniteWeightsGuard(tf.train.CheckpointSaverListener):
  """Refuses to save a checkpoint whose variables are not all finite, and
  records each save's largest weight in a CheckpointHistory.

  The NaN-loss hook stops training at the first NaN loss, but the step that
  produced it may already have written NaN into the weights; this keeps
  them out of train_dir. Finite weights that had already blown up are
  judged with the history when training stops (training/divergence.py).

  Args:
    variables: the variables that must be finite.
    history: a training.divergence.CheckpointHistory, or None; max |w| over
      its `weights` is recorded at each save.
  """

  def __init__(self, variables, history=None):
    checks = [tf.reduce_all(tf.math.is_finite(v)) for v in variables
              if v.dtype.base_dtype.is_floating]
    self._fetches = {}
    if checks:
      self._fetches['all_finite'] = tf.reduce_all(tf.stack(checks))
    overflowed = compression_overflowed()
    if overflowed is not None:
      self._fetches['overflowed'] = overflowed
    if history is not None and history.weights:
      # float32 each: mixed precision mixes float16 and float32 weights.
      self._fetches['max_weight'] = tf.reduce_max(tf.stack(
          [tf.cast(tf.reduce_max(tf.abs(w)), tf.float32)
           for w in history.weights]))
    self._history = history
    self._max_weight = None

  def before_save(self, session, global_step_value):
    values = session.run(self._fetches) if self._fetches else {}
    if not values.get('all_finite', True) and values.get('overflowed'):
      raise NonFiniteGradients(compression_overflow_line(global_step_value))
    if not values.get('all_finite', True):
      raise NonFiniteWeightsError(
          'weights became NaN or infinite at step %d (that checkpoint was '
          'not saved)' % global_step_value, self._history)
    self._max_weight = values.get('max_weight')

  def after_save(self, session, global_step_value):
    if self._history is not None:
      self._history.add_save(global_step_value, (
          None if self._max_weight is None else float(self._max_weight)))


def session_hooks(total_loss, is_chief, chief_hooks, hooks, history=None):
  """All hooks of a training session, in the order they must run.

  MonitoredSession calls `after_run` hook by hook, in list order, and an
  exception stops the rest and skips every `end` (where the checkpoint
  saver writes its final checkpoint). The NaN-loss hook therefore comes
  first: on a step whose loss is NaN it raises before the checkpoint and
  summary hooks see that step, and on other steps it records the loss
  before a save records the checkpoint. With a loss scale,
  SkippedUpdatesHook follows it, so that a run stopped for skipping every
  update writes no checkpoint of that step either. The chief's hooks are
  passed here rather than as MonitoredTrainingSession's
  `chief_only_hooks`, which runs them before all others. Weights that became non-finite while the loss
  was still finite are kept out of checkpoints by FiniteWeightsGuard.

  Args:
    total_loss: the loss tensor to watch.
    is_chief: whether `chief_hooks` (checkpoints, summaries) are wanted.
    chief_hooks: hooks of the chief only.
    hooks: hooks of every worker.
    history: the chief's training.divergence.CheckpointHistory, or None.

  Returns:
    The list of hooks to pass as MonitoredTrainingSession's `hooks`.
  """
  nan_hook = NanTensorHook(total_loss, history if is_chief else None)
  guards = [nan_hook]
  if tf.get_collection(precision.LOSS_SCALE_STREAKS):
    guards.append(SkippedUpdatesHook())
  return guards + (list(chief_hooks) if is_chief else []) + list(hooks)
