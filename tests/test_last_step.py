"""training/last_step.py: updates of concurrent workers stop at the last
step, in one session with threads as the workers."""

import threading

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from deployment import apply_when
from training import hooks
from training import last_step


def _run_workers(guarded, last, workers=4, steps_each=40):
  """Runs `steps_each` updates from each of `workers` threads at once on a
  weight whose gradient is 1 (SGD, rate 1: each applied update takes 1
  off); returns (global step, weight, the count of steps run)."""
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    weight = tf.Variable(0.0)
    # Locked updates: none is lost to another thread's.
    optimizer = tf.train.GradientDescentOptimizer(1.0, use_locking=True)
    if guarded:
      optimizer = last_step.StopsAtLastStep(optimizer, last)
    update = optimizer.apply_gradients(
        optimizer.compute_gradients(weight),
        global_step=global_step)
    with tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=4)
                   ) as session:
      session.run(tf.global_variables_initializer())
      barrier = threading.Barrier(workers)

      def worker():
        barrier.wait()
        for _ in range(steps_each):
          session.run(update)

      threads = [threading.Thread(target=worker) for _ in range(workers)]
      for thread in threads:
        thread.start()
      for thread in threads:
        thread.join(timeout=120)
      assert not any(thread.is_alive() for thread in threads)
      return tuple(session.run([global_step, weight])) + (
          workers * steps_each,)


def test_concurrent_updates_stop_at_the_last_step():
  step, weight, run = _run_workers(guarded=True, last=37)
  assert run == 160
  assert step == 37
  assert weight == -37.0  # 37 updates applied, not one more.


def test_without_the_claim_every_update_is_applied():
  step, weight, _ = _run_workers(guarded=False, last=37)
  assert (step, weight) == (160, -160.0)


def test_a_single_worker_is_refused_after_the_last_step():
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    weight = tf.Variable(1.0)
    optimizer = last_step.StopsAtLastStep(
        tf.train.MomentumOptimizer(0.1, 0.9), 3)
    update = optimizer.apply_gradients(
        optimizer.compute_gradients(2.0 * weight), global_step=global_step)
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      seen = []
      for _ in range(5):
        session.run(update)
        seen.append(tuple(session.run([global_step, weight])))
  # Momentum: w -= 0.1 * (2 + 0.9 * previous accumulation).
  np.testing.assert_allclose([w for _, w in seen],
                             [0.8, 0.42, -0.122, -0.122, -0.122], rtol=1e-5)
  assert [s for s, _ in seen] == [1, 2, 3, 3, 3]


def test_other_attributes_are_the_wrapped_optimizers():
  optimizer = tf.train.AdamOptimizer(0.5)
  guarded = last_step.StopsAtLastStep(optimizer, 10)
  assert guarded.get_name() == 'Adam'
  assert guarded._lr == 0.5  # pylint: disable=protected-access


@pytest.mark.parametrize('last', [1, 2])
def test_the_global_step_never_passes_a_small_last_step(last):
  step, weight, _ = _run_workers(guarded=True, last=last, steps_each=10)
  assert (step, weight) == (last, -float(last))


def _saved_steps(saver_hook_class, checkpoint_dir):
  """Trains 15 steps while another session increments the global step as
  fast as it can, saving a checkpoint after each with `saver_hook_class`
  (a StepSnapshot's hook, or the plain one); returns [(the step a
  checkpoint is named after, the global step it holds)]."""
  server = tf.distribute.Server.create_local_server()
  with tf.Graph().as_default() as graph:
    global_step = tf.train.get_or_create_global_step()
    weight = tf.Variable(1.0, name='weight')
    step = global_step.assign_add(1)
    if saver_hook_class is last_step.SnapshotCheckpointSaverHook:
      snapshot = last_step.StepSnapshot(global_step)
      saver = tf.train.Saver({'global_step': snapshot.variable,
                              'weight': weight}, max_to_keep=100)
      hook = saver_hook_class(snapshot, checkpoint_dir, save_steps=1,
                              saver=saver)
    else:
      saver = tf.train.Saver(max_to_keep=100)
      hook = saver_hook_class(checkpoint_dir, save_steps=1, saver=saver)
    other_worker = threading.Event()

    def step_elsewhere():
      # The default graph is the thread's own: name the graph.
      with tf.Session(server.target, graph=graph) as elsewhere:
        while not other_worker.is_set():
          elsewhere.run(step)

    creator = tf.train.ChiefSessionCreator(
        master=server.target,
        scaffold=tf.train.Scaffold(saver=tf.train.Saver()))
    with tf.train.MonitoredSession(creator, hooks=[hook]) as session:
      thread = threading.Thread(target=step_elsewhere)
      thread.start()
      try:
        for _ in range(15):
          session.run(step)
      finally:
        other_worker.set()
        thread.join(timeout=30)
  state = tf.train.get_checkpoint_state(checkpoint_dir)
  return [(int(path.rsplit('-', 1)[1]),
           int(tf.train.load_checkpoint(path).get_tensor('global_step')))
          for path in state.all_model_checkpoint_paths]


@pytest.mark.xdist_group('loopback')
def test_each_checkpoint_is_named_after_the_step_it_holds(tmp_path):
  saved = _saved_steps(last_step.SnapshotCheckpointSaverHook,
                       str(tmp_path / 'snapshot'))
  assert len(saved) >= 10
  assert [named for named, _ in saved] == [held for _, held in saved]
  # The other session really stepped in between.
  assert saved[-1][0] > 15


@pytest.mark.xdist_group('loopback')
def test_without_the_snapshot_names_lag_the_steps_held(tmp_path):
  saved = _saved_steps(hooks.CheckpointSaverHook, str(tmp_path / 'plain'))
  assert any(named != held for named, held in saved), saved


@pytest.mark.parametrize('live', [False, True])
def test_a_run_whose_gradients_are_dead_claims_no_step(live):
  # Accumulation between updates, or a non-finite update skipped: the
  # gradients reach apply_gradients through a Switch, dead on such runs.
  with tf.Graph().as_default():
    global_step = tf.train.get_or_create_global_step()
    weight = tf.Variable(0.0)
    apply_now = tf.placeholder(tf.bool, [])
    optimizer = last_step.StopsAtLastStep(
        tf.train.GradientDescentOptimizer(1.0), 10)
    gradient = apply_when.when_true(tf.constant(1.0), apply_now)
    update = apply_when.either_way(
        apply_now, optimizer.apply_gradients([(gradient, weight)],
                                             global_step=global_step))
    with tf.Session() as session:
      session.run(tf.global_variables_initializer())
      for _ in range(3):
        session.run(update, {apply_now: live})
      assert session.run([global_step, weight]) == (
          [3, -3.0] if live else [0, 0.0])
