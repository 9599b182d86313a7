"""The optimizer of a training run: `OptimizerConfig` and `make_optimizer`.

The config holds upstream Slim's optimization and learning-rate flags under
their flag names, the optimizer's under `name`; training.run_config builds
it from the flags, and the script builds the optimizer from it:

  config = optimizers.OptimizerConfig(name='momentum', momentum=0.8)
  optimizer = optimizers.make_optimizer(config, learning_rate)
"""

import dataclasses
import typing

from tf2_compat.slim_compat import tf
from training import schedule


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
  """The optimizer, its schedule and its wrappers; checked on creation.

  The defaults are upstream's flag defaults. Attributes:
    name: one of OPTIMIZERS (--optimizer).
    adadelta_rho ... rmsprop_decay: the hyperparameters of the optimizers,
      each read by those its flag's help names (opt_epsilon by adadelta,
      adam and rmsprop).
    learning_rate_decay_type ... warmup_epochs: the learning-rate schedule
      (training/schedule.py; the epochs count examples of the global
      batch).
    sync_replicas, replicas_to_aggregate: wrap the optimizer in a
      SyncReplicasOptimizer aggregating that many workers' gradients.
    moving_average_decay: keep an exponential moving average of the model
      variables with this decay; None: none.

  Raises:
    ValueError: an unknown optimizer or decay type, naming the known ones.
  """
  name: str = 'rmsprop'
  adadelta_rho: float = 0.95
  adagrad_initial_accumulator_value: float = 0.1
  adam_beta1: float = 0.9
  adam_beta2: float = 0.999
  opt_epsilon: float = 1.0
  ftrl_learning_rate_power: float = -0.5
  ftrl_initial_accumulator_value: float = 0.1
  ftrl_l1: float = 0.0
  ftrl_l2: float = 0.0
  momentum: float = 0.9
  rmsprop_momentum: float = 0.9
  rmsprop_decay: float = 0.9
  learning_rate_decay_type: str = 'exponential'
  learning_rate: float = 0.01
  end_learning_rate: float = 0.0001
  learning_rate_decay_factor: float = 0.94
  num_epochs_per_decay: float = 2.0
  warmup_epochs: float = 0.0
  sync_replicas: bool = False
  replicas_to_aggregate: int = 1
  moving_average_decay: typing.Optional[float] = None

  def __post_init__(self):
    if self.name not in OPTIMIZERS:
      raise ValueError('optimizer must be one of %s, got %r'
                       % (', '.join(sorted(OPTIMIZERS)), self.name))
    if self.learning_rate_decay_type not in schedule.DECAY_TYPES:
      raise ValueError('learning_rate_decay_type must be one of %s, got %r'
                       % (', '.join(schedule.DECAY_TYPES),
                          self.learning_rate_decay_type))

  @property
  def replicas_per_step(self):
    """Worker steps one global step aggregates: replicas_to_aggregate with
    sync replicas, else 1 (each worker step is a global step)."""
    return self.replicas_to_aggregate if self.sync_replicas else 1

  def scheduled_learning_rate(self, plan, global_step):
    """The scheduled learning rate at `global_step` for the BatchPlan."""
    return schedule.learning_rate(
        plan, global_step, self.learning_rate_decay_type, self.learning_rate,
        self.end_learning_rate, self.learning_rate_decay_factor)


def _adadelta(rate, c):
  return tf.train.AdadeltaOptimizer(rate, rho=c.adadelta_rho,
                                    epsilon=c.opt_epsilon)


def _adagrad(rate, c):
  return tf.train.AdagradOptimizer(
      rate, initial_accumulator_value=c.adagrad_initial_accumulator_value)


def _adam(rate, c):
  return tf.train.AdamOptimizer(rate, beta1=c.adam_beta1, beta2=c.adam_beta2,
                                epsilon=c.opt_epsilon)


def _ftrl(rate, c):
  return tf.train.FtrlOptimizer(
      rate, learning_rate_power=c.ftrl_learning_rate_power,
      initial_accumulator_value=c.ftrl_initial_accumulator_value,
      l1_regularization_strength=c.ftrl_l1,
      l2_regularization_strength=c.ftrl_l2)


def _momentum(rate, c):
  return tf.train.MomentumOptimizer(rate, momentum=c.momentum,
                                    name='Momentum')


def _rmsprop(rate, c):
  return tf.train.RMSPropOptimizer(rate, decay=c.rmsprop_decay,
                                   momentum=c.rmsprop_momentum,
                                   epsilon=c.opt_epsilon)


def _sgd(rate, c):
  del c  # No hyper-parameters.
  return tf.train.GradientDescentOptimizer(rate)


OPTIMIZERS = {
    'adadelta': _adadelta,
    'adagrad': _adagrad,
    'adam': _adam,
    'ftrl': _ftrl,
    'momentum': _momentum,
    'rmsprop': _rmsprop,
    'sgd': _sgd,
}


def make_optimizer(optimizer_config, learning_rate):
  """The optimizer `optimizer_config` names, with its hyperparameters.

  Args:
    optimizer_config: an OptimizerConfig.
    learning_rate: a float or a tensor (OptimizerConfig.scheduled_learning_rate).

  Returns:
    A tf.compat.v1.train.Optimizer; not wrapped in a SyncReplicasOptimizer.
  """
  return OPTIMIZERS[optimizer_config.name](learning_rate, optimizer_config)
