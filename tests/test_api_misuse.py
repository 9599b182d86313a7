"""deploy, create_clones and optimize_clones given the wrong kind of object:
a TypeError naming the argument, what was given and the fix, raised before
anything is added to the graph."""

import importlib

import pytest

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf

DeploymentConfig = model_deploy.DeploymentConfig


def _model_fn():
  predictions = slim.fully_connected(tf.ones([4, 3]), 1, activation_fn=None,
                                     scope='linear')
  tf.losses.mean_squared_error(tf.ones([4, 1]), predictions)


def _deploy(optimizer):
  return model_deploy.deploy(DeploymentConfig(clone_on_cpu=True), _model_fn,
                             optimizer=optimizer)


def _optimize_clones(optimizer):
  clones = model_deploy.create_clones(DeploymentConfig(clone_on_cpu=True),
                                      _model_fn)
  return model_deploy.optimize_clones(clones, optimizer)


def _keras_optimizer(module_name, class_name):
  module = importlib.import_module(module_name)  # Both are requirements.
  return getattr(module.optimizers, class_name)(0.1)


def test_string_optimizer_to_deploy_names_the_tf1_class(graph):
  with pytest.raises(TypeError) as raised:
    _deploy('sgd')
  assert str(raised.value) == (
      'optimizer must be a tf.compat.v1.train.Optimizer (e.g. '
      'tf.compat.v1.train.GradientDescentOptimizer(0.1)), or None to build '
      "only the losses; got the str 'sgd'")
  # Raised on entry: not even the global step was made.
  assert graph.get_operations() == []


def test_string_optimizer_to_optimize_clones_names_the_tf1_class(graph):
  with pytest.raises(TypeError, match=(
      r"^optimizer must be a tf\.compat\.v1\.train\.Optimizer \(e\.g\. "
      r"tf\.compat\.v1\.train\.GradientDescentOptimizer\(0\.1\)\); got the "
      r"str 'adam'$")):
    _optimize_clones('adam')


def test_missing_optimizer_to_optimize_clones_says_none(graph):
  with pytest.raises(TypeError, match=r'^optimizer must be .*; got None$'):
    _optimize_clones(None)


@pytest.mark.parametrize('module_name, class_name, equivalent', [
    ('tensorflow.keras', 'SGD', 'GradientDescentOptimizer(learning_rate)'),
    ('tensorflow.keras', 'Adam', 'AdamOptimizer(learning_rate)'),
    ('tf_keras', 'RMSprop', 'RMSPropOptimizer(learning_rate)'),
    ('keras', 'Adagrad', 'AdagradOptimizer(learning_rate)'),
])
@pytest.mark.parametrize('call, function', [
    (_deploy, 'deploy'), (_optimize_clones, 'optimize_clones')])
def test_keras_optimizer_is_refused_with_its_tf1_equivalent(
    graph, module_name, class_name, equivalent, call, function):
  optimizer = _keras_optimizer(module_name, class_name)
  with pytest.raises(TypeError) as raised:
    call(optimizer)
  message = str(raised.value)
  assert message.startswith(
      'optimizer: Keras optimizers are not supported by %s() (it builds a '
      'graph-mode tf.compat.v1 train op); got a ' % function)
  assert '.%s. Pass its equivalent tf.compat.v1.train.%s' % (
      class_name, equivalent) in message
  assert 'var_list' not in message


def test_keras_optimizer_without_tf1_twin_gets_a_generic_fix(graph):
  optimizer = _keras_optimizer('tensorflow.keras', 'Nadam')
  with pytest.raises(TypeError, match=(
      r'got a \S+\.Nadam\. Pass a tf\.compat\.v1\.train\.Optimizer \(e\.g\. '
      r'tf\.compat\.v1\.train\.GradientDescentOptimizer\(0\.1\)\) instead$')):
    _deploy(optimizer)


@pytest.mark.parametrize('model_fn, given', [
    ('model', "the str 'model'"),
    (None, 'None'),
    (3, 'the int 3'),
])
@pytest.mark.parametrize('build', [
    lambda fn: model_deploy.create_clones(DeploymentConfig(), fn),
    lambda fn: model_deploy.deploy(
        DeploymentConfig(), fn,
        optimizer=tf.train.GradientDescentOptimizer(0.1)),
], ids=['create_clones', 'deploy'])
def test_non_callable_model_fn_is_a_type_error(graph, build, model_fn, given):
  with pytest.raises(TypeError) as raised:
    build(model_fn)
  assert str(raised.value) == (
      "model_fn must be callable: a function that builds one clone's model "
      'and adds its losses (e.g. with tf.losses.*); got %s' % given)
  assert graph.get_operations() == []


class _DuckOptimizer:
  """Not a tf.compat.v1.train.Optimizer, but has the two methods deploy
  calls (the duck typing upstream Slim accepted)."""

  def __init__(self):
    self._optimizer = tf.train.GradientDescentOptimizer(0.1)

  def compute_gradients(self, loss, **kwargs):
    return self._optimizer.compute_gradients(loss, **kwargs)

  def apply_gradients(self, grads_and_vars, **kwargs):
    return self._optimizer.apply_gradients(grads_and_vars, **kwargs)


def test_object_with_the_optimizer_methods_still_deploys(graph):
  model = _deploy(_DuckOptimizer())
  assert model.train_op.name == 'train_op:0'
