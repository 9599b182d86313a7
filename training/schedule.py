"""Global batch, epochs and learning-rate schedule, derived from the flags;
the steps a network's drop-path schedule spans (`drop_path_span`).

`batch_size` is per clone (the upstream meaning). Everything that counts
epochs is computed from the global batch, the examples one global step
consumes, so that `num_epochs_per_decay` means epochs of data whatever the
number of clones or replicas:

  global_batch_size = batch_size x num_clones [x accumulation_steps]
                      [x replicas_to_aggregate] [x all-reduce workers]
  steps_per_epoch   = num_samples / global_batch_size
  decay_steps       = steps_per_epoch x num_epochs_per_decay

The replicas factor applies with sync replicas only: there one global step
aggregates `replicas_to_aggregate` worker steps, while with async replicas
every worker step is a global step of its own. All-reduce workers (no ps)
each count every step, which takes a batch on each of them.
"""

import dataclasses

from tf2_compat.slim_compat import tf

DECAY_TYPES = ('exponential', 'fixed', 'polynomial')


@dataclasses.dataclass(frozen=True)
class BatchPlan:
  """How many examples a step takes and how steps map to epochs.

  `learning_rate_decays` is False with --learning_rate_decay_type=fixed:
  there are no decay steps to show.
  """
  batch_size: int
  num_clones: int
  replicas_per_step: int
  num_samples: int
  num_epochs_per_decay: float
  warmup_epochs: float = 0.0
  accumulation_steps: int = 1
  all_reduce_workers: int = 1
  learning_rate_decays: bool = True

  @property
  def global_batch_size(self):
    return (self.batch_size * self.num_clones * self.accumulation_steps *
            self.replicas_per_step * self.all_reduce_workers)

  @property
  def steps_per_epoch(self):
    return self.num_samples / self.global_batch_size

  @property
  def decay_steps(self):
    return max(1, int(self.steps_per_epoch * self.num_epochs_per_decay))

  @property
  def warmup_steps(self):
    return int(self.steps_per_epoch * self.warmup_epochs)

  def describe(self):
    """Lines for the start-up log, showing how each number follows."""
    factors = '%d per clone x %d clones' % (self.batch_size, self.num_clones)
    if self.accumulation_steps > 1:
      factors += ' x %d micro-steps' % self.accumulation_steps
    if self.replicas_per_step > 1:
      factors += ' x %d replicas to aggregate' % self.replicas_per_step
    if self.all_reduce_workers > 1:
      factors += ' x %d workers (all-reduce)' % self.all_reduce_workers
    lines = [
        'global batch per step: %s = %d examples' % (
            factors, self.global_batch_size),
        'steps per epoch: %d examples / %d = %.2f' % (
            self.num_samples, self.global_batch_size, self.steps_per_epoch),
    ]
    if self.learning_rate_decays:
      lines.append('decay steps: %.2f steps per epoch x %g epochs = %d' % (
          self.steps_per_epoch, self.num_epochs_per_decay, self.decay_steps))
    if self.warmup_epochs:
      lines.append('warmup steps: %.2f x %g epochs = %d' % (
          self.steps_per_epoch, self.warmup_epochs, self.warmup_steps))
    return lines


def plan_for(batch_size, num_samples, deployment, update, optimizer):
  """The BatchPlan of a run, from its parts: the clones and all-reduce
  workers from the DeploymentConfig, the micro-steps from the
  UpdateOptions, the replicas a sync step aggregates and the epochs from
  the OptimizerConfig.

  Args:
    batch_size: examples per clone per micro-step.
    num_samples: examples in the training split.
    deployment: a DeploymentConfig.
    update: the deployment.update.UpdateOptions deploy() is given.
    optimizer: a training.optimizers.OptimizerConfig.
  """
  return BatchPlan(
      batch_size=batch_size, num_clones=deployment.num_clones,
      replicas_per_step=optimizer.replicas_per_step, num_samples=num_samples,
      num_epochs_per_decay=optimizer.num_epochs_per_decay,
      warmup_epochs=optimizer.warmup_epochs,
      accumulation_steps=update.accumulation_steps,
      all_reduce_workers=(deployment.num_replicas
                          if deployment.all_reduce_replicas else 1),
      learning_rate_decays=optimizer.learning_rate_decay_type != 'fixed')


def learning_rate(plan, global_step, decay_type, initial, end=0.0001,
                  decay_factor=0.94):
  """The learning-rate tensor for `global_step`.

  exponential: initial x decay_factor ^ floor(step / decay_steps);
  polynomial: linear from initial to end over decay_steps, then end;
  fixed: initial. With warmup, the rate also rises linearly from 0 over
  the warmup steps (the smaller of the two rates applies).
  """
  if decay_type not in DECAY_TYPES:
    raise ValueError('decay_type must be one of %s, got %r'
                     % (', '.join(DECAY_TYPES), decay_type))
  step = tf.cast(global_step, tf.float32)
  if decay_type == 'exponential':
    rate = tf.train.exponential_decay(initial, global_step, plan.decay_steps,
                                      decay_factor, staircase=True)
  elif decay_type == 'polynomial':
    rate = tf.train.polynomial_decay(initial, global_step, plan.decay_steps,
                                     end, power=1.0, cycle=False)
  else:
    rate = tf.constant(initial, tf.float32)
  if plan.warmup_steps > 0:
    rate = tf.minimum(rate, initial * step / plan.warmup_steps)
  return tf.identity(rate, name='learning_rate')


def drop_path_span(network_fn, max_number_of_steps):
  """Makes a network's drop-path schedule span the run.

  NASNet and PNASNet (those with `total_training_steps` among their
  network_fn's attributes) lower the keep probability of drop path linearly
  with the global step until step `total_training_steps`, upstream's
  planned length of their published training (250,000 or 937,500 steps)
  unless told another. A run that stops at --max_number_of_steps tells
  them that step; a run without one keeps the network's default.

  Args:
    network_fn: the network function (nets_factory.get_network_fn's).
    max_number_of_steps: the global step the run stops at, or None.

  Returns:
    (keyword arguments for network_fn, the start-up line saying over how
    many steps drop path is scheduled); ({}, None) for a network without
    drop path.
  """
  default_steps = getattr(network_fn, 'total_training_steps', None)
  if default_steps is None:
    return {}, None
  if max_number_of_steps:
    return ({'total_training_steps': max_number_of_steps},
            'drop path: keep probability scheduled over %d steps '
            '(--max_number_of_steps)' % max_number_of_steps)
  return {}, ('drop path: keep probability scheduled over %d steps, the '
              "default of %s (no --max_number_of_steps)"
              % (default_steps, network_fn.__name__))
