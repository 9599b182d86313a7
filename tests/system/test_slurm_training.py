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
import time

import pytest

from tests.script_runner import REPO
from tests.script_runner import script_env
from tests.test_cluster_e2e import _checkpoint_step
from tests.test_cluster_e2e import _train_args

SLURM_CLUSTER = os.path.join(REPO, 'tests', 'system', 'slurm_cluster.sh')
SRUN_TIMEOUT = 600
STEPS = 30
# A run that nobody stops saves only at its end.
ONLY_THE_FINAL_SAVE = '--save_interval_secs=0'


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


def start_srun(env, num_tasks, *args, script='train_image_classifier.py',
               job_name='slim', minutes=10):
  """Starts `srun -n num_tasks` of `script --slurm args`, a job limited to
  `minutes`; returns the process, its output (stdout and stderr) a text
  pipe."""
  command = ['srun', '--ntasks=%d' % num_tasks, '--kill-on-bad-exit=1',
             '--time=%d' % minutes, '--label', '--job-name=%s' % job_name,
             sys.executable, script, '--slurm'] + list(args)
  env = dict(env, TF_NUM_INTRAOP_THREADS='1', TF_NUM_INTEROP_THREADS='1',
             PYTHONUNBUFFERED='1')
  return subprocess.Popen(command, cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def srun(env, num_tasks, *args, script='train_image_classifier.py'):
  """`srun -n num_tasks` of `script --slurm args`; returns its output."""
  process = start_srun(env, num_tasks, *args, script=script)
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
                *_train_args(digits_dir, train_dir, STEPS,
                             ONLY_THE_FINAL_SAVE))
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
                *_train_args(digits_dir, train_dir, STEPS,
                             ONLY_THE_FINAL_SAVE))
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


@pytest.mark.parametrize('ending', ['scancel', 'time_limit'])
def test_the_end_of_the_job_lets_the_chief_save_the_step_it_reached(
    slurm_env, digits_dir, tmp_path, ending):
  base = free_port_base(3)
  train_dir = str(tmp_path / 'train')
  job_name = 'end-%d' % base
  # A time limit of 1 minute, Slurm's least: the job ends 60 to about 90 s
  # after it started (slurmctld checks the limits every 30 s or so).
  process = start_srun(slurm_env, 3, '--num_ps_tasks=1',
                       '--slurm_port_base=%d' % base,
                       *_train_args(digits_dir, train_dir, 100000),
                       job_name=job_name,
                       minutes=1 if ending == 'time_limit' else 10)
  try:
    if ending == 'scancel':
      deadline = time.monotonic() + SRUN_TIMEOUT
      while (_checkpoint_step(train_dir) or 0) < 5:
        assert process.poll() is None, process.stdout.read()[-6000:]
        assert time.monotonic() < deadline
        time.sleep(0.5)
      subprocess.run(['scancel', '--name=%s' % job_name], env=slurm_env,
                     check=True, timeout=30)
    # Either way Slurm sends SIGTERM to every task of the step at once,
    # then SIGKILL KillWait (30 s, the default) later.
    output, _ = process.communicate(timeout=SRUN_TIMEOUT)
  finally:
    process.kill()
  # The chief's last save comes after the SIGTERM: the step it reached.
  after = output.split('1: INFO:tensorflow:SIGTERM: stopping after the step '
                       'in progress, then saving a checkpoint\n', 1)
  assert len(after) == 2, output[-6000:]
  saved = re.findall(r'^ *1: INFO:tensorflow:Saving checkpoints for (\d+) ',
                     after[1], re.M)
  # One save, or two: a timed save (every second here) after the step in
  # progress, then the final one when the other worker's last step has
  # moved the global step on since.
  assert 1 <= len(saved) <= 2, output[-6000:]
  assert _checkpoint_step(train_dir) == int(saved[-1]) >= 5
  # The chief then says it stopped, once its session is closed. At the
  # time limit that close hung in 4 runs of 11 (in TensorFlow's
  # LocalMaster::CloseSession, after the save) until Slurm's SIGKILL.
  if ending == 'scancel':
    assert re.search(r'^ *1: INFO:tensorflow:SIGTERM: stopped; saved %s/'
                     r'model\.ckpt-%s$' % (re.escape(train_dir), saved[0]),
                     output, re.M), output[-6000:]
  # The ps task served on for that save.
  assert re.search(r'^ *0: INFO:tensorflow:SIGTERM: this ps task serves '
                   r'until no worker listens, so that the chief can save$',
                   output, re.M), output[-6000:]
