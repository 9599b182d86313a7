"""The losses of deployed clones, and the summaries of losses and gradients.

A clone's loss is the sum of the LOSSES under its name scope, divided by
the number of clones when there are several (so that summing the clones'
gradients averages them); the regularization losses are added to the
first clone only. model_deploy re-exports `GatheredLosses` and
`scalar_summary`, which it always offered.
"""

import collections

from tf2_compat.slim_compat import tf


def _gather_clone_loss(clone, num_clones, regularization_losses):
  """The loss of one clone, on the clone's device.

  Returns:
    (loss, own_loss, regularization_loss): `loss` is what the clone
    differentiates, its own (scaled) loss plus `regularization_loss`;
    each is None when absent (`loss` when the clone has neither).
  """
  with tf.device(clone.device):
    own_loss = None
    clone_losses = tf.get_collection(tf.GraphKeys.LOSSES, clone.scope)
    if clone_losses:
      # In float32 whatever the layers computed in (mixed precision).
      own_loss = tf.add_n([tf.cast(l, tf.float32) for l in clone_losses],
                          name='clone_loss')
      if num_clones > 1:
        own_loss = tf.math.divide(own_loss, 1.0 * num_clones,
                                  name='scaled_clone_loss')
    regularization_loss = None
    if regularization_losses:
      regularization_loss = tf.add_n(
          [tf.cast(l, tf.float32) for l in regularization_losses],
          name='regularization_loss')
    parts = [l for l in (own_loss, regularization_loss) if l is not None]
    if not parts:
      return None, None, None
    return tf.add_n(parts), own_loss, regularization_loss


# `losses`: per clone, what it differentiates (None without any loss);
# `own_losses`: per clone, its LOSSES alone, scaled; `regularization_loss`:
# the regularization added to the first clone, or None; `results`: what
# per_clone_fn returned for each clone with a loss.
GatheredLosses = collections.namedtuple(
    'GatheredLosses',
    ['losses', 'own_losses', 'regularization_loss', 'results'])


def gather_losses(clones, regularization_losses, per_clone_fn=None):
  """Losses of all clones; regularization goes to the first clone only.

  Returns:
    A GatheredLosses.
  """
  if regularization_losses is None:
    regularization_losses = tf.get_collection(
        tf.GraphKeys.REGULARIZATION_LOSSES)
  gathered = GatheredLosses([], [], None, [])
  for clone in clones:
    with tf.name_scope(clone.scope):
      loss, own_loss, regularization = _gather_clone_loss(
          clone, len(clones), regularization_losses)
      if regularization is not None:
        gathered = gathered._replace(regularization_loss=regularization)
      if loss is not None and per_clone_fn is not None:
        gathered.results.append(per_clone_fn(clone, loss))
    gathered.losses.append(loss)
    gathered.own_losses.append(own_loss)
    regularization_losses = None
  return gathered


def total_of(clone_losses):
  """The op 'total_loss': the sum of the clones' losses."""
  present = [loss for loss in clone_losses if loss is not None]
  if not present:
    raise ValueError(
        'no losses found: model_fn must add its losses to the '
        'tf.GraphKeys.LOSSES collection (e.g. with tf.losses.*) or the graph '
        'must have regularization losses')
  return tf.add_n(present, name='total_loss')


def scalar_summary(tag, value):
  """A scalar summary whose tag is exactly `tag`.

  tf.summary.scalar names the tag after its op, which the graph makes
  unique: next to an op named 'total_loss' the tag would be 'total_loss_1'.
  """
  summary = tf.raw_ops.ScalarSummary(tags=tag, values=value, name=tag)
  tf.add_to_collection(tf.GraphKeys.SUMMARIES, summary)
  return summary


def loss_summaries(clones, gathered, total_loss):
  """A clone's own loss (as upstream: scaled, without regularization), the
  regularization loss and the total loss."""
  summaries = []
  for clone, own_loss in zip(clones, gathered.own_losses):
    if own_loss is not None:
      tag = '/'.join(p for p in ('Losses', clone.scope.rstrip('/'),
                                 'clone_loss') if p)
      summaries.append(scalar_summary(tag, own_loss))
  if gathered.regularization_loss is not None:
    summaries.append(scalar_summary('Losses/regularization_loss',
                                    gathered.regularization_loss))
  summaries.append(scalar_summary('total_loss', total_loss))
  return summaries


def gradient_summaries(grads_and_vars):
  summaries = []
  for grad, var in grads_and_vars:
    values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
    summaries.append(tf.summary.histogram(var.op.name + '/gradient', values))
    summaries.append(tf.summary.scalar(var.op.name + '/gradient_norm',
                                       tf.global_norm([values])))
  return summaries
