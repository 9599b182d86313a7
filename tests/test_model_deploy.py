"""create_clones, optimize_clones and deploy: graph structure and values."""

import numpy as np
import pytest

from deployment import model_deploy
from tf2_compat.slim_compat import slim, tf

DeploymentConfig = model_deploy.DeploymentConfig


def _linear_model_fn(inputs, targets, weight_decay=0.0):
  """A linear regression whose loss goes to the LOSSES collection."""
  regularizer = slim.l2_regularizer(weight_decay) if weight_decay else None
  predictions = slim.fully_connected(
      inputs, 1, activation_fn=None, weights_regularizer=regularizer,
      weights_initializer=tf.constant_initializer(0.5), scope='linear')
  tf.losses.mean_squared_error(targets, predictions)
  return predictions


def _regression_data(batch=8):
  rng = np.random.RandomState(0)
  x = rng.randn(batch, 3).astype(np.float32)
  y = rng.randn(batch, 1).astype(np.float32)
  return tf.constant(x), tf.constant(y), x, y


def test_create_clones_calls_model_fn_once_per_clone_in_its_scope(graph):
  config = DeploymentConfig(num_clones=3, clone_on_cpu=True)
  calls = []

  def model_fn():
    calls.append(tf.get_default_graph().get_name_scope())
    return slim.fully_connected(tf.ones([2, 4]), 1, scope='fc')

  clones = model_deploy.create_clones(config, model_fn)
  assert calls == ['clone_0', 'clone_1', 'clone_2']
  assert [c.scope for c in clones] == ['clone_0/', 'clone_1/', 'clone_2/']
  assert [c.device for c in clones] == ['/device:CPU:0'] * 3
  assert [c.outputs.op.name for c in clones] == [
      'clone_%d/fc/Relu' % i for i in range(3)]


def test_single_clone_has_empty_scope(graph):
  clones = model_deploy.create_clones(
      DeploymentConfig(), lambda: tf.constant(1.0, name='out'))
  assert clones[0].scope == ''
  assert clones[0].outputs.op.name == 'out'
  assert clones[0].device == '/device:GPU:0'


def test_create_clones_passes_args_and_kwargs(graph):
  seen = []
  model_deploy.create_clones(
      DeploymentConfig(num_clones=2), lambda a, b=0: seen.append((a, b)),
      args=[1], kwargs={'b': 2})
  assert seen == [(1, 2), (1, 2)]


@pytest.mark.parametrize('num_clones', [1, 2, 4])
def test_number_of_variables_does_not_depend_on_num_clones(graph, num_clones):
  config = DeploymentConfig(num_clones=num_clones, clone_on_cpu=True)
  model_deploy.create_clones(
      config, lambda: slim.fully_connected(
          slim.conv2d(tf.ones([1, 4, 4, 1]), 2, 3, scope='conv'), 1,
          scope='fc'))
  assert sorted(v.op.name for v in tf.global_variables()) == [
      'conv/biases', 'conv/weights', 'fc/biases', 'fc/weights']


def test_clone_ops_on_clone_device_and_variables_on_cpu(graph):
  config = DeploymentConfig(num_clones=2)
  clones = model_deploy.create_clones(
      config, lambda: tf.matmul(tf.ones([2, 3]), tf.get_variable(
          'w', [3, 1], initializer=tf.ones_initializer()), name='matmul'))
  # Plain tf.get_variable (not only slim variables) lands on the CPU.
  assert tf.global_variables()[0].op.device == '/device:CPU:0'
  assert [c.outputs.op.device for c in clones] == [
      '/device:GPU:0', '/device:GPU:1']


def test_clone_variables_round_robin_on_ps_and_ops_on_replica(graph):
  config = DeploymentConfig(num_clones=2, num_ps_tasks=2, num_replicas=2,
                            replica_id=1)

  def model_fn():
    net = slim.fully_connected(tf.ones([2, 3]), 4, scope='fc1')
    return slim.fully_connected(net, 1, scope='fc2')

  clones = model_deploy.create_clones(config, model_fn)
  devices = {v.op.name: v.op.device for v in tf.global_variables()}
  assert devices == {
      'fc1/weights': '/job:ps/task:0/device:CPU:0',
      'fc1/biases': '/job:ps/task:1/device:CPU:0',
      'fc2/weights': '/job:ps/task:0/device:CPU:0',
      'fc2/biases': '/job:ps/task:1/device:CPU:0',
  }
  assert clones[1].outputs.op.device == '/job:worker/task:1/device:GPU:1'


def _handle_reads(variable):
  """The ops reading `variable` straight from its handle, by name."""
  return sorted(op.name for op in variable.handle.consumers()
                if op.type == 'ReadVariableOp')


@pytest.mark.parametrize('cache', [True, False])
def test_each_worker_reads_a_ps_variable_once_for_all_its_clones(graph,
                                                                 cache):
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True, num_ps_tasks=1,
                            num_replicas=2, replica_id=1,
                            cache_variable_reads=cache)
  model_deploy.create_clones(config, lambda: _linear_model_fn(
      tf.ones([4, 3]), tf.zeros([4, 1]), weight_decay=0.1))
  weights = tf.trainable_variables('linear/weights')[0]
  if cache:
    # One read on the ps, cached on the worker's CPU; the two clones and the
    # regularizer take the cached copy.
    assert _handle_reads(weights) == ['linear/weights/Read/ReadVariableOp']
    cached = weights.value()
    assert cached.op.type == 'Identity'
    assert cached.device == '/job:worker/task:1/device:CPU:0'
    users = sorted(op.name for op in cached.consumers())
    assert users == [
        'clone_0/linear/MatMul',
        'clone_0/linear/kernel/Regularizer/l2_regularizer/L2Loss',
        'clone_1/linear/MatMul']
  else:
    # Upstream: every use reads the ps variable again.
    assert _handle_reads(weights) == [
        'clone_0/linear/MatMul/ReadVariableOp',
        'clone_0/linear/kernel/Regularizer/l2_regularizer/L2Loss/'
        'ReadVariableOp',
        'clone_1/linear/MatMul/ReadVariableOp',
        'linear/weights/Read/ReadVariableOp']


def test_variables_are_read_where_they_live_without_ps_tasks(graph):
  for config in (DeploymentConfig(num_clones=2, clone_on_cpu=True),
                 DeploymentConfig(num_replicas=2, replica_id=1)):
    assert config.variables_read_device() is None
  assert DeploymentConfig(num_ps_tasks=1).variables_read_device() == (
      '/job:worker/device:CPU:0')


def test_summaries_inside_clones_are_placed_on_cpu(graph):
  config = DeploymentConfig(num_clones=2, num_ps_tasks=1)

  def model_fn():
    value = tf.reduce_sum(tf.ones([3]))
    tf.summary.scalar('value', value)
    tf.summary.histogram('values', tf.ones([3]))
    return value

  clones = model_deploy.create_clones(config, model_fn)
  summaries = tf.get_collection(tf.GraphKeys.SUMMARIES)
  assert len(summaries) == 4
  assert {s.op.device for s in summaries} == {'/job:worker/device:CPU:0'}
  assert clones[1].outputs.op.device == '/job:worker/device:GPU:1'


def test_optimize_clones_sums_and_scales_clone_losses(graph):
  x, y, x_value, y_value = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  clones = model_deploy.create_clones(config, _linear_model_fn, [x, y])
  total_loss, grads_and_vars = model_deploy.optimize_clones(
      clones, tf.train.GradientDescentOptimizer(0.1))
  assert total_loss.op.name == 'total_loss'
  assert [v.op.name for _, v in grads_and_vars] == [
      'linear/weights', 'linear/biases']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss, grads = sess.run([total_loss, [g for g, _ in grads_and_vars]])
  predictions = x_value.dot(np.full([3, 1], 0.5, np.float32))
  clone_mse = np.mean((predictions - y_value) ** 2)
  # Both clones see the same batch: (mse + mse) / 2.
  np.testing.assert_allclose(loss, clone_mse, rtol=1e-5)
  weight_grad = 2 * x_value.T.dot(predictions - y_value) / len(x_value)
  np.testing.assert_allclose(grads[0], weight_grad, rtol=1e-4)


@pytest.mark.parametrize('regularization_losses,expected_extra', [
    (None, 0.1 * 0.5 * 3 * 0.25),  # gathered: 0.1 * sum(w^2) / 2, w = 0.5
    ([], 0.0),
])
def test_regularization_goes_to_first_clone_only(graph, regularization_losses,
                                                 expected_extra):
  x, y, x_value, y_value = _regression_data()
  config = DeploymentConfig(num_clones=3, clone_on_cpu=True)
  clones = model_deploy.create_clones(
      config, _linear_model_fn, [x, y], {'weight_decay': 0.1})
  assert len(tf.losses.get_regularization_losses()) == 1
  total_loss, _ = model_deploy.optimize_clones(
      clones, tf.train.GradientDescentOptimizer(0.1), regularization_losses)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss = sess.run(total_loss)
  mse = np.mean((x_value.dot(np.full([3, 1], 0.5)) - y_value) ** 2)
  np.testing.assert_allclose(loss, mse + expected_extra, rtol=1e-5)


def test_gradients_are_computed_on_each_clones_device(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2)
  clones = model_deploy.create_clones(config, _linear_model_fn, [x, y])
  model_deploy.optimize_clones(clones, tf.train.GradientDescentOptimizer(0.1))
  for i in range(2):
    matmul_grads = [op for op in graph.get_operations()
                    if op.name.startswith('clone_%d/gradients/' % i)
                    and op.type == 'MatMul']
    assert matmul_grads
    assert {op.device for op in matmul_grads} == {'/device:GPU:%d' % i}


def test_variables_without_gradient_are_skipped(graph):
  def model_fn():
    unused = tf.get_variable('unused', [1])
    used = tf.get_variable('used', [1])
    tf.losses.add_loss(tf.reduce_sum(used * 2.0))
    return unused

  clones = model_deploy.create_clones(
      DeploymentConfig(num_clones=2, clone_on_cpu=True), model_fn)
  _, grads_and_vars = model_deploy.optimize_clones(
      clones, tf.train.GradientDescentOptimizer(0.1))
  assert [v.op.name for _, v in grads_and_vars] == ['used']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    # Each clone contributes 2 / num_clones.
    np.testing.assert_allclose(sess.run(grads_and_vars[0][0]), [2.0])


def test_sparse_gradients_stay_sparse_when_summed(graph):
  def model_fn():
    embeddings = tf.get_variable(
        'embeddings', [1000, 4], initializer=tf.ones_initializer())
    rows = tf.nn.embedding_lookup(embeddings, tf.constant([3, 7, 3]))
    tf.losses.add_loss(tf.reduce_sum(rows))
    return rows

  clones = model_deploy.create_clones(
      DeploymentConfig(num_clones=2, clone_on_cpu=True), model_fn)
  _, grads_and_vars = model_deploy.optimize_clones(
      clones, tf.train.GradientDescentOptimizer(0.1))
  grad, var = grads_and_vars[0]
  assert var.op.name == 'embeddings'
  assert isinstance(grad, tf.IndexedSlices)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    indices, values = sess.run([grad.indices, grad.values])
  assert sorted(indices.tolist()) == [3, 3, 3, 3, 7, 7]
  np.testing.assert_allclose(values, np.full([6, 4], 0.5))


def test_optimize_clones_without_losses_raises(graph):
  clones = model_deploy.create_clones(
      DeploymentConfig(), lambda: tf.get_variable('w', [1]))
  with pytest.raises(ValueError, match='no losses found'):
    model_deploy.optimize_clones(clones,
                                 tf.train.GradientDescentOptimizer(0.1))


def test_deploy_returns_named_train_op_that_yields_total_loss(graph):
  x, y, x_value, y_value = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  model = model_deploy.deploy(config, _linear_model_fn, [x, y],
                              optimizer=tf.train.GradientDescentOptimizer(0.1))
  assert model.train_op.op.name == 'train_op'
  assert model.total_loss.op.name == 'total_loss'
  assert len(model.clones) == 2
  global_step = tf.train.get_global_step()
  assert global_step.op.device == '/device:CPU:0'
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(model.train_op)
    second = sess.run(model.train_op)
    assert sess.run(global_step) == 2
  mse = np.mean((x_value.dot(np.full([3, 1], 0.5)) - y_value) ** 2)
  np.testing.assert_allclose(first, mse, rtol=1e-5)
  assert second < first


def test_deploy_creates_global_step_on_a_ps_task(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_ps_tasks=2, clone_on_cpu=True)
  model_deploy.deploy(config, _linear_model_fn, [x, y],
                      optimizer=tf.train.GradientDescentOptimizer(0.1))
  assert tf.train.get_global_step().op.device == '/job:ps/task:0/device:CPU:0'


def test_deploy_runs_update_ops_of_the_first_clone(graph):
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  counter = tf.get_variable('counter', [], initializer=tf.zeros_initializer(),
                            trainable=False)

  def model_fn():
    scope = tf.get_default_graph().get_name_scope()
    tf.add_to_collection(tf.GraphKeys.UPDATE_OPS,
                         tf.assign_add(counter, 1.0, name='bump'))
    weight = tf.get_variable('w', [1])
    tf.losses.add_loss(tf.reduce_sum(weight))
    return scope

  model = model_deploy.deploy(config, model_fn,
                              optimizer=tf.train.GradientDescentOptimizer(1.))
  control_inputs = sorted(op.name for op in model.train_op.op.control_inputs)
  assert control_inputs == ['GradientDescent', 'clone_0/AssignAddVariableOp']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(model.train_op)
    sess.run(model.train_op)
    assert sess.run(counter) == 2.0


def test_deploy_without_optimizer_builds_only_losses(graph):
  x, y, x_value, y_value = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  model = model_deploy.deploy(config, _linear_model_fn, [x, y])
  assert model.train_op is None
  assert not [op for op in graph.get_operations()
              if 'gradients' in op.name]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    loss = sess.run(model.total_loss)
  mse = np.mean((x_value.dot(np.full([3, 1], 0.5)) - y_value) ** 2)
  np.testing.assert_allclose(loss, mse, rtol=1e-5)


@pytest.mark.parametrize('summarize_gradients', [False, True])
def test_deploy_summaries_are_merged_and_on_cpu(graph, summarize_gradients):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2, num_ps_tasks=1)

  def model_fn(inputs, targets):
    predictions = _linear_model_fn(inputs, targets, weight_decay=0.01)
    tf.summary.histogram('predictions', predictions)
    return predictions

  model = model_deploy.deploy(
      config, model_fn, [x, y],
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      summarize_gradients=summarize_gradients)
  merged = model.summary_op.op
  assert merged.device == '/job:worker/device:CPU:0'
  inputs = sorted(t.op.name for t in merged.inputs)
  expected = [
      'Losses/clone_0/clone_loss', 'Losses/clone_1/clone_loss',
      'Losses/regularization_loss', 'clone_0/predictions', 'total_loss_1']
  if summarize_gradients:
    expected += ['linear/biases/gradient', 'linear/biases/gradient_norm',
                 'linear/weights/gradient', 'linear/weights/gradient_norm']
  assert inputs == sorted(expected)
  assert {t.op.device for t in merged.inputs} == {'/job:worker/device:CPU:0'}


def test_loss_summary_tags_are_exact_and_clone_losses_own(graph):
  x, y, x_value, y_value = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)

  def model_fn(inputs, targets):
    return _linear_model_fn(inputs, targets, weight_decay=0.01)

  model = model_deploy.deploy(config, model_fn, [x, y],
                              optimizer=tf.train.GradientDescentOptimizer(0.1))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    summary = tf.Summary.FromString(sess.run(model.summary_op))
  values = {v.tag: v.simple_value for v in summary.value}
  mse = np.mean((x_value.dot(np.full([3, 1], 0.5)) - y_value) ** 2)
  regularization = 0.01 * 0.5 * 3 * 0.25
  # Each clone sees the whole batch here; its own loss is scaled by 1/2 and
  # carries no regularization (upstream's summary), the total does.
  assert sorted(values) == ['Losses/clone_0/clone_loss',
                            'Losses/clone_1/clone_loss',
                            'Losses/regularization_loss', 'total_loss']
  np.testing.assert_allclose(values['Losses/clone_0/clone_loss'], mse / 2,
                             rtol=1e-5)
  np.testing.assert_allclose(values['Losses/clone_1/clone_loss'], mse / 2,
                             rtol=1e-5)
  np.testing.assert_allclose(values['Losses/regularization_loss'],
                             regularization, rtol=1e-5)
  np.testing.assert_allclose(values['total_loss'], mse + regularization,
                             rtol=1e-5)


def test_default_gpu_config_runs_on_cpu_with_soft_placement(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2)  # clone_on_cpu=False
  model = model_deploy.deploy(config, _linear_model_fn, [x, y],
                              optimizer=tf.train.GradientDescentOptimizer(0.1))
  assert model.clones[1].device == '/device:GPU:1'
  session_config = tf.ConfigProto(allow_soft_placement=True)
  with tf.Session(config=session_config) as sess:
    sess.run(tf.global_variables_initializer())
    losses = [sess.run(model.train_op) for _ in range(5)]
    sess.run(model.summary_op)
  assert losses[-1] < losses[0]


def test_keras_layer_variables_are_placed_on_ps_tasks(graph):
  import tf_keras  # pylint: disable=g-import-not-at-top
  config = DeploymentConfig(num_clones=2, num_ps_tasks=2)
  dense = tf_keras.layers.Dense(3, name='dense')
  clones = model_deploy.create_clones(config, lambda: dense(tf.ones([2, 4])))
  devices = {v.op.name.split('/')[-1]: v.op.device
             for v in tf.global_variables()}
  assert devices == {'kernel': '/job:ps/task:0/device:CPU:0',
                     'bias': '/job:ps/task:1/device:CPU:0'}
  assert len(dense.weights) == 2  # Built once, shared by both clones.
  assert [c.outputs.op.device for c in clones] == [
      '/job:worker/device:GPU:0', '/job:worker/device:GPU:1']


def test_string_constants_inside_clones_are_on_the_worker_cpu(graph):
  config = DeploymentConfig(num_clones=2, num_ps_tasks=1)

  def model_fn():
    return tf.constant('label', name='text'), tf.constant(1.0, name='one')

  clones = model_deploy.create_clones(config, model_fn)
  assert [c.outputs[0].op.device for c in clones] == [
      '/job:worker/device:CPU:0'] * 2
  assert [c.outputs[1].op.device for c in clones] == [
      '/job:worker/device:GPU:0', '/job:worker/device:GPU:1']


def _two_layer_model_fn(inputs, targets):
  net = slim.fully_connected(inputs, 2, activation_fn=None, scope='hidden')
  predictions = slim.fully_connected(net, 1, activation_fn=None,
                                     scope='output')
  tf.losses.mean_squared_error(targets, predictions)
  return predictions


def _variable_values(sess):
  return sess.run({v.op.name: v for v in tf.trainable_variables()})


def _changed_by_one_step(sess, train_op):
  sess.run(tf.global_variables_initializer())
  before = _variable_values(sess)
  sess.run(train_op)
  after = _variable_values(sess)
  return sorted(n for n in before if np.any(before[n] != after[n]))


def test_deploy_trains_only_var_list_chosen_after_the_clones(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  model = model_deploy.deploy(
      config, _two_layer_model_fn, [x, y],
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      var_list=lambda: slim.get_variables('output'))
  with tf.Session() as sess:
    assert _changed_by_one_step(sess, model.train_op) == [
        'output/biases', 'output/weights']


def test_deploy_trains_only_var_list_given_as_a_list(graph):
  x, y, _, _ = _regression_data()
  weights = tf.get_variable('weights', initializer=np.full(
      [3, 1], 0.5, np.float32))
  scale = tf.get_variable('scale', initializer=1.0)

  def model_fn(inputs, targets):
    tf.losses.mean_squared_error(targets, tf.matmul(inputs, weights) * scale)

  model = model_deploy.deploy(
      DeploymentConfig(num_clones=2, clone_on_cpu=True), model_fn, [x, y],
      optimizer=tf.train.GradientDescentOptimizer(0.1), var_list=[scale])
  with tf.Session() as sess:
    assert _changed_by_one_step(sess, model.train_op) == ['scale']


def test_deploy_runs_extra_update_ops_built_after_the_clones(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  counter = tf.get_variable('counter', [], initializer=tf.zeros_initializer(),
                            trainable=False)
  seen_variables = []

  def extra_update_ops():
    seen_variables.extend(v.op.name for v in slim.get_model_variables())
    return [tf.assign_add(counter, 1.0)]

  model = model_deploy.deploy(
      config, _linear_model_fn, [x, y],
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      update_ops=extra_update_ops)
  assert seen_variables == ['linear/weights', 'linear/biases']
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(3):
      sess.run(model.train_op)
    assert sess.run(counter) == 3.0


def test_deploy_averages_the_updated_weights_after_each_step(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  averages = tf.train.ExponentialMovingAverage(0.75)
  model = model_deploy.deploy(
      config, _linear_model_fn, [x, y],
      optimizer=tf.train.GradientDescentOptimizer(0.1),
      variable_averages=averages)
  assert sorted(v.op.name for v in tf.global_variables()
                if 'ExponentialMovingAverage' in v.op.name) == [
                    'linear/biases/ExponentialMovingAverage',
                    'linear/weights/ExponentialMovingAverage']
  weights = slim.get_variables_by_name('weights')[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    expected = sess.run(weights)  # The shadow starts at the weights.
    for _ in range(3):
      sess.run(model.train_op)
      expected = 0.75 * expected + 0.25 * sess.run(weights)
      np.testing.assert_allclose(sess.run(averages.average(weights)),
                                 expected, rtol=1e-6)


def test_sync_replicas_optimizer_applies_the_averages_on_the_chief(graph):
  x, y, _, _ = _regression_data()
  config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
  averages = tf.train.ExponentialMovingAverage(0.75)
  optimizer = tf.train.SyncReplicasOptimizer(
      tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=1,
      total_num_replicas=1)
  model = model_deploy.deploy(config, _linear_model_fn, [x, y],
                              optimizer=optimizer, variable_averages=averages)

  def ancestors(tensors):
    seen, stack = set(), [getattr(t, 'op', t) for t in tensors]
    while stack:
      op = stack.pop()
      if op.name not in seen:
        seen.add(op.name)
        stack.extend(i.op for i in op.inputs)
        stack.extend(op.control_inputs)
    return seen

  runner = optimizer.get_chief_queue_runner()
  averaging = {op.name for op in graph.get_operations()
               if op.type == 'AssignSubVariableOp'
               and op.name.startswith('ExponentialMovingAverage/')}
  assert averaging == {
      'ExponentialMovingAverage/AssignMovingAvg/AssignSubVariableOp',
      'ExponentialMovingAverage/AssignMovingAvg_1/AssignSubVariableOp'}
  assert averaging <= ancestors(runner.enqueue_ops)
  # Not in the workers' step: once per global step, by the chief.
  assert not averaging & ancestors([model.train_op])
  with tf.train.MonitoredTrainingSession(
      hooks=[optimizer.make_session_run_hook(True)],
      stop_grace_period_secs=1) as sess:
    for _ in range(3):
      sess.run(model.train_op)


def test_deploy_merges_extra_summaries(graph):
  x, y, _, _ = _regression_data()
  extra = tf.summary.scalar('extra', tf.constant(2.0), collections=[])
  model = model_deploy.deploy(
      DeploymentConfig(num_clones=2, clone_on_cpu=True), _linear_model_fn,
      [x, y], optimizer=tf.train.GradientDescentOptimizer(0.1),
      summaries=[extra])
  assert 'extra' in {t.op.name for t in model.summary_op.op.inputs}


@pytest.mark.parametrize('kwargs,message', [
    (dict(variable_averages='EMA'), 'variable_averages needs an optimizer'),
    (dict(optimizer='SGD', variable_averages='EMA', variables_to_average=[]),
     'variable_averages: no variables to average'),
    (dict(optimizer='SYNC_WITH_EMA', variable_averages='EMA'),
     'variable_averages given both to deploy'),
])
def test_deploy_rejects_misused_variable_averages(graph, kwargs, message):
  x, y, _, _ = _regression_data()
  averages = tf.train.ExponentialMovingAverage(0.9)
  values = {
      'EMA': averages,
      'SGD': tf.train.GradientDescentOptimizer(0.1),
      'SYNC_WITH_EMA': tf.train.SyncReplicasOptimizer(
          tf.train.GradientDescentOptimizer(0.1), 1, 1,
          variable_averages=averages, variables_to_average=[]),
  }
  kwargs = {k: values.get(v, v) if isinstance(v, str) else v
            for k, v in kwargs.items()}
  with pytest.raises(ValueError, match=message):
    model_deploy.deploy(DeploymentConfig(clone_on_cpu=True),
                        _linear_model_fn, [x, y], **kwargs)
