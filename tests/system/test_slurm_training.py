"""Training under a real Slurm: srun starts the ps and worker tasks.

A one-node Slurm on 127.0.0.1 (tests/system/slurm_cluster.sh: munged,
slurmctld, slurmd, configured in a temporary directory) runs for the
module and is stopped afterwards, whatever the tests did. Each srun is
bounded by its --time and a subprocess timeout; the stop cancels whatever
job is left.
"""

import os
import re
import socket
import subprocess
import sys

import pytest

from tests.script_runner import REPO
from tests.script_runner import script_env
from tests.test_cluster_e2e import _checkpoint_step
from tests.test_cluster_e2e import _train_args

SLURM_CLUSTER = os.path.join(REPO, 'tests', 'system', 'slurm_cluster.sh')
SRUN_TIMEOUT = 600
STEPS = 30


@pytest.fixture(scope='module')
def slurm_env(tmp_path_factory):
  """The environment in which srun reaches the test's own Slurm."""
  directory = str(tmp_path_factory.mktemp('slurm'))
  subprocess.run(['bash', SLURM_CLUSTER, 'start', directory], check=True,
                 timeout=120)
  try:
    env = script_env()
    env['SLURM_CONF'] = os.path.join(directory, 'slurm.conf')
    yield env
  finally:
    subprocess.run(['bash', SLURM_CLUSTER, 'stop', directory], check=True,
                   timeout=120)


def free_port_base(count):
  """A port p such that p .. p + count - 1 are free on 127.0.0.1 now."""
  for _ in range(100):
    with socket.socket() as probe:
      probe.bind(('127.0.0.1', 0))
      base = probe.getsockname()[1]
    if base + count > 65536:
      continue
    sockets = []
    try:
      for port in range(base, base + count):
        sock = socket.socket()
        sockets.append(sock)
        sock.bind(('127.0.0.1', port))
      return base
    except OSError:
      continue
    finally:
      for sock in sockets:
        sock.close()
  raise AssertionError('no %d consecutive free ports found' % count)


def srun(env, num_tasks, *args, script='train_image_classifier.py'):
  """`srun -n num_tasks` of `script --slurm args`; returns its output."""
  command = ['srun', '--ntasks=%d' % num_tasks, '--kill-on-bad-exit=1',
             '--time=10', '--label', sys.executable, script, '--slurm'
            ] + list(args)
  env = dict(env, TF_NUM_INTRAOP_THREADS='1', TF_NUM_INTEROP_THREADS='1',
             PYTHONUNBUFFERED='1')
  process = subprocess.Popen(command, cwd=REPO, env=env, text=True,
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
  try:
    output, _ = process.communicate(timeout=SRUN_TIMEOUT)
  finally:
    process.kill()  # The fixture's stop cancels the job's tasks.
  assert process.returncode == 0, output[-6000:]
  return output


def started(output):
  """{srun task: what it says it started}, from its first log line."""
  return {int(rank): what for rank, what in re.findall(
      r'^ *(\d+): INFO:tensorflow:started (.*?) \(cluster from Slurm',
      output, re.M)}


def test_srun_n_3_trains_with_1_ps_and_2_workers(slurm_env, digits_dir,
                                                tmp_path):
  base = free_port_base(3)
  train_dir = str(tmp_path / 'train')
  output = srun(slurm_env, 3, '--num_ps_tasks=1',
                '--slurm_port_base=%d' % base,
                *_train_args(digits_dir, train_dir, STEPS))
  assert started(output) == {
      0: 'ps task 0 (localhost:%d) of a cluster of 1 ps and 2 workers' % base,
      1: 'worker task 0 (localhost:%d) of a cluster of 1 ps and 2 workers'
         % (base + 1),
      2: 'worker task 1 (localhost:%d) of a cluster of 1 ps and 2 workers'
         % (base + 2),
  }
  # Asynchronous steps: the other worker's steps in flight take the global
  # step past the last by up to 2 (as in tests/test_cluster_e2e.py).
  assert STEPS <= _checkpoint_step(train_dir) <= STEPS + 2
  # The ps task ended by itself, once both workers had.
  assert re.search(r'^ *0: INFO:tensorflow:every worker has ended: stopping '
                   r'this ps task$', output, re.M)
  assert re.search(r'^ *0: INFO:tensorflow:ps task 0 stopped$', output, re.M)


def test_srun_n_2_trains_with_all_reduce_and_task_0_evaluates(
    slurm_env, digits_dir, tmp_path):
  base = free_port_base(2)
  train_dir = str(tmp_path / 'train')
  output = srun(slurm_env, 2, '--slurm_port_base=%d' % base,
                *_train_args(digits_dir, train_dir, STEPS))
  assert started(output) == {
      rank: 'worker task %d (localhost:%d) of a cluster of 0 ps and 2 '
            'workers' % (rank, base + rank) for rank in range(2)}
  assert _checkpoint_step(train_dir) == STEPS

  output = srun(slurm_env, 2, '--dataset_name=digits',
                '--dataset_dir=%s' % digits_dir, '--dataset_split_name=test',
                '--model_name=lenet', '--checkpoint_path=%s' % train_dir,
                '--eval_dir=%s' % (tmp_path / 'eval'),
                script='eval_image_classifier.py')
  evaluated = re.findall(r'^ *(\d+): digits test: accuracy [\d.]+%% on 360 '
                         r'examples \(checkpoint step %d\)$' % STEPS,
                         output, re.M)
  assert evaluated == ['0'], output[-4000:]
  assert re.search(r'^ *1: srun task 1 of 2: only task 0 evaluates',
                   output, re.M), output[-4000:]
