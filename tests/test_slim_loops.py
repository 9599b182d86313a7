"""tf-slim's own loops on TF 2.21, built in a tf.Graph, eager left on.

Each test builds its graph under `with tf.Graph().as_default()` (the `graph`
fixture) and never calls disable_eager_execution: the way upstream Slim
programs run once `tf2_compat.slim_compat` is imported.
"""

import glob
import os
import threading
import time
import warnings

import numpy as np
import pytest

from tf2_compat import slim_loops
from tf2_compat.slim_compat import slim, tf
from datasets import dataset_factory

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


# A linear model whose loss goes to 0: y = x . [1, -2, 0.5].
FEATURES = np.random.RandomState(0).randn(32, 3).astype(np.float32)
TARGETS = FEATURES.dot(np.array([[1.0], [-2.0], [0.5]], np.float32))


def _regression_loss():
  predictions = slim.fully_connected(tf.constant(FEATURES), 1,
                                     activation_fn=None, scope='linear')
  return tf.losses.mean_squared_error(tf.constant(TARGETS), predictions)


def _slow_train_step(session, train_op, global_step, train_step_kwargs):
  # Long enough for the Supervisor's timer threads to run at least once.
  time.sleep(0.02)
  return slim.learning.train_step(session, train_op, global_step,
                                  train_step_kwargs)


def _events(logdir):
  """(summary tags, session log statuses) of every event file in logdir."""
  tags, statuses = set(), []
  for path in glob.glob(os.path.join(logdir, 'events.out.tfevents.*')):
    for event in tf.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
      if event.HasField('session_log'):
        statuses.append(event.session_log.status)
  return tags, statuses


def _checkpoint_value(logdir, name):
  return tf.train.load_variable(tf.train.latest_checkpoint(logdir), name)


# slim.learning.train


def test_train_runs_the_supervisor_threads_in_graph_mode(graph, tmp_path):
  loss = _regression_loss()
  tf.summary.scalar('regression_loss', loss)
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(0.1))
  final_loss = slim.learning.train(
      train_op, str(tmp_path), train_step_fn=_slow_train_step,
      number_of_steps=60, save_summaries_secs=1, save_interval_secs=1,
      log_every_n_steps=1000)
  tags, statuses = _events(str(tmp_path))
  assert 'regression_loss' in tags             # the summary thread
  assert 'global_step/sec' in tags             # the step-counter thread
  checkpoint = tf.SessionLog.CHECKPOINT        # the timed-checkpoint thread
  assert checkpoint in statuses
  assert final_loss < 0.01 * float(np.mean(TARGETS ** 2))


def test_without_the_fix_the_step_counter_thread_fails(graph, tmp_path):
  # Pins the TF 2.21 behaviour tf2_compat.slim_loops exists for: when this
  # test fails, TensorFlow fixed it and the wrappers can go.
  train_op = slim.learning.create_train_op(
      _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
  slim_loops.uninstall()
  try:
    with pytest.raises(TypeError, match='out of scope'):
      slim.learning.train(
          train_op, str(tmp_path), train_step_fn=_slow_train_step,
          number_of_steps=60, save_summaries_secs=1, save_interval_secs=0)
  finally:
    slim_loops.install()
  assert slim_loops.installed()


def test_train_leaves_eager_execution_on(tmp_path):
  with tf.Graph().as_default():
    train_op = slim.learning.create_train_op(
        _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
    slim.learning.train(train_op, str(tmp_path), number_of_steps=5,
                        save_summaries_secs=1, save_interval_secs=1)
  assert tf.executing_eagerly()
  assert float(tf.reduce_sum(tf.constant([1.0, 2.0]))) == 3.0
  in_a_new_thread = []
  thread = threading.Thread(
      target=lambda: in_a_new_thread.append(tf.executing_eagerly()))
  thread.start()
  thread.join()
  assert in_a_new_thread == [True]


def test_train_from_eager_code_enters_the_graph_it_is_given(tmp_path):
  graph = tf.Graph()
  with graph.as_default():
    train_op = slim.learning.create_train_op(
        _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
  assert tf.executing_eagerly()
  slim.learning.train(train_op, str(tmp_path), graph=graph, number_of_steps=3,
                      save_summaries_secs=1, save_interval_secs=1)
  assert _checkpoint_value(str(tmp_path), 'global_step') == 3
  assert tf.executing_eagerly()


def test_train_stops_at_number_of_steps(graph, tmp_path):
  train_op = slim.learning.create_train_op(
      _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
  slim.learning.train(train_op, str(tmp_path), number_of_steps=7,
                      save_summaries_secs=0, save_interval_secs=0)
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-7')
  assert _checkpoint_value(str(tmp_path), 'global_step') == 7


def test_train_ends_without_writing_to_its_closed_summary_writer(
    graph, tmp_path):
  train_op = slim.learning.create_train_op(
      _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    slim.learning.train(train_op, str(tmp_path), number_of_steps=3,
                        save_summaries_secs=0, save_interval_secs=0)
  assert [str(w.message) for w in caught
          if 'closed FileWriter' in str(w.message)] == []
  _, statuses = _events(str(tmp_path))
  assert statuses.count(tf.SessionLog.STOP) == 1


def _supervisor(logdir):
  tf.train.get_or_create_global_step()
  return tf.train.Supervisor(logdir=logdir, save_model_secs=0,
                             save_summaries_secs=0)


def test_stopping_a_supervisor_twice_logs_one_stop(graph, tmp_path):
  supervisor = _supervisor(str(tmp_path))
  supervisor.stop()
  supervisor.stop()
  _, statuses = _events(str(tmp_path))
  assert statuses.count(tf.SessionLog.STOP) == 1


def test_stop_still_closes_a_summary_writer_reopened(graph, tmp_path):
  supervisor = _supervisor(str(tmp_path))
  supervisor.stop()
  supervisor.summary_writer.reopen()
  supervisor.stop()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    supervisor.summary_writer.add_session_log(tf.SessionLog())
  assert ['closed FileWriter' in str(w.message) for w in caught] == [True]


def test_train_calls_init_fn_to_restore_a_checkpoint(tmp_path):
  first, second = str(tmp_path / 'first'), str(tmp_path / 'second')
  with tf.Graph().as_default():
    train_op = slim.learning.create_train_op(
        _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
    slim.learning.train(train_op, first, number_of_steps=20,
                        save_summaries_secs=0, save_interval_secs=0)
  trained = _checkpoint_value(first, 'linear/weights')
  with tf.Graph().as_default():
    # A learning rate of 0: the weights are exactly what init_fn restored.
    train_op = slim.learning.create_train_op(
        _regression_loss(), tf.train.GradientDescentOptimizer(0.0))
    init_fn = slim.assign_from_checkpoint_fn(
        tf.train.latest_checkpoint(first), slim.get_model_variables())
    slim.learning.train(train_op, second, number_of_steps=1, init_fn=init_fn,
                        save_summaries_secs=0, save_interval_secs=0)
  np.testing.assert_array_equal(_checkpoint_value(second, 'linear/weights'),
                                trained)
  assert np.abs(trained).sum() > 0  # Not the zeros an initializer gives.


def test_train_with_a_sync_replicas_optimizer_ends_at_once(graph, tmp_path):
  optimizer = tf.train.SyncReplicasOptimizer(
      tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=1,
      total_num_replicas=1)
  train_op = slim.learning.create_train_op(_regression_loss(), optimizer)
  start = time.time()
  final_loss = slim.learning.train(
      train_op, str(tmp_path), number_of_steps=30, sync_optimizer=optimizer,
      save_summaries_secs=1, save_interval_secs=1)
  # Not the Supervisor's 120 s grace period for the chief's aggregation
  # thread, which waits for gradients after the last step.
  assert time.time() - start < 60
  assert _checkpoint_value(str(tmp_path), 'global_step') == 30
  assert final_loss < 0.01 * float(np.mean(TARGETS ** 2))
  runner = optimizer.get_chief_queue_runner()
  assert 'create_threads' not in vars(runner)  # Only during train().


def test_train_on_a_master_as_chief_then_as_a_worker(tmp_path):
  server = tf.train.Server.create_local_server()

  def build():
    train_op = slim.learning.create_train_op(
        _regression_loss(), tf.train.GradientDescentOptimizer(0.1))
    return train_op, tf.train.get_global_step()

  with tf.Graph().as_default():
    train_op, _ = build()
    slim.learning.train(train_op, str(tmp_path), master=server.target,
                        is_chief=True, number_of_steps=5,
                        save_summaries_secs=1, save_interval_secs=1)
  # A worker initializes nothing: it finds the chief's variables on the
  # server and continues from global step 5.
  with tf.Graph().as_default():
    train_op, global_step = build()
    slim.learning.train(train_op, None, master=server.target, is_chief=False,
                        number_of_steps=8)
    with tf.Session(server.target) as session:
      assert session.run(global_step) == 8


# slim.learning.create_train_op


def test_create_train_op_clips_the_gradient_norm(graph):
  weights = tf.Variable(tf.zeros([2]), name='weights')
  direction = np.array([3.0, 4.0], np.float32)  # gradient, norm 5
  loss = tf.reduce_sum(weights * direction)
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(1.0), clip_gradient_norm=2.0)
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run(train_op)
    np.testing.assert_allclose(session.run(weights), -direction * 2.0 / 5.0,
                               rtol=1e-6)


def test_create_train_op_runs_the_update_ops_collection(graph):
  loss = _regression_loss()
  counter = tf.Variable(0, name='counter')
  tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, counter.assign_add(1))
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(0.1))
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    for _ in range(3):
      session.run(train_op)
    assert session.run(counter) == 3


def test_create_train_op_runs_only_the_update_ops_given(graph):
  loss = _regression_loss()
  in_collection = tf.Variable(0, name='in_collection')
  given = tf.Variable(0, name='given')
  tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, in_collection.assign_add(1))
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(0.1),
      update_ops=[given.assign_add(1)])
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    session.run(train_op)
    assert session.run([in_collection, given]) == [0, 1]


def test_create_train_op_trains_only_variables_to_train(graph):
  loss = _regression_loss()
  weights, biases = slim.get_variables('linear')
  assert weights.op.name == 'linear/weights'
  train_op = slim.learning.create_train_op(
      loss, tf.train.GradientDescentOptimizer(0.1),
      variables_to_train=[biases])
  with tf.Session() as session:
    session.run(tf.global_variables_initializer())
    before = session.run([weights, biases])
    session.run(train_op)
    after = session.run([weights, biases])
  np.testing.assert_array_equal(after[0], before[0])
  assert not np.array_equal(after[1], before[1])


# slim.evaluation


def _save_linear_model(checkpoint_dir, weights, step):
  """Writes a checkpoint of linear/weights (3x1) and linear/biases."""
  with tf.Graph().as_default():
    slim.fully_connected(tf.zeros([1, 3]), 1, activation_fn=None,
                         scope='linear')
    global_step = tf.train.get_or_create_global_step()
    assignments = [slim.get_variables_by_name('weights')[0].assign(weights),
                   global_step.assign(step)]
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      session.run(assignments)
      return tf.train.Saver().save(
          session, os.path.join(checkpoint_dir, 'model.ckpt'),
          global_step=step)


def _sign_accuracy():
  """Accuracy of sign(x . w) against sign(x . [1, -2, 0.5]), streamed.

  Returns:
    (names_to_values, names_to_updates) of slim.metrics.aggregate_metric_map.
  """
  queue = tf.train.slice_input_producer([FEATURES, TARGETS > 0],
                                        shuffle=False)
  features, labels = tf.train.batch(queue, batch_size=8)
  predictions = slim.fully_connected(features, 1, activation_fn=None,
                                     scope='linear') > 0
  return slim.metrics.aggregate_metric_map({
      'accuracy': tf.metrics.accuracy(labels, predictions)})


def test_evaluate_once_restores_the_checkpoint_and_streams_metrics(graph,
                                                                   tmp_path):
  # Weights with the true signs on two of three inputs.
  checkpoint = _save_linear_model(str(tmp_path), [[1.0], [-2.0], [-0.5]], 10)
  expected = np.mean((FEATURES.dot([1.0, -2.0, -0.5]) > 0)
                     == (TARGETS[:, 0] > 0))
  values, updates = _sign_accuracy()
  tf.summary.scalar('eval/accuracy', values['accuracy'])
  results = slim.evaluation.evaluate_once(
      '', checkpoint, str(tmp_path / 'eval'), num_evals=4,  # 4 x 8 = 32
      eval_op=list(updates.values()), final_op=values)
  assert results['accuracy'] == pytest.approx(expected)
  assert 0.5 < expected < 1.0
  tags, _ = _events(str(tmp_path / 'eval'))
  assert 'eval/accuracy' in tags


def test_evaluation_loop_evaluates_the_latest_checkpoint(graph, tmp_path):
  _save_linear_model(str(tmp_path), [[-1.0], [2.0], [-0.5]], 1)
  _save_linear_model(str(tmp_path), [[1.0], [-2.0], [0.5]], 2)  # exact
  values, updates = _sign_accuracy()
  results = slim.evaluation.evaluation_loop(
      '', str(tmp_path), str(tmp_path / 'eval'), num_evals=4,
      eval_op=list(updates.values()), final_op=values,
      eval_interval_secs=1, max_number_of_evaluations=1, timeout=10)
  assert results['accuracy'] == 1.0


# slim.queues, slim.prefetch_queue, slim.dataset_data_provider


def test_queue_runners_context_feeds_then_stops_its_threads(graph):
  producer = tf.train.range_input_producer(100, shuffle=False)
  numbers = tf.train.batch([producer.dequeue()], batch_size=10,
                           num_threads=1)
  before = set(threading.enumerate())
  with tf.Session() as session:
    with slim.queues.QueueRunners(session):
      batches = [session.run(numbers) for _ in range(3)]
  np.testing.assert_array_equal(np.concatenate(batches), np.arange(30))
  left = [t for t in set(threading.enumerate()) - before if t.is_alive()]
  assert not left


def test_prefetch_queue_delivers_every_batch(graph):
  producer = tf.train.range_input_producer(60, shuffle=False, num_epochs=1)
  numbers = tf.train.batch([producer.dequeue()], batch_size=6,
                           num_threads=2, capacity=12)
  prefetched = slim.prefetch_queue.prefetch_queue([numbers], capacity=2,
                                                  num_threads=2)
  batch = prefetched.dequeue()
  seen = []
  with tf.Session() as session:
    session.run(tf.local_variables_initializer())
    with slim.queues.QueueRunners(session):
      for _ in range(10):
        seen.append(session.run(batch))
  assert sorted(np.concatenate(seen).tolist()) == list(range(60))


def test_dataset_data_provider_reads_a_project_dataset(digits_dir):
  dataset = dataset_factory.get_dataset('digits', 'test', digits_dir)
  read = []
  with tf.Graph().as_default():
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, shuffle=False, num_epochs=1)
    image, label = provider.get(['image', 'label'])
    assert provider.num_samples() == 360
    assert image.shape.as_list() == [8, 8, 1]
    with tf.Session() as session:
      session.run(tf.local_variables_initializer())
      with slim.queues.QueueRunners(session):
        try:
          while True:
            read.append(session.run([image, label]))
        except tf.errors.OutOfRangeError:
          pass
  # Every test record once, in file order: what tf.data reads, eagerly.
  expected = [
      int(tf.io.parse_single_example(record, dataset.keys_to_features)
          ['image/class/label'])
      for record in tf.data.TFRecordDataset(dataset.data_sources)]
  assert [int(label) for _, label in read] == expected
  assert all(image.dtype == np.uint8 and image.shape == (8, 8, 1)
             for image, _ in read)


# tf2_compat.slim_loops


def test_a_looper_thread_runs_in_its_creators_graph(graph):
  seen = []
  coordinator = tf.train.Coordinator()

  def record():
    seen.append((tf.executing_eagerly(), tf.get_default_graph()))
    coordinator.request_stop()

  thread = tf.train.LooperThread.loop(coordinator, None, record)
  coordinator.join([thread], stop_grace_period_secs=10)
  assert seen == [(False, graph)]


def test_a_looper_thread_created_by_eager_code_stays_eager():
  seen = []
  coordinator = tf.train.Coordinator()

  def record():
    seen.append(tf.executing_eagerly())
    coordinator.request_stop()

  thread = tf.train.LooperThread.loop(coordinator, None, record)
  coordinator.join([thread], stop_grace_period_secs=10)
  assert seen == [True]


def test_installing_twice_wraps_once():
  assert slim_loops.installed()
  assert slim_loops.install() == []


WRAPPED = ['LooperThread.__init__', 'LooperThread.run', 'Supervisor.stop',
           'tf_slim.learning.train']


def test_uninstall_puts_the_originals_back():
  owners = {'LooperThread': tf.train.LooperThread,
            'Supervisor': tf.train.Supervisor,
            'tf_slim.learning': slim.learning}
  wrapped = {}
  for name in WRAPPED:
    owner, attribute = name.rsplit('.', 1)
    wrapped[name] = (owners[owner], attribute,
                     vars(owners[owner])[attribute])
  slim_loops.uninstall()
  try:
    assert not slim_loops.installed()
    for owner, attribute, wrapper in wrapped.values():
      assert vars(owner)[attribute] is wrapper._slim_compat_original  # pylint: disable=protected-access
  finally:
    assert slim_loops.install() == WRAPPED
