"""The optimizers of the upstream `--optimizer` flag."""

from tf2_compat.slim_compat import tf


def _adadelta(rate, f):
  return tf.train.AdadeltaOptimizer(rate, rho=f.adadelta_rho,
                                    epsilon=f.opt_epsilon)


def _adagrad(rate, f):
  return tf.train.AdagradOptimizer(
      rate, initial_accumulator_value=f.adagrad_initial_accumulator_value)


def _adam(rate, f):
  return tf.train.AdamOptimizer(rate, beta1=f.adam_beta1, beta2=f.adam_beta2,
                                epsilon=f.opt_epsilon)


def _ftrl(rate, f):
  return tf.train.FtrlOptimizer(
      rate, learning_rate_power=f.ftrl_learning_rate_power,
      initial_accumulator_value=f.ftrl_initial_accumulator_value,
      l1_regularization_strength=f.ftrl_l1,
      l2_regularization_strength=f.ftrl_l2)


def _momentum(rate, f):
  return tf.train.MomentumOptimizer(rate, momentum=f.momentum,
                                    name='Momentum')


def _rmsprop(rate, f):
  return tf.train.RMSPropOptimizer(rate, decay=f.rmsprop_decay,
                                   momentum=f.rmsprop_momentum,
                                   epsilon=f.opt_epsilon)


def _sgd(rate, f):
  del f  # No hyper-parameters.
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


def make_optimizer(name, rate, hyper_parameters):
  """Builds optimizer `name` with learning rate `rate`.

  Args:
    name: one of OPTIMIZERS.
    rate: learning rate (float or tensor).
    hyper_parameters: an object with the upstream flag attributes
      (adam_beta1, momentum, rmsprop_decay, opt_epsilon, ...), e.g. the
      flags of a RunConfig.
  """
  if name not in OPTIMIZERS:
    raise ValueError('optimizer must be one of %s, got %r'
                     % (', '.join(sorted(OPTIMIZERS)), name))
  return OPTIMIZERS[name](rate, hyper_parameters)
