"""All-reduce replicas as real processes on 127.0.0.1, bounded in time.

The model of tests/test_all_reduce.py in worker processes, then the
training script under `python -m clusters.launch --num_ps 0`. Where the
launcher is not what a test is about, the workers are forked from the
tests' warm Python (tests/script_runner.py) instead: a fresh interpreter
per task would import TensorFlow again, most of such a test's time.
"""

import concurrent.futures
import os
import re
import signal
import threading
import time

import numpy as np
import pytest

from clusters import local_cluster
from clusters import machine
from tf2_compat.slim_compat import tf
from tests import test_all_reduce
from tests.script_runner import digits_accuracy
from tests.script_runner import kill_group
from tests.script_runner import start_script
from tests.test_cluster_e2e import LAUNCH_TIMEOUT
from tests.test_cluster_e2e import _Sink
from tests.test_cluster_e2e import _checkpoint_step
from tests.test_cluster_e2e import _train_args
from tests.test_cluster_e2e import _warm_run
from tests.test_cluster_e2e import launcher  # pylint: disable=unused-import

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


WORKER = os.path.join('tests', 'all_reduce_worker.py')
# A forked task's threads, as the launcher's --intra_op_threads 1
# --inter_op_threads 1 give its tasks: the two share this machine's cores.
ONE_THREAD = {'TF_NUM_INTRAOP_THREADS': '1', 'TF_NUM_INTEROP_THREADS': '1'}


def _fork_workers(script, args, clusters, env=None):
  """Starts worker task i of the all-reduce cluster `clusters[i]` (its
  worker addresses) as `script args`, forked from the warm Python.

  Returns:
    The processes, in task order; `_outputs` waits for them.
  """
  return [start_script(script, *args, env=dict(
      env or {}, TF_CONFIG=local_cluster.tf_config([], hosts, 'worker', index)))
          for index, hosts in enumerate(clusters)]


def _outputs(processes, timeout=LAUNCH_TIMEOUT):
  """The output of each process once all have exited.

  The pipes are read at once: a task blocked on a full pipe would stall
  the other one in the all-reduce. `timeout` only ends a hang; whatever is
  left then is killed.
  """
  with concurrent.futures.ThreadPoolExecutor(len(processes)) as pool:
    reads = [pool.submit(p.communicate, timeout=timeout) for p in processes]
    try:
      return [read.result()[0] for read in reads]
    finally:
      for process in processes:
        kill_group(process)


@pytest.fixture(scope='module')
def worker_results(tmp_path_factory):
  """{task index: arrays} of two worker processes run for 20 steps."""
  out = tmp_path_factory.mktemp('all_reduce')
  hosts = ['127.0.0.1:%d' % port for port in machine.free_ports(2)]
  processes = _fork_workers(WORKER, [str(out), '20'], [hosts, hosts],
                            env=ONE_THREAD)
  for process, output in zip(processes, _outputs(processes)):
    assert process.returncode == 0, output[-3000:]
  return {i: dict(np.load(str(out / ('worker%d.npz' % i)))) for i in (0, 1)}


def _named(arrays, prefix):
  return {k[len(prefix):]: v for k, v in arrays.items()
          if k.startswith(prefix)}


# The fast tier's real cluster: two tasks on 127.0.0.1, 20 steps of a model
# of a few hundred weights (each step a few milliseconds).
def test_two_worker_processes_equal_one_device_and_stay_bit_identical(
    worker_results):
  chief, other = worker_results[0], worker_results[1]
  # Seeds 1 and 2: the broadcast gave worker 1 the chief's start.
  for name, value in _named(chief, 'start/').items():
    np.testing.assert_array_equal(_named(other, 'start/')[name], value)
  for name, value in _named(chief, 'end/').items():
    np.testing.assert_array_equal(_named(other, 'end/')[name], value)
  # From the chief's start, one device with the whole batch takes the
  # same 20 steps.
  one_device = test_all_reduce.train_one_device(
      20, start=_named(chief, 'start/'))
  for name, value in one_device.end.items():
    np.testing.assert_allclose(_named(chief, 'end/')[name], value, atol=1e-5)
  np.testing.assert_allclose((chief['losses'] + other['losses']) / 2,
                             one_device.losses, atol=1e-5)


def _step_lines(log, worker):
  return [int(s) for s in re.findall(
      r'^\[%s\] INFO:tensorflow:step (\d+): loss' % worker, log, re.M)]


@pytest.mark.slow
def test_all_reduce_cluster_trains_then_resumes_after_a_restart(
    launcher, digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  args = _train_args(digits_dir, train_dir, 100000, '--num_clones=2')
  first = launcher(0, 2, *args)
  deadline = time.monotonic() + 120
  while (_checkpoint_step(train_dir) or 0) < 5:
    assert first.process.poll() is None, first.log()[-4000:]
    assert time.monotonic() < deadline, first.log()[-4000:]
    time.sleep(0.5)
  log = first.log()
  assert ('[worker1] INFO:tensorflow:global batch per step: 8 per clone x 2 '
          'clones x 2 workers (all-reduce) = 32 examples') in log
  first.process.send_signal(signal.SIGTERM)
  assert first.wait() == 128 + signal.SIGTERM
  stopped_at = _checkpoint_step(train_dir)
  # Only the chief wrote checkpoints and summaries into train_dir.
  assert not [f for f in os.listdir(train_dir) if 'worker1' in f]

  # The restart checks the script's resume, not the launcher (whose part
  # ended with its exit status): its workers are forked.
  log = _warm_run(0, 2, _train_args(digits_dir, train_dir, stopped_at + 5,
                                     '--num_clones=2'))
  assert ('[worker0] INFO:tensorflow:Restoring parameters from %s/model.ckpt-'
          '%d\n' % (train_dir, stopped_at)) in log
  # Worker 1 continued from the chief's global step, not from 0: the
  # broadcast gave it the restored variables. Every step is global. (The
  # progress log starts with the second step: it times step deltas.)
  steps = _step_lines(log, 'worker1')
  assert steps[-1] == stopped_at + 4 and steps[0] >= stopped_at, steps
  assert _step_lines(log, 'worker0') == steps
  assert _checkpoint_step(train_dir) == stopped_at + 5


def _relay(processes, sink):
  """Writes each process's output lines to `sink` as '[worker<i>] line',
  as the launcher would, from a thread per process; returns the threads."""
  threads = []
  for index, process in enumerate(processes):
    def relay(name='worker%d' % index, stream=process.stdout):
      for line in stream:
        sink.write('[%s] %s' % (name, line))
    threads.append(threading.Thread(target=relay, daemon=True))
    threads[-1].start()
  return threads


@pytest.mark.slow
def test_a_killed_worker_stops_the_other_within_the_timeout(digits_dir,
                                                            tmp_path):
  train_dir = str(tmp_path / 'train')
  hosts = ['127.0.0.1:%d' % port for port in machine.free_ports(2)]
  sink = _Sink()
  processes = _fork_workers(
      'train_image_classifier.py',
      _train_args(digits_dir, train_dir, 100000,
                  '--collective_timeout_secs=20'),
      [hosts, hosts], env=ONE_THREAD)
  try:
    relays = _relay(processes, sink)
    sink.wait_for(r'^\[worker1\] INFO:tensorflow:step 3:', LAUNCH_TIMEOUT)
    os.killpg(processes[1].pid, signal.SIGKILL)
    killed = time.monotonic()
    status = processes[0].wait(timeout=LAUNCH_TIMEOUT)
    waited = time.monotonic() - killed
  finally:
    for process in processes:
      kill_group(process)
  for relay in relays:
    relay.join(timeout=30)
  log = sink.text()
  assert status == 1, log[-4000:]
  assert waited < 20 + 15, waited
  assert re.search(
      r'^\[worker0\] error: the all-reduce between the 2 workers failed '
      r'\(collective op \S+, --collective_timeout_secs=20\): worker task 1 '
      r'\(%s\) stopped or never started. Restart the whole cluster \(the '
      r"launcher's --max_restarts does so by itself\): every worker resumes "
      r'from the latest checkpoint in %s$'
      % (re.escape(hosts[1]), re.escape(train_dir)), log, re.M), log[-4000:]


@pytest.mark.slow
def test_workers_given_different_clusters_stop_before_writing(digits_dir,
                                                             tmp_path):
  train_dir = str(tmp_path / 'train')
  ports = machine.free_ports(3)
  hosts = ['127.0.0.1:%d' % p for p in ports]
  args = _train_args(digits_dir, train_dir, 20, '--collective_timeout_secs=30')
  processes = _fork_workers('train_image_classifier.py', args,
                            [hosts[:2], hosts])
  outputs = _outputs(processes)
  for index, (process, output) in enumerate(zip(processes, outputs)):
    assert process.returncode == 2, output[-3000:]
    listed = hosts[:2] if index == 0 else hosts
    assert ('error: the all-reduce workers were given different clusters: '
            'this worker (task %d, from TF_CONFIG) lists %d workers, %s, and '
            'another lists other ones; give every task the same '
            '--worker_hosts (or TF_CONFIG cluster)\n'
            % (index, len(listed), ','.join(listed))) in output, output[-3000:]
  assert not os.path.exists(train_dir)


@pytest.mark.slow
def test_averaging_every_ten_steps_reaches_96_percent_on_digits(digits_dir,
                                                                 tmp_path):
  # Each worker trains on its own half of the data with Adam and its own
  # slots; every 10th step the two average their weights. 450 global steps
  # of 2 x 32 examples (20.1 epochs), the rate decaying to zero over them.
  # The floor keeps a margin below the runs of
  # benchmarks/results/averaging_accuracy.md (seeds and oneDNN's CPU
  # kernels on and off; one test digit is 0.28 points). 300 steps (13.4
  # epochs) left too little margin: 97.50% and 96.94% (oneDNN off, on).
  train_dir = str(tmp_path / 'train')
  log = _warm_run(0, 2, [
      '--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
      '--model_name=lenet', '--clone_on_cpu', '--batch_size=32',
      '--optimizer=adam', '--opt_epsilon=1e-4', '--learning_rate=0.005',
      '--learning_rate_decay_type=polynomial', '--num_epochs_per_decay=20.1',
      '--end_learning_rate=1e-5', '--replica_averaging_steps=10',
      '--max_number_of_steps=450', '--log_every_n_steps=100',
      '--save_interval_secs=600', '--shuffle_seed=1', '--random_seed=1',
      '--train_dir=%s' % train_dir],
      # Only ends a hang: the start, then 1 s a step (0.2 s alone on 2
      # cores; a machine loaded 15-fold took 0.8 s).
      timeout=120 + 450)
  assert _step_lines(log, 'worker1')[-1] == 399
  assert _checkpoint_step(train_dir) == 450
  accuracy = digits_accuracy(digits_dir, train_dir)
  print('averaging every 10 steps: %.2f%%' % accuracy)  # pytest -rP
  assert accuracy >= 96.0


@pytest.mark.slow
def test_script_syncs_batch_norm_over_every_clone_of_both_workers(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  log = _warm_run(0, 2, _train_args(
      digits_dir, train_dir, 3, '--model_name=mobilenet_v1_025',
      '--preprocessing_name=mobilenet_v1', '--train_image_size=32',
      '--batch_size=4', '--num_clones=2', '--sync_batch_norm'))
  for worker in ('worker0', 'worker1'):
    assert ('[%s] INFO:tensorflow:sync batch norm: each layer normalises '
            'over 4 clones x 4 = 16 examples\n' % worker) in log
  assert _step_lines(log, 'worker1') == _step_lines(log, 'worker0') == [1, 2]
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(train_dir))
  assert reader.get_tensor('global_step') == 3
  names = set(reader.get_variable_to_shape_map())
  assert 'MobilenetV1/Conv2d_0/BatchNorm/moving_variance' in names
  assert not [n for n in names if n.startswith('clone_')]
