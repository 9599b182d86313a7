"""deployment.launch with a stand-in task script (no TensorFlow: fast)."""

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from deployment import launch
from tests.script_runner import REPO
from tests.script_runner import process_alive

# Prints its task, then: a ps serves until SIGTERM; a worker does what argv[1]
# says ('ok', 'fail1': worker 1 exits 3, 'hang': sleeps).
FAKE_TASK = textwrap.dedent("""\
    import json, os, signal, sys, time
    config = json.loads(os.environ['TF_CONFIG'])
    job, index = config['task']['type'], config['task']['index']
    threads = os.environ.get('TF_NUM_INTRAOP_THREADS')
    print('%s %d of %s, threads=%s' % (job, index, config['cluster'], threads))
    if job == 'ps':
      signal.signal(signal.SIGTERM, lambda *unused: sys.exit(0))
      while True:
        time.sleep(0.05)
    if sys.argv[1] == 'fail1' and index == 1:
      sys.exit(3)
    if sys.argv[1] == 'hang':
      time.sleep(600)
    print('done')
""")


class _Lines(io.StringIO):
  """A thread-safe output sink for LocalCluster."""

  def __init__(self):
    super().__init__()
    self._lock = threading.Lock()

  def write(self, text):
    with self._lock:
      return super().write(text)


@pytest.fixture
def fake_task(tmp_path):
  path = tmp_path / 'fake_task.py'
  path.write_text(FAKE_TASK)
  return str(path)



@pytest.fixture
def local_cluster():
  """Makes LocalClusters and stops whatever is left of them afterwards."""
  made = []

  def make(*args, **kwargs):
    kwargs.setdefault('output', _Lines())
    kwargs.setdefault('grace_secs', 5)
    made.append(launch.LocalCluster(*args, **kwargs))
    return made[-1]

  yield make
  for cluster in made:
    cluster.stop()


def test_free_ports_are_distinct_and_on_loopback():
  ports = launch.free_ports(5)
  assert len(set(ports)) == 5
  assert all(1024 <= port < 65536 for port in ports)


def test_tf_config_of_a_task():
  config = json.loads(launch.tf_config(['127.0.0.1:1'], ['127.0.0.1:2'],
                                       'worker', 0))
  assert config == {'cluster': {'ps': ['127.0.0.1:1'],
                                'worker': ['127.0.0.1:2']},
                    'task': {'type': 'worker', 'index': 0}}


@pytest.mark.parametrize('returncode,status', [(0, 0), (3, 3), (-9, 137),
                                               (-15, 143)])
def test_exit_status_is_shell_style(returncode, status):
  assert launch.exit_status(returncode) == status


@pytest.mark.parametrize('num_ps,num_workers,message', [
    (1, 0, 'num_workers must be >= 1, got 0'),
    (-1, 1, 'num_ps must be >= 0, got -1'),
    (0, 2, '2 workers need at least one ps task'),
])
def test_bad_cluster_sizes(num_ps, num_workers, message):
  with pytest.raises(ValueError, match=message):
    launch.LocalCluster(['x.py'], num_ps, num_workers)


def test_command_is_required():
  with pytest.raises(SystemExit):
    launch.parse_args(['--num_ps', '1'])


def test_success_prefixes_lines_and_stops_ps(local_cluster, fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'ok'], 2, 2, output=output,
                          env={'TF_NUM_INTRAOP_THREADS': '1'})
  cluster.start()
  assert cluster.wait(timeout=60) == 0
  log = output.getvalue()
  for name in ('ps0', 'ps1', 'worker0', 'worker1'):
    job, index = name[:-1], name[-1]
    assert re.search(r'^\[%s\] %s %s of .*threads=1$' % (name, job, index),
                     log, re.M), log
  assert log.count('] done') == 2
  assert '[launch] all workers finished; stopping the ps tasks' in log
  # Stopped by SIGTERM, which the ps tasks turn into a clean exit.
  assert [cluster.processes[n].returncode for n in ('ps0', 'ps1')] == [0, 0]


def test_failed_worker_stops_the_rest_and_gives_its_status(local_cluster,
                                                           fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'fail1'], 1, 3, output=output)
  cluster.start()
  assert cluster.wait(timeout=60) == 3
  assert all(p.poll() is not None for p in cluster.processes.values())
  assert ('[launch] worker1 failed with exit status 3; stopping the cluster'
          in output.getvalue())


def test_timeout_stops_everything_with_124(local_cluster, fake_task):
  cluster = local_cluster([fake_task, 'hang'], 1, 2)
  cluster.start()
  started = time.monotonic()
  assert cluster.wait(timeout=2) == 124
  assert time.monotonic() - started < 15
  assert all(p.poll() is not None for p in cluster.processes.values())


def _start_launcher(*args):
  command = [sys.executable, '-m', 'deployment.launch'] + list(args)
  env = dict(os.environ, PYTHONPATH=REPO)
  return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True,
                          start_new_session=True)


def _read_until(process, pattern, timeout=30):
  """Lines of process's output up to the first matching `pattern`."""
  lines = []
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    line = process.stdout.readline()
    if not line:
      break
    lines.append(line)
    if re.search(pattern, line):
      return lines
  raise AssertionError('no line matching %r in:\n%s' % (pattern,
                                                        ''.join(lines)))


def _task_pids(lines):
  return [int(m.group(1)) for m in
          (re.search(r'^\[launch\] \w+: pid (\d+)', l) for l in lines) if m]


@pytest.mark.parametrize('signum,status', [(signal.SIGTERM, 143),
                                           (signal.SIGINT, 130)])
def test_launcher_signal_stops_every_task(fake_task, signum, status):
  process = _start_launcher('--num_ps', '1', '--num_workers', '2',
                            '--grace_secs', '3', '--', fake_task, 'hang')
  pids = []
  try:
    lines = _read_until(process, r'^\[worker1\] worker 1')
    pids = _task_pids(lines)
    assert len(pids) == 3
    process.send_signal(signum)
    rest, _ = process.communicate(timeout=30)
    assert process.returncode == status, ''.join(lines) + rest
    assert '[launch] interrupted by signal %d; every task is stopped' % (
        signum) in rest
    assert not [pid for pid in pids if process_alive(pid)]
  finally:
    _kill_all(process, pids)


def test_tasks_die_with_a_killed_launcher(fake_task):
  process = _start_launcher('--num_ps', '1', '--num_workers', '1', '--',
                            fake_task, 'hang')
  pids = []
  try:
    pids = _task_pids(_read_until(process, r'^\[worker0\] worker 0'))
    process.kill()
    process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
      time.sleep(0.1)
    assert not [pid for pid in pids if process_alive(pid)]
  finally:
    _kill_all(process, pids)


def _kill_all(launcher, pids):
  try:
    os.killpg(launcher.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  launcher.wait(timeout=10)
  launcher.stdout.close()
  for pid in pids:
    if process_alive(pid):
      os.kill(pid, signal.SIGKILL)


def test_usage_without_command_exits_2(tmp_path):
  del tmp_path
  process = _start_launcher('--num_ps', '1')
  try:
    output, _ = process.communicate(timeout=30)
  finally:
    _kill_all(process, [])
  assert process.returncode == 2
  assert 'give the script to run after --' in output
