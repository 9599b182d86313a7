"""benchmarks/keras_mwms_train.py, the tf-keras MultiWorkerMirroredStrategy
peer of the cluster benchmarks: its LeNet against nets/lenet.py, its
progress lines, and two worker processes on 127.0.0.1 run as the benchmarks
run them (cluster_runs.run_cluster).
"""

import json
import os
import re
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_runs
import cluster_throughput
import keras_mwms_train
from clusters import script_contract
from nets import lenet
from tf2_compat.slim_compat import slim, tf
# pylint: enable=g-import-not-at-top,wrong-import-position

# conv1 5x5x1x32 + 32, conv2 5x5x32x64 + 64, fc3 3136x1024 + 1024,
# fc4 1024x10 + 10.
LENET_PARAMETERS = 832 + 51264 + 3212288 + 10250


def _slim_lenet_shapes():
  """{'conv1/weights': shape, ...} of nets/lenet.py's variables."""
  with tf.Graph().as_default():
    with slim.arg_scope(lenet.lenet_arg_scope()):
      lenet.lenet(tf.zeros([1, 28, 28, 1]), num_classes=10, is_training=True)
    return {variable.op.name[len('LeNet/'):]: variable.shape.as_list()
            for variable in tf.global_variables()}


def test_keras_lenet_has_the_variables_of_nets_lenet():
  slim_shapes = _slim_lenet_shapes()
  model = keras_mwms_train.lenet(weight_decay=0.00004)
  keras_shapes = {}
  for layer in model.layers:
    for weight in layer.weights:
      kind = 'weights' if 'kernel' in weight.name else 'biases'
      keras_shapes['%s/%s' % (layer.name, kind)] = weight.shape.as_list()
  assert keras_shapes == slim_shapes
  assert keras_shapes['fc3/weights'] == [3136, 1024]
  assert model.count_params() == LENET_PARAMETERS == 3274634


def test_keras_weight_decay_is_slims_half_sum_of_squares():
  # slim.l2_regularizer(s)(w) = s * sum(w^2) / 2; the model adds one loss
  # per weighted layer.
  model = keras_mwms_train.lenet(weight_decay=0.5)
  kernels = [layer.kernel for layer in model.layers
             if hasattr(layer, 'kernel')]
  assert [layer.name for layer in model.layers if hasattr(layer, 'kernel')
          ] == ['conv1', 'conv2', 'fc3', 'fc4']
  expected = sum(0.5 * float(tf.reduce_sum(tf.square(k))) / 2
                 for k in kernels)
  assert float(tf.add_n(model.losses)) == pytest.approx(expected, rel=1e-5)


def test_the_empty_ps_job_of_an_all_reduce_cluster_is_dropped():
  config = json.dumps({
      'cluster': {'ps': [], 'worker': ['127.0.0.1:4001', '127.0.0.1:4002']},
      'task': {'type': 'worker', 'index': 1}})
  assert json.loads(keras_mwms_train.workers_only(config)) == {
      'cluster': {'worker': ['127.0.0.1:4001', '127.0.0.1:4002']},
      'task': {'type': 'worker', 'index': 1}}


def test_progress_lines_give_the_mean_loss_since_the_previous_line():
  printed = []
  callback = keras_mwms_train.ProgressLines(
      every_n_steps=2, global_batch_size=64, learning_rate=0.01,
      print_fn=lambda line, flush: printed.append(line))
  callback.on_train_begin()
  # Keras's running means of the epoch: steps 1-2 average 4.0, steps 3-4
  # average 2.0 (so the epoch's mean after step 4 is 3.0).
  for batch, running_mean in enumerate([5.0, 4.0, 10 / 3, 3.0]):
    callback.on_train_batch_end(batch, {'loss': running_mean})
  assert len(printed) == 2
  steps_and_losses = [
      re.match(r'INFO:tensorflow:step (\d+): loss = ([\d.]+), learning rate '
               r'= 0.01, [\d.]+ examples/sec$', line).groups()
      for line in printed]
  assert steps_and_losses == [('2', '4.0000'), ('4', '2.0000')]
  for line in printed:
    assert cluster_runs.STEP_LINE.search(line)
    assert script_contract.STEP_LINE.search(line)


def test_the_keras_setup_runs_the_keras_program_with_the_benchmark_flags():
  setup = {s.name: s for s in cluster_throughput.SETUPS}[
      '2 workers Keras MultiWorkerMirroredStrategy']
  assert (setup.num_ps, setup.num_workers, setup.batches) == (0, 2, 2)
  assert setup.program.script == os.path.join(REPO, 'benchmarks',
                                              'keras_mwms_train.py')
  args = types.SimpleNamespace(batch_size=32, steps=200, log_every=10)
  flags = setup.program.arguments(args, '/data', '/train', ['--x=1'])
  assert flags == [
      '--dataset_dir=/data', '--batch_size=32', '--learning_rate=0.01',
      '--max_number_of_steps=200', '--log_every_n_steps=10',
      '--num_readers=1', '--num_preprocessing_threads=1',
      '--train_dir=/train', '--x=1']
  # Every flag is one keras_mwms_train.py takes.
  parsed = keras_mwms_train.parse_args(flags[:-1])
  assert (parsed.batch_size, parsed.learning_rate) == (32, 0.01)


def test_every_other_setup_runs_train_image_classifier():
  programs = {s.name: s.program.script for s in cluster_throughput.SETUPS}
  del programs['2 workers Keras MultiWorkerMirroredStrategy']
  assert set(programs.values()) == {os.path.join(
      REPO, 'train_image_classifier.py')}
  assert len(programs) == 10


@pytest.fixture(scope='module')
def two_workers(tmp_path_factory, digits_dir):
  """(exit status, StepRecorder, {task: weights summary}) of 2 workers
  training 30 steps on 127.0.0.1, through cluster_runs.run_cluster."""
  train_dir = str(tmp_path_factory.mktemp('keras_mwms'))
  args = types.SimpleNamespace(batch_size=32, steps=30, log_every=10,
                               intra_op_threads=1, inter_op_threads=1,
                               run_timeout=240)
  status, recorder = cluster_runs.run_cluster(
      args, digits_dir, train_dir, 0, 2, [],
      program=cluster_runs.KERAS_MWMS)
  summaries = {}
  for task in ('worker0', 'worker1'):
    path = os.path.join(train_dir, 'weights_%s.json' % task)
    if os.path.exists(path):
      with open(path) as summary:
        summaries[task] = json.load(summary)
  return status, recorder, summaries


def _losses(recorder, task):
  """[(step, loss)] of a task's progress lines."""
  return [(int(step), float(loss)) for step, loss in re.findall(
      r'\[%s\] INFO:tensorflow:step (\d+): loss = ([\d.]+)' % task,
      ''.join(recorder.lines))]


@pytest.mark.slow
@pytest.mark.xdist_group('loopback')
def test_two_keras_workers_log_steps_and_end_with_the_same_weights(
    two_workers):
  status, recorder, summaries = two_workers
  output = ''.join(recorder.lines)[-3000:]
  assert status == 0, output
  for task in ('worker0', 'worker1'):
    losses = _losses(recorder, task)
    assert [step for step, _ in losses] == [10, 20, 30], output
    # The global batch's loss (the strategy reduces it): from about 10 at
    # the start to about 3.5 by step 30 on this machine.
    assert losses[-1][1] < 0.6 * losses[0][1], losses
  assert _losses(recorder, 'worker0') == _losses(recorder, 'worker1')
  assert sorted(sample[1] for sample in recorder.samples) == [
      10, 10, 20, 20, 30, 30]
  assert summaries['worker0'] == summaries['worker1']
  assert summaries['worker0']['parameters'] == LENET_PARAMETERS
