"""training.hooks: what a NaN step may write, what the chief records of
each save, and the progress log."""

import glob
import os

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from tests.fake_clock import FakeClock
from training import divergence
from training import hooks

NAN_AT_STEP = 3


def _checkpoint_steps(train_dir):
  state = tf.train.get_checkpoint_state(train_dir)
  if state is None:
    return []
  return sorted(int(path.rsplit('-', 1)[1])
                for path in state.all_model_checkpoint_paths)


def _summary_steps(train_dir, tag):
  # After an exception nothing closes the writer: flush what it holds.
  tf.summary.FileWriterCache.get(train_dir).flush()
  steps = []
  for path in glob.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      if any(value.tag == tag for value in event.summary.value):
        steps.append(event.step)
  return sorted(steps)


def _toy_training(nan_loss_at=None, nan_weights_at=None):
  """A step that reads the global step, then increments it.

  The loss is NaN when the step read is `nan_loss_at`; the weight becomes
  NaN (the loss staying finite) when it is `nan_weights_at`.
  """
  global_step = tf.train.get_or_create_global_step()
  weight = tf.get_variable('w', initializer=1.0)
  step = global_step.read_value()
  nan = tf.constant(np.nan, tf.float32)
  loss = tf.identity(weight * 1.0, name='loss')
  if nan_loss_at is not None:
    loss = tf.where(tf.equal(step, nan_loss_at), nan, loss)
  new_weight = weight - 0.1
  if nan_weights_at is not None:
    new_weight = tf.where(tf.equal(step, nan_weights_at), nan, new_weight)
  # Both read the step before it is incremented.
  with tf.control_dependencies([loss, new_weight]):
    update = tf.group(tf.assign(weight, new_weight),
                      tf.assign_add(global_step, 1))
  with tf.control_dependencies([update]):
    train_op = tf.identity(loss)
  tf.summary.scalar('toy_loss', loss)
  return train_op, loss, weight


def _chief_hooks(train_dir, scaffold, weights):
  return [
      tf.train.CheckpointSaverHook(
          train_dir, save_steps=1, scaffold=scaffold,
          listeners=[hooks.FiniteWeightsGuard(weights)]),
      tf.train.SummarySaverHook(save_steps=1, output_dir=train_dir,
                                scaffold=scaffold),
  ]


def _train_until_error(train_dir, session_kwargs, train_op, steps=10):
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=train_dir, save_checkpoint_secs=None,
      save_checkpoint_steps=None, save_summaries_steps=None,
      save_summaries_secs=None, log_step_count_steps=None,
      **session_kwargs) as session:
    for _ in range(steps):
      session.run(train_op)


def test_nan_step_writes_neither_checkpoint_nor_summary(graph, tmp_path):
  train_dir = str(tmp_path)
  train_op, loss, weight = _toy_training(nan_loss_at=NAN_AT_STEP)
  scaffold = tf.train.Scaffold(saver=tf.train.Saver())
  ordered = hooks.session_hooks(loss, True,
                                _chief_hooks(train_dir, scaffold, [weight]),
                                [])
  with pytest.raises(tf.train.NanLossDuringTrainingError):
    _train_until_error(train_dir, dict(scaffold=scaffold, hooks=ordered),
                       train_op)
  # Runs 0..2 read steps 0..2; their checkpoints and summaries carry the
  # incremented steps 1..3 (0 is the checkpoint of the initial weights).
  # Run 3 has the NaN loss and leaves no trace.
  assert _checkpoint_steps(train_dir) == [0, 1, 2, 3]
  assert _summary_steps(train_dir, 'toy_loss') == [1, 2, 3]
  latest = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert latest.get_tensor('w') == pytest.approx(0.7)


def test_chief_only_hooks_would_save_the_nan_step(graph, tmp_path):
  # What session_hooks avoids: MonitoredTrainingSession runs
  # chief_only_hooks before the NaN hook, so the NaN step is saved.
  train_dir = str(tmp_path)
  train_op, loss, weight = _toy_training(nan_loss_at=NAN_AT_STEP)
  scaffold = tf.train.Scaffold(saver=tf.train.Saver())
  with pytest.raises(tf.train.NanLossDuringTrainingError):
    _train_until_error(train_dir, dict(
        scaffold=scaffold,
        chief_only_hooks=_chief_hooks(train_dir, scaffold, [weight]),
        hooks=[tf.train.NanTensorHook(loss)]), train_op)
  assert _checkpoint_steps(train_dir) == [0, 1, 2, 3, 4]
  assert _summary_steps(train_dir, 'toy_loss') == [1, 2, 3, 4]


def test_non_finite_weights_are_never_checkpointed(graph, tmp_path):
  train_dir = str(tmp_path)
  train_op, loss, weight = _toy_training(nan_weights_at=2)
  scaffold = tf.train.Scaffold(saver=tf.train.Saver())
  ordered = hooks.session_hooks(loss, True,
                                _chief_hooks(train_dir, scaffold, [weight]),
                                [])
  with pytest.raises(hooks.NonFiniteWeightsError,
                     match='weights became NaN or infinite at step 3'):
    _train_until_error(train_dir, dict(scaffold=scaffold, hooks=ordered),
                       train_op)
  assert _checkpoint_steps(train_dir) == [0, 1, 2]
  latest = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert latest.get_tensor('w') == pytest.approx(0.8)


def test_history_records_each_save_with_the_losses_around_it(graph,
                                                              tmp_path):
  train_dir = str(tmp_path)
  train_op, loss, weight = _toy_training()
  history = divergence.CheckpointHistory([weight])
  scaffold = tf.train.Scaffold(saver=tf.train.Saver())
  saver_hook = tf.train.CheckpointSaverHook(
      train_dir, save_steps=2, scaffold=scaffold,
      listeners=[hooks.FiniteWeightsGuard([weight], history)])
  _train_until_error(train_dir, dict(scaffold=scaffold, hooks=(
      hooks.session_hooks(loss, True, [saver_hook], [], history))),
                     train_op, steps=4)
  # Run s reads the weight 1 - 0.1 s as its loss, then lowers it by 0.1.
  assert [(s.step, s.max_weight, s.losses_before, s.loss_after)
          for s in history.saves] == [
              (0, 1.0, (), 1.0),
              (2, pytest.approx(0.8), pytest.approx((1.0, 0.9)),
               pytest.approx(0.8)),
              (4, pytest.approx(0.6), pytest.approx((1.0, 0.9, 0.8, 0.7)),
               None)]


def test_nan_loss_error_names_the_step_and_carries_the_history(graph,
                                                               tmp_path):
  train_dir = str(tmp_path)
  train_op, loss, weight = _toy_training(nan_loss_at=NAN_AT_STEP)
  history = divergence.CheckpointHistory([weight])
  with pytest.raises(hooks.NanLossError) as raised:
    _train_until_error(train_dir, dict(hooks=hooks.session_hooks(
        loss, True, [], [], history)), train_op)
  # The run that read step 3 made the step 4.
  assert str(raised.value) == 'NaN loss during training at step 4'
  assert raised.value.history is history


def test_non_chief_gets_no_checkpoint_or_summary_hooks(graph):
  loss = tf.constant(1.0)
  chief_hook, worker_hook = tf.train.SessionRunHook(), tf.train.SessionRunHook()
  chief = hooks.session_hooks(loss, True, [chief_hook], [worker_hook])
  worker = hooks.session_hooks(loss, False, [chief_hook], [worker_hook])
  assert isinstance(chief[0], tf.train.NanTensorHook)
  assert chief[1:] == [chief_hook, worker_hook]
  assert isinstance(worker[0], tf.train.NanTensorHook)
  assert worker[1:] == [worker_hook]


def test_progress_log_rates_come_from_the_global_step(graph, monkeypatch):
  clock = FakeClock()
  monkeypatch.setattr(hooks, 'time', clock)
  tf.train.get_or_create_global_step()
  lines = []
  hook = hooks.ProgressLogHook(
      tf.constant(0.5), tf.constant(0.01), global_batch_size=64,
      every_n_steps=2, last_step=100,
      log_fn=lambda fmt, *args: lines.append(fmt % args if args else fmt))
  # Another worker also advances the global step: 3 global steps per local
  # step, 2 seconds per local step.
  for local_step in range(5):
    values = {'loss': 0.5, 'learning_rate': 0.01, 'step': 3 * local_step}
    hook.after_run(None, tf.train.SessionRunValues(values, None, None))
    clock.advance(2.0)
  # Windows: local steps 1..2 (steps 0 -> 3 in 2 s) and 2..4 (3 -> 9 in 4 s);
  # 1.5 global steps/s x 64 = 96 examples/sec.
  assert lines == [
      'step 3: loss = 0.5000, learning rate = 0.01, 96.0 examples/sec, '
      '1m05s left',
      'step 9: loss = 0.5000, learning rate = 0.01, 96.0 examples/sec, '
      '1m01s left',
  ]


class _AbortOnce(tf.train.SessionRunHook):
  """Fails the `at`-th run with AbortedError, as a restarted ps task does."""

  def __init__(self, at):
    self._at = at
    self._runs = 0

  def after_run(self, run_context, run_values):
    self._runs += 1
    if self._runs == self._at:
      raise tf.errors.AbortedError(None, None, 'ps task 0 restarted')


def test_recovery_log_says_where_training_goes_on_and_what_is_lost(
    graph, tmp_path):
  train_dir = str(tmp_path)
  train_op, _, _ = _toy_training()
  saver = tf.train.Saver()
  with tf.Session() as session:  # The last checkpoint: step 2.
    session.run(tf.global_variables_initializer())
    session.run(tf.train.get_global_step().assign(2))
    saver.save(session, os.path.join(train_dir, 'model.ckpt'), global_step=2)
  lines = []
  recovery = hooks.SessionRecoveryLogHook(
      log_fn=lambda *args: lines.append(args[0] % args[1:]))
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=train_dir, save_checkpoint_secs=None,
      save_checkpoint_steps=None, save_summaries_steps=None,
      save_summaries_secs=None, log_step_count_steps=None,
      hooks=[recovery, _AbortOnce(at=3)]) as session:
    for _ in range(5):
      session.run(train_op)
    final_step = session.run(tf.train.get_global_step())
  # Runs 1-3 took the step from 2 to 5; the third failed, and the new
  # session restored step 2, retried the third run and went on with the
  # fourth and fifth.
  assert final_step == 5
  assert len(recovery.steps_lost) == 1
  # The step a run fetches may be read before or after its increment.
  reached = 2 + recovery.steps_lost[0]
  assert reached in (4, 5)
  assert lines == [
      'the session was re-created (a ps task restarted or a connection '
      'dropped): training goes on from global step 2; this worker last saw '
      'global step %d, so %d step(s) since the restored checkpoint are run '
      'again' % (reached, reached - 2)]


def test_recovery_log_is_silent_when_nothing_was_re_created(graph):
  train_op, _, _ = _toy_training()
  lines = []
  recovery = hooks.SessionRecoveryLogHook(log_fn=lines.append)
  with tf.train.MonitoredSession(hooks=[recovery]) as session:
    for _ in range(3):
      session.run(train_op)
  assert lines == []
  assert recovery.steps_lost == []


@pytest.mark.parametrize('error, raised', [
    (tf.errors.UnavailableError(None, None, 'Socket closed'),
     tf.errors.UnavailableError),
    (tf.errors.AbortedError(None, None, 'Session aborted'),
     tf.errors.AbortedError),
    (tf.errors.ResourceExhaustedError(None, None, 'File too large'),
     hooks.CheckpointWriteError),
])
def test_a_save_failing_on_a_lost_ps_task_is_left_to_session_recovery(
    monkeypatch, tmp_path, error, raised):
  # A ps task that dies during a save: MonitoredTrainingSession re-creates
  # the session for UnavailableError and AbortedError, as for a step; a
  # real write failure is named.
  def failing_save(unused_self, unused_session, unused_step):
    raise error

  monkeypatch.setattr(tf.train.CheckpointSaverHook, '_save', failing_save)
  hook = hooks.CheckpointSaverHook(str(tmp_path), save_steps=1)
  with pytest.raises(raised):
    hook._save(None, 5)  # pylint: disable=protected-access
