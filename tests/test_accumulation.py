"""Gradient accumulation and clipping in deploy(): k micro-steps of batch b
equal one step of batch k*b; clipping uses the norm of the applied gradient."""

import re
import time

import numpy as np
import pytest

from deployment import model_deploy
from deployment import update
from tf2_compat.slim_compat import slim, tf
from tests.script_runner import run_script

TOLERANCE = dict(rtol=1e-5, atol=1e-6)
BATCH = 3  # Per clone per micro-step.


def _examples(count):
  rng = np.random.RandomState(11)
  features = rng.randn(count, 5).astype(np.float32)
  labels = rng.randint(0, 3, count).astype(np.int64)
  return features, labels


def _dense_model_fn(iterator):
  def model_fn():
    features, labels = iterator.get_next()
    net = slim.fully_connected(
        features, 6, weights_initializer=tf.truncated_normal_initializer(
            seed=5), scope='hidden')
    logits = slim.fully_connected(
        net, 3, activation_fn=None,
        weights_initializer=tf.truncated_normal_initializer(seed=6),
        scope='logits')
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
  return model_fn


def _sparse_model_fn(iterator):
  def model_fn():
    features, labels = iterator.get_next()
    ids = tf.cast(tf.abs(features[:, :2]) * 3, tf.int64) % 7
    embeddings = tf.get_variable(
        'embeddings', [7, 4],
        initializer=tf.truncated_normal_initializer(seed=8))
    net = tf.reduce_sum(tf.nn.embedding_lookup(embeddings, ids), axis=1)
    logits = slim.fully_connected(
        net, 3, activation_fn=None,
        weights_initializer=tf.truncated_normal_initializer(seed=9),
        scope='logits')
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
  return model_fn


def _run(num_clones, batch, runs, make_model_fn=_dense_model_fn,
         optimizer_fn=lambda: tf.train.AdamOptimizer(0.05), **deploy_kwargs):
  """Trains `runs` runs of the train op; returns weights and global steps."""
  features, labels = _examples(96)
  config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                         clone_on_cpu=True)
  with tf.Graph().as_default():
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch))
    model = model_deploy.deploy(config, make_model_fn(iterator),
                                optimizer=optimizer_fn(), **deploy_kwargs)
    global_step = tf.train.get_global_step()
    with tf.Session() as sess:
      sess.run([tf.global_variables_initializer(),
                tf.local_variables_initializer()])
      steps = []
      for _ in range(runs):
        sess.run(model.train_op)
        steps.append(int(sess.run(global_step)))
      weights = sess.run({v.op.name: v for v in tf.trainable_variables()})
  return weights, steps


def _assert_same_weights(weights, reference):
  assert sorted(weights) == sorted(reference)
  for name, value in reference.items():
    np.testing.assert_allclose(weights[name], value, err_msg=name,
                               **TOLERANCE)


def test_four_micro_steps_equal_one_step_of_four_times_the_batch():
  accumulated, steps = _run(
      2, BATCH, 8, update=update.UpdateOptions(accumulation_steps=4))
  reference, reference_steps = _run(2, 4 * BATCH, 2)
  assert steps == [0, 0, 0, 1, 1, 1, 1, 2]
  assert reference_steps == [1, 2]
  _assert_same_weights(accumulated, reference)


def test_without_accumulation_the_micro_steps_differ():
  plain, steps = _run(2, BATCH, 8)
  reference, _ = _run(2, 4 * BATCH, 2)
  assert steps == [1, 2, 3, 4, 5, 6, 7, 8]
  with pytest.raises(AssertionError):
    _assert_same_weights(plain, reference)


def test_sparse_gradients_accumulate_exactly():
  accumulated, steps = _run(
      1, BATCH, 4, make_model_fn=_sparse_model_fn,
      update=update.UpdateOptions(accumulation_steps=2))
  reference, _ = _run(1, 2 * BATCH, 2, make_model_fn=_sparse_model_fn)
  assert steps == [0, 1, 1, 2]
  _assert_same_weights(accumulated, reference)


def test_accumulation_with_a_sync_replicas_optimizer():
  features, labels = _examples(96)

  def train(batch, runs, **kwargs):
    config = model_deploy.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    with tf.Graph().as_default():
      iterator = tf.data.make_one_shot_iterator(
          tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch))
      optimizer = tf.train.SyncReplicasOptimizer(
          tf.train.GradientDescentOptimizer(0.5), replicas_to_aggregate=1,
          total_num_replicas=1)
      model = model_deploy.deploy(config, _dense_model_fn(iterator),
                                  optimizer=optimizer, **kwargs)
      global_step = tf.train.get_global_step()
      steps = []
      with tf.train.MonitoredTrainingSession(
          hooks=[optimizer.make_session_run_hook(True)],
          stop_grace_period_secs=1) as sess:
        for _ in range(runs):
          sess.run(model.train_op)
          steps.append(int(sess.run(global_step)))
        # The chief's queue runner applies the aggregated gradient after the
        # worker's run has returned: wait for the last update to land.
        deadline = time.time() + 30
        while sess.run(global_step) < expected_updates:
          assert time.time() < deadline, 'the sync update never landed'
          time.sleep(0.05)
        weights = sess.run({v.op.name: v for v in tf.trainable_variables()})
    return weights, steps

  # One update: SyncReplicasOptimizer drops the push that follows an
  # initial token as stale, with or without accumulation.
  expected_updates = 1
  accumulated, steps = train(
      BATCH, 3, update=update.UpdateOptions(accumulation_steps=3))
  reference, _ = train(3 * BATCH, 1)
  # Nothing is pushed before the third micro-step, so no update can land.
  assert steps[:2] == [0, 0]
  _assert_same_weights(accumulated, reference)


def test_a_resumed_run_starts_a_new_accumulation(tmp_path):
  features, labels = _examples(96)
  config = model_deploy.DeploymentConfig(clone_on_cpu=True)
  with tf.Graph().as_default():
    batches = tf.placeholder(tf.float32, [None, 5]), tf.placeholder(
        tf.int64, [None])
    iterator = tf.data.make_initializable_iterator(
        tf.data.Dataset.from_tensor_slices(batches).batch(BATCH))
    model = model_deploy.deploy(
        config, _dense_model_fn(iterator),
        optimizer=tf.train.GradientDescentOptimizer(0.5),
        update=update.UpdateOptions(accumulation_steps=4))
    saver = tf.train.Saver()
    micro_step = [v for v in tf.local_variables()
                  if v.op.name == 'accumulation/micro_step'][0]
    accumulators = [v for v in tf.local_variables()
                    if v.op.name.endswith('_accumulator')]
    assert len(accumulators) == 4
    feed = {batches[0]: features, batches[1]: labels}
    with tf.Session() as sess:
      sess.run([tf.global_variables_initializer(),
                tf.local_variables_initializer(), iterator.initializer], feed)
      sess.run(model.train_op)
      sess.run(model.train_op)  # Interrupted after 2 of 4 micro-steps.
      assert sess.run(micro_step) == 2
      path = saver.save(sess, str(tmp_path / 'model.ckpt'))
      saved = sess.run({v.op.name: v for v in tf.trainable_variables()})
    assert not [name for name, _ in tf.train.list_variables(path)
                if 'accumulat' in name]
    with tf.Session() as sess:  # The resumed run.
      saver.restore(sess, path)
      sess.run([tf.local_variables_initializer(), iterator.initializer], feed)
      assert sess.run(micro_step) == 0
      assert all(not np.any(a) for a in sess.run(accumulators))
      for _ in range(3):
        sess.run(model.train_op)
      assert sess.run(tf.train.get_global_step()) == 0
      sess.run(model.train_op)
      assert sess.run(tf.train.get_global_step()) == 1
      resumed = sess.run({v.op.name: v for v in tf.trainable_variables()})
  # The update is the mean over the resumed run's own 4 micro-batches: the
  # first 4 batches again (the iterator restarted), not 2 old + 2 new.
  reference, _ = _run(1, 4 * BATCH, 1,
                      optimizer_fn=lambda: tf.train.GradientDescentOptimizer(
                          0.5))
  _assert_same_weights(resumed, reference)
  assert any(np.any(saved[n] != resumed[n]) for n in saved)


def _gradient_norm(num_clones, batch):
  """The global norm of the first step's gradient (to choose a clip norm)."""
  features, labels = _examples(96)
  config = model_deploy.DeploymentConfig(num_clones=num_clones,
                                         clone_on_cpu=True)
  with tf.Graph().as_default():
    iterator = tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices((features, labels)).batch(batch))
    clones = model_deploy.create_clones(config, _dense_model_fn(iterator))
    _, grads_and_vars = model_deploy.optimize_clones(
        clones, tf.train.GradientDescentOptimizer(1.0))
    norm = tf.global_norm([g for g, _ in grads_and_vars])
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      return sess.run(norm)


SGD = lambda: tf.train.GradientDescentOptimizer(0.5)  # pylint: disable=unnecessary-lambda-assignment


def test_clipping_uses_the_norm_summed_over_the_clones():
  clip = 0.5 * _gradient_norm(1, 2 * BATCH)  # Clips the first step.
  clipping = update.UpdateOptions(clip_gradient_norm=clip)
  clipped, _ = _run(2, BATCH, 3, optimizer_fn=SGD, update=clipping)
  reference, _ = _run(1, 2 * BATCH, 3, optimizer_fn=SGD, update=clipping)
  _assert_same_weights(clipped, reference)
  unclipped, _ = _run(2, BATCH, 3, optimizer_fn=SGD)
  with pytest.raises(AssertionError):
    _assert_same_weights(unclipped, clipped)


def test_clipping_uses_the_norm_of_the_accumulated_mean():
  clip = 0.5 * _gradient_norm(1, 2 * BATCH)
  accumulated, _ = _run(1, BATCH, 6, optimizer_fn=SGD,
                        update=update.UpdateOptions(accumulation_steps=2,
                                                    clip_gradient_norm=clip))
  reference, _ = _run(1, 2 * BATCH, 3, optimizer_fn=SGD,
                      update=update.UpdateOptions(clip_gradient_norm=clip))
  _assert_same_weights(accumulated, reference)


@pytest.mark.parametrize('kwargs,message', [
    (dict(accumulation_steps=0), 'accumulation_steps must be an integer >= 1, '
     'got 0'),
    (dict(accumulation_steps=2.5), 'accumulation_steps must be an integer'),
    (dict(clip_gradient_norm=-1.0), 'clip_gradient_norm must be > 0'),
])
def test_bad_training_options_are_named(graph, kwargs, message):
  with pytest.raises(ValueError, match=message):
    model_deploy.deploy(model_deploy.DeploymentConfig(clone_on_cpu=True),
                        lambda: tf.losses.add_loss(tf.constant(1.0)),
                        optimizer=SGD(), **kwargs)


@pytest.mark.slow
def test_training_script_accumulates_and_clips(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  result = run_script(
      'train_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
      '--num_clones=2', '--clone_on_cpu', '--batch_size=8',
      '--accumulation_steps=3', '--clip_gradient_norm=5', '--optimizer=sgd',
      '--max_number_of_steps=4', '--log_every_n_steps=1',
      '--train_dir=%s' % train_dir)
  assert result.returncode == 0, result.stdout[-3000:]
  assert ('global batch per step: 8 per clone x 2 clones x 3 micro-steps = '
          '48 examples') in result.stdout
  # 4 updates took 12 runs, each logged (but the first, which starts the
  # rate window) with the step it read: at most 3 runs per step value.
  logged = [int(s) for s in re.findall(r'step (\d+): loss', result.stdout)]
  assert len(logged) == 11 and logged == sorted(logged)
  assert max(logged.count(step) for step in set(logged)) == 3
  assert logged[-1] in (3, 4)  # Read before or after the last increment.
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert reader.get_tensor('global_step') == 4
