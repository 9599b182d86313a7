"""Which checkpoint a run resumes from, or evaluates: one read whole.

A checkpoint can be unreadable while the one before it is fine: a disk that
filled up or a copy cut short truncates the newest data file, and the
restore fails deep in the session. Its index can be lost too (see
training/checkpoint_state.py), and it can be another model's. Before a
training run writes anything, the chief calls `prepare_train_dir`:

  1. the candidates: the checkpoints the index lists, or the model.ckpt-N
     files in train_dir when the index is missing or garbled;
  2. the newest one whose every tensor reads back whole (the checksums
     included): a read of the size of the restore's, before the model
     exists in memory;
  3. its variables against the built graph's (training/checkpoint_fit.py):
     another model is refused (UsageError) with train_dir as it was;
  4. only then the repairs, in one log line: the unreadable checkpoints
     newer than it are moved to train_dir/unreadable/ (so that no save of
     the same step overwrites them and the Saver never half-uses them), and
     the index is rewritten to name the one resumed from.

`readable_checkpoint` does steps 1 and 2 for a checkpoint that is only
read (eval_image_classifier.py's --checkpoint_path, training's
--checkpoint_path to fine-tune from): a directory gives its newest readable
checkpoint, with a log line naming the ones skipped; an unreadable
checkpoint prefix is refused, naming the readable one beside it.
"""

import os

from tf2_compat.op_errors import op_error_reason
from tf2_compat.slim_compat import tf
from training import checkpoint_fit
from training import checkpoint_state
from training import fine_tune
from training.errors import UsageError

UNREADABLE_DIR = 'unreadable'


def _data_file_name(prefix):
  files = tf.io.gfile.glob(prefix + '.data-*')
  return (os.path.basename(files[0]) if len(files) == 1
          else os.path.basename(prefix) + '.data-*')


def unreadable_reason(prefix):
  """None when every tensor of the checkpoint reads back whole; otherwise
  why not, naming the file, e.g. 'model.ckpt-20.data-00000-of-00001 is
  truncated: shorter than its index says'."""
  name = os.path.basename(prefix)
  if not tf.io.gfile.exists(prefix + '.index'):
    return '%s.index is missing' % name
  try:
    dtypes = tf.train.load_checkpoint(prefix).get_variable_to_dtype_map()
  except (tf.errors.OpError, ValueError) as e:
    return '%s.index cannot be read: %s' % (name, op_error_reason(e))
  names = sorted(dtypes)
  if not names:
    return None
  # RestoreV2 reads every dtype, the input position's variant tensors
  # included, which CheckpointReader.get_tensor cannot convert. A CPU-only
  # session: the first session of a process would set up the GPUs with its
  # options, and training's own session is to do that.
  with tf.Graph().as_default():
    with tf.device('/cpu:0'):
      tensors = tf.raw_ops.RestoreV2(
          prefix=prefix, tensor_names=names,
          shape_and_slices=[''] * len(names),
          dtypes=[dtypes[n] for n in names])
    config = tf.ConfigProto(device_count={'GPU': 0})
    try:
      with tf.Session(config=config) as session:
        session.run(tensors[0].op)
    except tf.errors.OutOfRangeError:
      return ('%s is truncated: shorter than its index says'
              % _data_file_name(prefix))
    except tf.errors.NotFoundError as e:
      return 'a data file is missing (%s)' % op_error_reason(e)
    except tf.errors.OpError as e:
      return '%s cannot be read: %s' % (_data_file_name(prefix),
                                        op_error_reason(e))
  return None


def newest_readable(candidates):
  """(the first of `candidates` that is readable or None, [(prefix, why
  unreadable)] of those before it)."""
  skipped = []
  for prefix in candidates:
    reason = unreadable_reason(prefix)
    if reason is None:
      return prefix, skipped
    skipped.append((prefix, reason))
  return None, skipped


def _unreadable_text(skipped):
  return '; '.join('%s is unreadable (%s)' % (os.path.basename(p), reason)
                   for p, reason in skipped)


def prepare_train_dir(train_dir, variables, choices, log_fn=None):
  """Picks and checks the checkpoint to resume from, then repairs train_dir
  around it (see the module doc). The chief's job, before it writes.

  Args:
    train_dir: the run's --train_dir.
    variables: the built graph's global variables.
    choices: the run's checkpoint_fit.Choices (model_name, dataset_name,
      labels_offset), for the fix a refusal names.
    log_fn: where the repair's line goes (tf.logging.warning by default).

  Returns:
    The prefix resumed from, None for a start from scratch.

  Raises:
    UsageError: no checkpoint here is readable, or the newest readable one
      holds another model; train_dir is untouched.
  """
  candidates, index_problem = checkpoint_state.resume_candidates(train_dir)
  if not candidates:
    return None
  chosen, skipped = newest_readable(candidates)
  if chosen is None:
    raise UsageError(
        '--train_dir=%s: no checkpoint in it is readable: %s. Move them '
        'elsewhere to start over from step 0, or give another --train_dir'
        % (train_dir, _unreadable_text(skipped)))
  checkpoint_fit.check_resume(train_dir, chosen, variables, choices)
  # Only reads so far; the repairs are the first writes.
  try:
    return _repair(train_dir, candidates, index_problem, chosen, skipped,
                   log_fn)
  except (OSError, tf.errors.OpError) as e:
    reason = e.message if isinstance(e, tf.errors.OpError) else (
        e.strerror or str(e))
    raise UsageError(
        '--train_dir=%s: repairing it around %s failed (%s); free space or '
        'make it writable, then run again' % (
            train_dir, os.path.basename(chosen), reason)) from None


def _repair(train_dir, candidates, index_problem, chosen, skipped, log_fn):
  """Moves the unreadable checkpoints aside and makes the index name
  `chosen`, with one log line; returns `chosen`."""
  if index_problem is None and not skipped:
    checkpoint_state.adopt(train_dir, log_fn)
    return chosen
  done = []
  if index_problem is not None:
    done.append('its checkpoint file was %s' % index_problem)
  for prefix, reason in skipped:
    moved = checkpoint_state.move_aside(
        prefix, os.path.join(train_dir, UNREADABLE_DIR))
    done.append('%s is unreadable (%s)%s' % (
        os.path.basename(prefix), reason,
        ', its files moved to %s' % moved if moved else ''))
  chosen_step = checkpoint_state.step_of(chosen) or 0
  kept = [p for p in candidates
          if (checkpoint_state.step_of(p) or 0) <= chosen_step
          and tf.io.gfile.exists(p + '.index')]
  listed = checkpoint_state.rewrite(train_dir, chosen, kept)
  (log_fn or tf.logging.warning)(
      '%s: %s; resuming from %s, the newest readable checkpoint (the '
      'checkpoint file now lists %s)', train_dir, '; '.join(done),
      os.path.basename(chosen), ', '.join(listed))
  return chosen


def nothing_left_to_train(prefix, last_step, train_dir, log_fn=None):
  """Whether the checkpoint a run resumes from, `prefix`, holds a global
  step at or past `last_step` (--max_number_of_steps); if so, says so.

  A run that resumed there would still train: its first step would go past
  the last one, and the save at its end push an older checkpoint out (a
  requeued job, a restart of a finished cluster). False without a
  checkpoint, a last step, or a global step in it.

  Args:
    prefix: the checkpoint resumed from, or None.
    last_step: --max_number_of_steps, or None.
    train_dir: the run's --train_dir, for the line.
    log_fn: where the line goes (tf.logging.info by default).
  """
  if prefix is None or last_step is None:
    return False
  try:
    step = int(tf.train.load_checkpoint(prefix).get_tensor('global_step'))
  except (tf.errors.OpError, ValueError):
    return False
  if step < last_step:
    return False
  (log_fn or tf.logging.info)(
      '%s holds global step %d, and --max_number_of_steps is %d: nothing '
      'left to train; %s is left as it is. Raise --max_number_of_steps to '
      'train on.', os.path.basename(prefix), step, last_step, train_dir)
  return True


def readable_checkpoint(checkpoint_path, log_fn=None):
  """The checkpoint to read for --checkpoint_path, read whole.

  Returns:
    For a prefix, the prefix; for a directory, its newest readable
    checkpoint (logging the ones skipped, or a lost index).

  Raises:
    UsageError: no such checkpoint; the prefix is unreadable (naming the
      newest readable one beside it); no checkpoint in the directory is
      readable.
  """
  if not tf.io.gfile.isdir(checkpoint_path):
    prefix = fine_tune.resolve_checkpoint(checkpoint_path)
    reason = unreadable_reason(prefix)
    if reason is None:
      return prefix
    beside, _ = checkpoint_state.resume_candidates(
        os.path.dirname(prefix) or '.')
    name = os.path.basename(prefix)
    alternative, _ = newest_readable(
        [p for p in beside if os.path.basename(p) != name])
    raise UsageError('--checkpoint_path=%s is unreadable: %s; %s' % (
        checkpoint_path, reason,
        'the newest readable checkpoint beside it is %s' % alternative
        if alternative else 'no checkpoint beside it is readable'))
  candidates, index_problem = checkpoint_state.resume_candidates(
      checkpoint_path)
  if not candidates:
    return fine_tune.resolve_checkpoint(checkpoint_path)  # Its error.
  chosen, skipped = newest_readable(candidates)
  if chosen is None:
    raise UsageError('--checkpoint_path=%s: no checkpoint in it is '
                     'readable: %s' % (checkpoint_path,
                                       _unreadable_text(skipped)))
  if index_problem is not None or skipped:
    done = (['its checkpoint file is %s' % index_problem]
            if index_problem is not None else [])
    if skipped:
      done.append(_unreadable_text(skipped))
    (log_fn or tf.logging.warning)(
        '%s: %s; reading %s, the newest readable checkpoint',
        checkpoint_path, '; '.join(done), os.path.basename(chosen))
  return chosen
