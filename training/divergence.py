"""After training diverged: which checkpoint to resume from, made the latest.

The NaN-loss hook stops training at the first NaN loss and a check before
each save keeps NaN weights out of checkpoints, but divergence starts
earlier: the weights blow up over several steps, finite but huge, while the
loss climbs. A checkpoint saved then is finite and useless: resumed with a
lower learning rate it diverges again. So the chief keeps a
`CheckpointHistory` of this run: the loss of every step, and at every save
the largest weight (max |w| over the trainable variables). When training
diverges, `set_aside_diverged` judges the checkpoints, oldest first: one
has diverged when

  * a loss around it is not finite: one of the RECENT_STEPS losses before
    the save, or the loss of the first step run from its weights;
  * its loss level (the median of those losses) is more than LOSS_GROWTH
    times the lowest level of the earlier good checkpoints (levels below
    LOSS_FLOOR count as LOSS_FLOOR: near zero, ordinary batch-to-batch noise
    is a large ratio);
  * its largest weight is more than WEIGHT_GROWTH times that of the newest
    earlier good checkpoint, or WEIGHT_GROWTH_FROM_START times when that is
    the checkpoint of step 0: the initial weights are small (0.2 for
    LeNet's) and healthy training multiplies them by a few (0.53 after
    300 steps), so the first trained checkpoint gets a wider bound.

Every checkpoint after the first that has diverged descends from it and has
diverged too; the checkpoint of step 0, saved before any update, never has.
A checkpoint saved before this run (train_dir resumed) has no losses here;
its largest weight is read from its file.

The newest good checkpoint is then made the latest in train_dir's
`checkpoint` index and the diverged ones are moved to train_dir/diverged/,
so that a resume cannot pick them and nothing is lost. The index is
rewritten first: a crash in between leaves stray files in train_dir, never
an index naming moved ones.
"""

import collections
import dataclasses
import math
import os
import statistics
import typing

import numpy as np

from tf2_compat.slim_compat import tf
from training import checkpoint_fit
from training import checkpoint_state

DIVERGED_DIR = 'diverged'
RECENT_STEPS = 5
LOSS_GROWTH = 10.0
LOSS_FLOOR = 0.1
WEIGHT_GROWTH = 10.0
WEIGHT_GROWTH_FROM_START = 100.0


@dataclasses.dataclass
class Save:
  """What is known of one checkpoint.

  `losses_before`: the losses of the last RECENT_STEPS steps before the
  save; `loss_after`: that of the first step run from its weights (None
  until one ran); `max_weight`: max |w| over the trainable variables (None:
  unknown).
  """
  step: int
  max_weight: typing.Optional[float]
  losses_before: tuple = ()
  loss_after: typing.Optional[float] = None

  def losses(self):
    after = () if self.loss_after is None else (self.loss_after,)
    return self.losses_before + after

  def loss_level(self):
    losses = self.losses()
    return statistics.median(losses) if losses else None


class CheckpointHistory:
  """The chief's record of this run's losses and saves.

  The NaN-loss hook calls `add_loss` after each step and the checkpoint
  listener `add_save` after each save; the hook runs before the saver on
  every step, so a save's `losses_before` ends with the loss of the step
  that produced its weights.

  Args:
    weights: the trainable variables whose max |w| each save records.
  """

  def __init__(self, weights):
    self.weights = [w for w in weights if w.dtype.base_dtype.is_floating]
    self.weight_names = sorted({checkpoint_fit.checkpoint_name(w)
                                for w in self.weights})
    self.saves = []
    self._recent = collections.deque(maxlen=RECENT_STEPS)

  def add_loss(self, loss):
    loss = float(loss)
    if self.saves and self.saves[-1].loss_after is None:
      self.saves[-1].loss_after = loss
    self._recent.append(loss)

  def add_save(self, step, max_weight):
    self.saves.append(Save(int(step), max_weight, tuple(self._recent)))


def why_diverged(save, good):
  """Why `save` had diverged, judged against the earlier good saves `good`
  (oldest first); None when it had not."""
  if save.step == 0:
    # The weights training started from: no update has touched them (a NaN
    # loss on them is the data's or the model's doing).
    return None
  losses = save.losses()
  if not all(math.isfinite(loss) for loss in losses):
    return 'step %d: loss %s' % (save.step, next(
        _loss_text(loss) for loss in losses if not math.isfinite(loss)))
  levels = [(s.loss_level(), s.step) for s in good
            if s.loss_level() is not None]
  level = save.loss_level()
  if level is not None and levels:
    lowest, lowest_step = min(levels)
    if level > LOSS_GROWTH * max(lowest, LOSS_FLOOR):
      return ('step %d: loss %.3g, over %g times the %.3g of step %d'
              % (save.step, level, LOSS_GROWTH, lowest, lowest_step))
  weighed = [s for s in good if s.max_weight is not None]
  if save.max_weight is not None and weighed:
    earlier = weighed[-1]
    growth = WEIGHT_GROWTH_FROM_START if earlier.step == 0 else WEIGHT_GROWTH
    if save.max_weight > growth * earlier.max_weight:
      return ('step %d: weights up to %.3g, over %g times the %.3g of step '
              '%d' % (save.step, save.max_weight, growth,
                      earlier.max_weight, earlier.step))
  return None


def _loss_text(loss):
  return 'NaN' if math.isnan(loss) else '%g' % loss


def first_diverged(saves):
  """(the step of the first of `saves` that had diverged, why) or (None,
  None); `saves` oldest first."""
  good = []
  for save in saves:
    reason = why_diverged(save, good)
    if reason is not None:
      return save.step, reason
    good.append(save)
  return None, None


def max_weight_in(prefix, names):
  """max |w| over the tensors `names` of checkpoint `prefix`; None when it
  cannot be read or holds none of them."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    largest = None
    for name in names:
      if reader.has_tensor(name):
        value = float(np.max(np.abs(reader.get_tensor(name)), initial=0.0))
        largest = value if largest is None else max(largest, value)
    return largest
  except (tf.errors.OpError, ValueError):
    return None


# What set_aside_diverged did. `resume_step`: the step the latest
# checkpoint now holds (None: no checkpoint is left); `moved`: the steps of
# the checkpoints moved; `reason`: why the first of them had diverged;
# `moved_to`: the directory they went to.
Outcome = collections.namedtuple(
    'Outcome', ['resume_step', 'moved', 'reason', 'moved_to'])


def set_aside_diverged(train_dir, history):
  """Makes the newest good checkpoint train_dir's latest, and moves the
  diverged ones to train_dir/diverged/ (see the module doc).

  Returns:
    An Outcome.
  """
  try:
    state = tf.train.get_checkpoint_state(train_dir)
  except ValueError:
    state = None
  listed = list(state.all_model_checkpoint_paths) if state else []
  if state and state.model_checkpoint_path not in listed:
    listed.append(state.model_checkpoint_path)
  kept = sorted((step, path) for step, path in
                ((checkpoint_state.step_of(p), p) for p in listed) if step is not None)
  first_step, reason = first_diverged(_judged_saves(kept, history))
  bad = [(step, path) for step, path in kept
         if first_step is not None and step >= first_step]
  if not bad:
    return Outcome(kept[-1][0] if kept else None, [], None, None)
  good = [(step, path) for step, path in kept if step < bad[0][0]]
  moved_to = os.path.join(train_dir, DIVERGED_DIR)
  _rewrite_index(train_dir, state, [path for _, path in good], moved_to)
  for _, path in bad:
    checkpoint_state.move_aside(path, moved_to)
  return Outcome(good[-1][0] if good else None, [step for step, _ in bad],
                 reason, moved_to)


def _judged_saves(kept, history):
  """The saves to judge, oldest first: the kept checkpoints (this run's
  records, or read from their files) and this run's saves rotated out of
  train_dir, which still judge the later ones."""
  recorded = {save.step: save for save in history.saves}
  kept_steps = {step for step, _ in kept}
  saves = [recorded.get(step) or Save(step, max_weight_in(
      path, history.weight_names)) for step, path in kept]
  saves += [save for save in history.saves if save.step not in kept_steps]
  return sorted(saves, key=lambda save: save.step)


def _rewrite_index(train_dir, state, good_paths, moved_to):
  """Names the last of good_paths the latest; with none, moves the index
  itself aside, so that the next run starts over."""
  if not good_paths:
    index = os.path.join(train_dir, 'checkpoint')
    tf.io.gfile.makedirs(moved_to)
    tf.io.gfile.rename(index, checkpoint_state.free_name(moved_to,
                                                         'checkpoint', ''))
    return
  # The save times the index records, kept for the checkpoints it keeps.
  stamped = dict(zip(state.all_model_checkpoint_paths,
                     state.all_model_checkpoint_timestamps))
  stamps = [stamped.get(path) for path in good_paths]
  # Relative paths, as the script's Saver writes them.
  tf.train.update_checkpoint_state(
      train_dir, os.path.basename(good_paths[-1]),
      all_model_checkpoint_paths=[os.path.basename(p) for p in good_paths],
      all_model_checkpoint_timestamps=None if None in stamps else stamps,
      last_preserved_timestamp=state.last_preserved_timestamp or None)


def report(error, train_dir, learning_rate, starts_from='step 0'):
  """Sets the diverged checkpoints aside (on the chief, whose error carries
  the history) and returns the line that says what happened and the fix.

  Args:
    error: the hooks' NanLossError or NonFiniteWeightsError.
    train_dir, learning_rate, starts_from: see `explain`.
  """
  outcome = None
  if error.history is not None:
    try:
      outcome = set_aside_diverged(train_dir, error.history)
    except (OSError, tf.errors.OpError) as e:
      return ('training stopped: %s. Setting the diverged checkpoints in %s '
              'aside failed (%s). Lower --learning_rate (now %g) and run '
              'again once its latest checkpoint is one saved before the loss '
              'climbed.' % (error, train_dir, e, learning_rate))
  return explain(str(error), outcome, train_dir, learning_rate, starts_from)


def explain(what_stopped, outcome, train_dir, learning_rate,
            starts_from='step 0'):
  """The one line that says what happened and how to go on.

  Args:
    what_stopped: e.g. 'NaN loss during training at step 14'.
    outcome: the Outcome of set_aside_diverged; None on a worker (the chief
      keeps the checkpoints).
    train_dir: the run's --train_dir.
    learning_rate: the --learning_rate of this run.
    starts_from: where a run without checkpoint starts ('step 0', or the
      --checkpoint_path it fine-tunes from).
  """
  fix = 'Lower --learning_rate (now %g) and run again' % learning_rate
  if outcome is None:
    return ('training stopped: %s. %s: it resumes from the latest '
            'checkpoint the chief kept in %s (the chief moves diverged ones '
            'aside).' % (what_stopped, fix, train_dir))
  if not outcome.moved:
    if outcome.resume_step is None:
      return ('training stopped: %s. No checkpoint was saved. %s: it starts '
              'over from %s.' % (what_stopped, fix, starts_from))
    if outcome.resume_step == 0:
      return ('training stopped: %s. The latest checkpoint is that of step 0, '
              'saved before any update. %s: it resumes from step 0.'
              % (what_stopped, fix))
    return ('training stopped: %s. The latest checkpoint, of step %d, shows '
            'no sign of divergence (finite loss, weights in line with the '
            'earlier ones). %s: it resumes from step %d.'
            % (what_stopped, outcome.resume_step, fix, outcome.resume_step))
  moved = ('the checkpoint of step %d was' % outcome.moved[0]
           if len(outcome.moved) == 1 else 'the checkpoints of steps %s were'
           % ', '.join(str(step) for step in outcome.moved))
  if outcome.resume_step is None:
    return ('training stopped: %s. No good checkpoint is left: %s already '
            'diverging (%s) and moved to %s, with the checkpoint index. %s: '
            'it starts over from %s.'
            % (what_stopped, moved, outcome.reason, outcome.moved_to, fix,
               starts_from))
  return ('training stopped: %s. %s already diverging (%s) and moved to %s; '
          'the latest checkpoint is now that of step %d. %s: it resumes from '
          'step %d.'
          % (what_stopped, _capital(moved), outcome.reason, outcome.moved_to,
             outcome.resume_step, fix, outcome.resume_step))


def _capital(text):
  return text[:1].upper() + text[1:]
