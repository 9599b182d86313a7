"""After a NaN: the newest checkpoint that had not diverged becomes the
latest, the diverged ones go to train_dir/diverged/, and the message says
which step a run resumes from (training/divergence.py)."""

import math
import os
import re
import time

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from tests.script_runner import run_script
from training import divergence
from training import hooks

NAN = float('nan')
INF = float('inf')
TRAIN = 'train_image_classifier.py'


def _toy_training(losses, weights):
  """A step that reads the global step s: its loss is losses[s], and it
  sets the one weight to weights[s] and increments the step."""
  global_step = tf.train.get_or_create_global_step()
  weight = tf.get_variable('w', initializer=1.0)
  step = global_step.read_value()
  loss = tf.gather(tf.constant(losses, tf.float32), step, name='loss')
  new_weight = tf.gather(tf.constant(weights, tf.float32), step)
  with tf.control_dependencies([loss, new_weight]):
    update = tf.group(tf.assign(weight, new_weight),
                      tf.assign_add(global_step, 1))
  with tf.control_dependencies([update]):
    train_op = tf.identity(loss)
  return train_op, loss, weight


def _train(train_dir, losses, weights, save_steps=2, max_to_keep=5,
           runs=None):
  """Trains as the script does (its hook order, a relative-path Saver, a
  save every `save_steps` steps) until an error or `runs` runs; returns
  the divergence error, None if there was none."""
  train_op, loss, weight = _toy_training(losses, weights)
  history = divergence.CheckpointHistory([weight])
  saver = tf.train.Saver(max_to_keep=max_to_keep, save_relative_paths=True)
  chief = [hooks.CheckpointSaverHook(
      train_dir, save_steps=save_steps, saver=saver,
      listeners=[hooks.FiniteWeightsGuard(tf.global_variables(), history)])]
  try:
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=train_dir, scaffold=tf.train.Scaffold(saver=saver),
        save_checkpoint_secs=None, save_checkpoint_steps=None,
        save_summaries_steps=None, save_summaries_secs=None,
        log_step_count_steps=None,
        hooks=hooks.session_hooks(loss, True, chief, [], history)) as session:
      for _ in range(runs or len(losses)):
        session.run(train_op)
  except (hooks.NanLossError, hooks.NonFiniteWeightsError) as e:
    return e
  return None


def _diverge(train_dir, losses, weights, **kwargs):
  error = _train(train_dir, losses, weights, **kwargs)
  assert error is not None and error.history is not None
  return error, divergence.set_aside_diverged(train_dir, error.history)


def _index(train_dir):
  """The `checkpoint` file as written: (latest, all listed)."""
  with open(os.path.join(train_dir, 'checkpoint')) as f:
    text = f.read()
  return (re.search(r'^model_checkpoint_path: "(.*)"', text, re.M).group(1),
          re.findall(r'^all_model_checkpoint_paths: "(.*)"', text, re.M))


def _moved(train_dir):
  directory = os.path.join(train_dir, divergence.DIVERGED_DIR)
  return sorted(name for name in os.listdir(directory)
                if name.endswith('.index'))


def _weight(prefix):
  return float(tf.train.load_checkpoint(prefix).get_tensor('w'))


# Saves every 2 steps: a save of step 2k holds the weight set by the run
# that read step 2k-1, and the first run after it reads step 2k.
def test_checkpoint_whose_weights_blew_up_is_moved_and_the_one_before_is_latest(
    graph, tmp_path):
  train_dir = str(tmp_path)
  # The run reading step 5 blows the weight up; the loss stays finite until
  # the run reading step 7.
  error, outcome = _diverge(train_dir, [1.0] * 7 + [NAN],
                            [1.0] * 5 + [1e5] * 3)
  assert str(error) == 'NaN loss during training at step 8'
  assert outcome == divergence.Outcome(
      4, [6], 'step 6: weights up to 1e+05, over 10 times the 1 of step 4',
      os.path.join(train_dir, 'diverged'))
  # Relative paths, as the script's Saver writes them.
  assert _index(train_dir) == ('model.ckpt-4', [
      'model.ckpt-0', 'model.ckpt-2', 'model.ckpt-4'])
  assert _moved(train_dir) == ['model.ckpt-6.index']
  assert not tf.io.gfile.glob(os.path.join(train_dir, 'model.ckpt-6.*'))
  assert _weight(os.path.join(train_dir, 'diverged', 'model.ckpt-6')) == 1e5


def test_a_resume_restores_the_newest_good_checkpoint(tmp_path):
  train_dir = str(tmp_path)
  with tf.Graph().as_default():
    _diverge(train_dir, [1.0] * 7 + [NAN], [1.0] * 5 + [1e5] * 3)
  with tf.Graph().as_default():
    _, _, weight = _toy_training([1.0] * 8, [0.5] * 8)
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=train_dir, save_checkpoint_secs=None,
        save_checkpoint_steps=None, save_summaries_steps=None,
        save_summaries_secs=None, log_step_count_steps=None) as session:
      assert session.run([tf.train.get_global_step(), weight]) == [4, 1.0]


@pytest.mark.parametrize('losses, latest, moved, reason', [
    # A climbing loss: the save of step 8 has the losses 2, 2, 2, 60, 60
    # before it and 60 after it, median 31.
    ([2.0] * 6 + [60.0] * 6 + [NAN], 6, [8, 10, 12],
     'step 8: loss 31, over 10 times the 2 of step 0'),
    # An infinite loss just before the save of step 6.
    ([1.0] * 5 + [INF] * 3 + [NAN], 4, [6, 8], 'step 6: loss inf'),
    # The first step run from the weights of step 6 has a NaN loss.
    ([1.0] * 6 + [NAN], 4, [6], 'step 6: loss NaN'),
])
def test_checkpoint_with_a_diverging_loss_is_moved(graph, tmp_path, losses,
                                                   latest, moved, reason):
  train_dir = str(tmp_path)
  _, outcome = _diverge(train_dir, losses, [1.0] * len(losses))
  assert (outcome.resume_step, outcome.moved, outcome.reason) == (
      latest, moved, reason)
  assert _index(train_dir)[0] == 'model.ckpt-%d' % latest
  assert _moved(train_dir) == sorted('model.ckpt-%d.index' % step
                                     for step in moved)


def test_a_nan_without_warning_keeps_the_latest_checkpoint(graph, tmp_path):
  train_dir = str(tmp_path)
  _, outcome = _diverge(train_dir, [1.0] * 7 + [NAN], [1.0] * 8)
  assert outcome == divergence.Outcome(6, [], None, None)
  assert _index(train_dir) == ('model.ckpt-6', [
      'model.ckpt-0', 'model.ckpt-2', 'model.ckpt-4', 'model.ckpt-6'])
  assert not os.path.exists(os.path.join(train_dir, 'diverged'))


def test_the_weights_training_started_from_are_never_moved(graph, tmp_path):
  train_dir = str(tmp_path)
  _, outcome = _diverge(train_dir, [NAN], [1.0])
  assert outcome == divergence.Outcome(0, [], None, None)
  assert _index(train_dir) == ('model.ckpt-0', ['model.ckpt-0'])


def test_refused_nan_weights_also_set_aside_the_diverged_checkpoints(
    graph, tmp_path):
  train_dir = str(tmp_path)
  # The weight is huge in the save of step 4 and NaN at step 6.
  error, outcome = _diverge(train_dir, [1.0] * 8,
                            [1.0] * 3 + [1e5] + [NAN] * 4)
  assert isinstance(error, hooks.NonFiniteWeightsError)
  assert str(error) == ('weights became NaN or infinite at step 6 (that '
                        'checkpoint was not saved)')
  assert (outcome.resume_step, outcome.moved) == (2, [4])


def test_when_no_kept_checkpoint_is_good_all_move_with_the_index(
    graph, tmp_path):
  train_dir = str(tmp_path)
  # A save every step, two kept; the save of step 3 (median of 1, 1, 100,
  # 100) is the first that had diverged, and was rotated out.
  _, outcome = _diverge(train_dir, [1.0, 1.0] + [100.0] * 8 + [NAN],
                        [1.0] * 11, save_steps=1, max_to_keep=2)
  assert outcome == divergence.Outcome(
      None, [9, 10], 'step 3: loss 50.5, over 10 times the 1 of step 0',
      os.path.join(train_dir, 'diverged'))
  assert tf.train.latest_checkpoint(train_dir) is None
  assert not tf.io.gfile.glob(os.path.join(train_dir, 'model.ckpt-*'))
  assert sorted(os.listdir(os.path.join(train_dir, 'diverged'))) == [
      'checkpoint'] + sorted('model.ckpt-%d.%s' % (step, ext)
                             for step in (9, 10)
                             for ext in ('data-00000-of-00001', 'index',
                                         'meta'))


def test_checkpoints_of_an_earlier_run_are_judged_by_their_weights(
    graph, tmp_path):
  train_dir = str(tmp_path)
  # An earlier run ended normally at step 4 with a blown-up weight...
  assert _train(train_dir, [1.0] * 4, [1.0, 1.0, 1.0, 3e4], runs=4) is None
  # ...and this one resumes from it: no loss here is out of line, but the
  # weight of step 4 is 30000 times that of step 2, read from its file.
  with tf.Graph().as_default():
    _, outcome = _diverge(train_dir, [1.0] * 6 + [NAN], [3e4] * 7)
  assert outcome.reason == (
      'step 4: weights up to 3e+04, over 10 times the 1 of step 2')
  assert (outcome.resume_step, outcome.moved) == (2, [4, 6])


def test_a_checkpoint_moved_before_under_the_same_name_is_kept(graph,
                                                               tmp_path):
  train_dir = str(tmp_path)
  earlier = os.path.join(train_dir, 'diverged', 'model.ckpt-6.index')
  os.makedirs(os.path.dirname(earlier))
  with open(earlier, 'w') as f:
    f.write('an earlier divergence')
  _diverge(train_dir, [1.0] * 6 + [NAN], [1.0] * 7)
  assert _moved(train_dir) == ['model.ckpt-6.2.index', 'model.ckpt-6.index']
  with open(earlier) as f:
    assert f.read() == 'an earlier divergence'


def _save(step, losses_before=(), loss_after=None, max_weight=None):
  return divergence.Save(step, max_weight, tuple(losses_before), loss_after)


@pytest.mark.parametrize('later, diverged', [
    # Near zero, a tenfold rise is noise: the floor is 0.1 (limit 1.0).
    (_save(20, [0.05] * 5, 0.05), False),
    (_save(20, [1.5] * 5, 1.5), True),
    (_save(20, [0.01] * 5, 0.01, max_weight=9.0), False),
    (_save(20, [0.01] * 5, 0.01, max_weight=11.0), True),
])
def test_what_counts_as_diverged(later, diverged):
  earlier = _save(10, [0.005] * 5, 0.005, max_weight=1.0)
  assert (divergence.why_diverged(later, [earlier]) is not None) == diverged


OUTCOME_MESSAGES = [
    (divergence.Outcome(4, [6, 8], 'step 6: loss inf', '/t/diverged'),
     'training stopped: NaN loss during training at step 9. The '
     'checkpoints of steps 6, 8 were already diverging (step 6: loss inf) '
     'and moved to /t/diverged; the latest checkpoint is now that of step '
     '4. Lower --learning_rate (now 0.5) and run again: it resumes from '
     'step 4.'),
    (divergence.Outcome(8, [], None, None),
     'training stopped: NaN loss during training at step 9. The latest '
     'checkpoint, of step 8, shows no sign of divergence (finite loss, '
     'weights in line with the earlier ones). Lower --learning_rate (now '
     '0.5) and run again: it resumes from step 8.'),
    (divergence.Outcome(0, [], None, None),
     'training stopped: NaN loss during training at step 9. The latest '
     'checkpoint is that of step 0, saved before any update. Lower '
     '--learning_rate (now 0.5) and run again: it resumes from step 0.'),
    (divergence.Outcome(None, [8], 'step 8: loss NaN', '/t/diverged'),
     'training stopped: NaN loss during training at step 9. No good '
     'checkpoint is left: the checkpoint of step 8 was already diverging '
     '(step 8: loss NaN) and moved to /t/diverged, with the checkpoint '
     'index. Lower --learning_rate (now 0.5) and run again: it starts over '
     'from step 0.'),
    (divergence.Outcome(None, [], None, None),
     'training stopped: NaN loss during training at step 9. No checkpoint '
     'was saved. Lower --learning_rate (now 0.5) and run again: it starts '
     'over from step 0.'),
    (None,
     'training stopped: NaN loss during training at step 9. Lower '
     '--learning_rate (now 0.5) and run again: it resumes from the latest '
     'checkpoint the chief kept in /t (the chief moves diverged ones '
     'aside).'),
]


@pytest.mark.parametrize('max_weight, diverged', [(0.53, False),
                                                   (19.0, False),
                                                   (21.0, True)])
def test_weights_grown_from_the_start_get_a_wider_bound(max_weight, diverged):
  # LeNet starts at max |w| 0.2 and healthy training takes it to 0.53 by
  # step 300: the first trained checkpoint is judged against 100 x, not 10 x.
  start = _save(0, [], 2.3, max_weight=0.2)
  later = _save(300, [0.5] * 5, 0.5, max_weight=max_weight)
  assert (divergence.why_diverged(later, [start]) is not None) == diverged


@pytest.mark.parametrize('outcome, message', OUTCOME_MESSAGES)
def test_message_names_the_step_resumed_from_and_the_fix(outcome, message):
  assert divergence.explain('NaN loss during training at step 9', outcome,
                            '/t', 0.5) == message


def test_a_failed_set_aside_is_one_line_not_a_traceback(monkeypatch):
  def read_only(train_dir, history):
    raise OSError(30, 'Read-only file system')

  monkeypatch.setattr(divergence, 'set_aside_diverged', read_only)
  error = hooks.NanLossError(9, divergence.CheckpointHistory([]))
  assert divergence.report(error, '/t', 0.5) == (
      'training stopped: NaN loss during training at step 9. Setting the '
      'diverged checkpoints in /t aside failed ([Errno 30] Read-only file '
      'system). Lower --learning_rate (now 0.5) and run again once its '
      'latest checkpoint is one saved before the loss climbed.')


def _max_abs_weight(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return max(float(np.max(np.abs(reader.get_tensor(name))))
             for name, dtype in reader.get_variable_to_dtype_map().items()
             if name.startswith('LeNet/') and dtype.is_floating)


@pytest.mark.slow
def test_script_resumes_from_before_the_blow_up_and_then_trains(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')

  def train(learning_rate, steps):
    start = time.time()
    result = run_script(TRAIN, *[
        '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
        '--model_name=lenet', '--clone_on_cpu', '--batch_size=8',
        '--optimizer=sgd', '--learning_rate_decay_type=fixed',
        '--learning_rate=%g' % learning_rate, '--random_seed=1',
        '--shuffle_seed=1', '--max_number_of_steps=%d' % steps,
        '--log_every_n_steps=1', '--train_dir=%s' % train_dir])
    assert time.time() - start < 120
    return result

  # Two steps at a learning rate of 1 end normally, with finite weights
  # blown up to ~1e4 in the checkpoint of step 2 (saved at the end: no
  # timing involved).
  first = train(1.0, 2)
  assert first.returncode == 0, first.stdout[-3000:]
  blown_up = _max_abs_weight(os.path.join(train_dir, 'model.ckpt-2'))
  assert math.isfinite(blown_up) and blown_up > 100
  # Resumed at the same rate, the loss becomes NaN within a few steps.
  diverged = train(1.0, 100)
  assert diverged.returncode == 3, diverged.stdout[-3000:]
  error_lines = re.findall(r'^error: .*$', diverged.stdout, re.M)
  assert len(error_lines) == 1, diverged.stdout[-3000:]
  assert re.fullmatch(
      r'error: training stopped: NaN loss during training at step \d+\. '
      r'The checkpoint of step 2 was already diverging \(step 2: (weights '
      r'up to \S+, over 100 times the \S+ of step 0|loss inf)\) and moved to '
      + re.escape(os.path.join(train_dir, 'diverged')) +
      r'; the latest checkpoint is now that of step 0\. Lower '
      r'--learning_rate \(now 1\) and run again: it resumes from step 0\.',
      error_lines[0]), error_lines[0]
  assert 'Traceback' not in diverged.stdout
  latest = tf.train.latest_checkpoint(train_dir)
  assert os.path.basename(latest) == 'model.ckpt-0'
  assert _max_abs_weight(latest) < 1.0
  assert _max_abs_weight(
      os.path.join(train_dir, 'diverged', 'model.ckpt-2')) == blown_up
  # Following the advice trains to the end.
  resumed = train(0.01, 4)
  assert resumed.returncode == 0, resumed.stdout[-3000:]
  losses = [float(x) for x in re.findall(r'step \d+: loss = (\S+),',
                                         resumed.stdout)]
  assert losses and all(math.isfinite(loss) for loss in losses)
  assert os.path.basename(tf.train.latest_checkpoint(train_dir)) == (
      'model.ckpt-4')

