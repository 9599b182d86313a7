"""Fine-tuning: which variables to restore from a checkpoint, which to train."""

import dataclasses
import os
import typing

from nets import quantize
from tf2_compat.slim_compat import slim, tf
from training import checkpoint_fit
from training.errors import UsageError


@dataclasses.dataclass(frozen=True)
class FineTuneConfig:
  """Upstream Slim's fine-tuning flags, read once.

  Attributes:
    checkpoint_path: --checkpoint_path as given (for messages), or None.
    checkpoint: the readable checkpoint prefix it resolves to
      (resume_check.readable_checkpoint), or None: restore nothing. Used
      only while train_dir has no checkpoint of its own.
    checkpoint_exclude_scopes: scopes whose variables are not restored.
    trainable_scopes: the scopes trained; () trains every variable.
    ignore_missing_vars: skip variables the checkpoint lacks.
  """
  checkpoint_path: typing.Optional[str] = None
  checkpoint: typing.Optional[str] = None
  checkpoint_exclude_scopes: typing.Tuple[str, ...] = ()
  trainable_scopes: typing.Tuple[str, ...] = ()
  ignore_missing_vars: bool = False


def split_scopes(scopes):
  """'a, b/c' -> ['a', 'b/c']; None or '' -> []."""
  return [s.strip() for s in (scopes or '').split(',') if s.strip()]


def _in_scopes(name, scopes):
  return any(name == s or name.startswith(s.rstrip('/') + '/')
             for s in scopes)


def resolve_checkpoint(checkpoint_path):
  """The checkpoint file prefix for a file prefix or a directory.

  Raises:
    UsageError: when nothing readable is there.
  """
  if tf.io.gfile.isdir(checkpoint_path):
    latest = tf.train.latest_checkpoint(checkpoint_path)
    if latest is None:
      raise UsageError('--checkpoint_path=%s is a directory with no '
                       'checkpoint in it; point it at a model.ckpt-N prefix '
                       'or a train_dir that has one' % checkpoint_path)
    return latest
  if not tf.io.gfile.glob(checkpoint_path + '.index') and not (
      tf.io.gfile.exists(checkpoint_path)):
    raise UsageError('--checkpoint_path=%s does not exist; give an existing '
                     'checkpoint prefix (e.g. .../model.ckpt-1000) or '
                     'directory' % checkpoint_path)
  return checkpoint_path


def variables_to_restore(checkpoint_path, exclude_scopes, ignore_missing_vars):
  """Model variables to load from the checkpoint.

  Args:
    checkpoint_path: a resolved checkpoint prefix.
    exclude_scopes: list of scopes whose variables are not restored (e.g.
      the logits when the number of classes changes).
    ignore_missing_vars: skip variables the checkpoint lacks instead of
      failing.

  Returns:
    A dict from checkpoint names to variables.

  Raises:
    UsageError: a variable is missing from the checkpoint (and not ignored,
      nor a quantization range) or has another shape there; the message
      names it and the fix.
  """
  shapes = dict(tf.train.list_variables(checkpoint_path))
  model_variables = slim.get_model_variables()
  _check_scopes_match('--checkpoint_exclude_scopes', exclude_scopes,
                      model_variables, 'model variable')
  restore = {var.op.name: var for var in model_variables
             if not _in_scopes(var.op.name, exclude_scopes)}
  ranges = {var.op.name for var in tf.get_collection(quantize.RANGES)}
  for name, shape, saved in checkpoint_fit.misfits(
      checkpoint_fit.by_checkpoint_name(restore), shapes):
    if saved is None and name in ranges:
      # A float checkpoint, fine-tuned quantization-aware: the ranges
      # follow the values from the first step.
      del restore[name]
    elif saved is None and ignore_missing_vars:
      tf.logging.warning('not in %s, left as initialized: %s',
                         checkpoint_path, name)
      del restore[name]
    elif saved is None:
      raise UsageError(
          'variable %s is not in checkpoint %s; add its scope to '
          '--checkpoint_exclude_scopes or pass --ignore_missing_vars'
          % (name, checkpoint_path))
    else:
      raise UsageError(
          'variable %s has shape %s in the model but %s in checkpoint %s; '
          'exclude its scope with --checkpoint_exclude_scopes (e.g. the '
          'logits when the number of classes differs)'
          % (name, shape, saved, checkpoint_path))
  return restore


def restoring_init_fn(fine_tune_config):
  """A Scaffold init_fn restoring the model variables from the checkpoint
  of a FineTuneConfig, minus its exclude scopes; None without one. Call
  it once the model is built.

  Raises:
    UsageError: a model variable is missing from the checkpoint or has
      another shape there (see variables_to_restore).
  """
  checkpoint = fine_tune_config.checkpoint
  if checkpoint is None:
    return None
  restore = variables_to_restore(checkpoint,
                                 fine_tune_config.checkpoint_exclude_scopes,
                                 fine_tune_config.ignore_missing_vars)
  saver = tf.train.Saver(restore)

  def init_fn(unused_scaffold, session):
    tf.logging.info('fine-tuning from %s (%d variables)', checkpoint,
                    len(restore))
    saver.restore(session, checkpoint)

  return init_fn


def variables_to_train(trainable_scopes):
  """Trainable variables under `trainable_scopes` (all when empty)."""
  variables = tf.trainable_variables()
  if not trainable_scopes:
    return variables
  _check_scopes_match('--trainable_scopes', trainable_scopes, variables,
                      'trainable variable')
  return [v for v in variables if _in_scopes(v.op.name, trainable_scopes)]


def _check_scopes_match(flag, scopes, variables, kind):
  """Raises UsageError naming the scopes of `flag` that match none of
  `variables` (a typo would otherwise pass in silence)."""
  unmatched = [scope for scope in scopes
               if not any(_in_scopes(v.op.name, [scope]) for v in variables)]
  if unmatched:
    raise UsageError('%s=%s matches no %s; scopes look like %s' % (
        flag, ','.join(unmatched), kind,
        os.path.dirname(variables[0].op.name) if variables
        else '(no variables)'))
