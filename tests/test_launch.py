"""clusters.launch with a stand-in task script (no TensorFlow: fast)."""

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from clusters import launch
from clusters import local_cluster as local_cluster_module
from clusters import machine
from tests.line_reader import LineReader
from tests.script_runner import REPO
from tests.script_runner import process_alive
from tests.fake_clock import FakeClock

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')


# A ps task listens on its TF_CONFIG address and serves until SIGTERM, which
# it turns into a clean exit. A worker first connects to every ps (as a
# TensorFlow worker waits for its ps tasks), so by the time it prints, every
# ps task listens and handles SIGTERM. Then argv[1] decides: 'ok': workers
# print 'done'; 'fail1': worker 1 exits 3, the other workers hang; 'hang':
# workers hang; 'ps_quits': the ps exits 0 once every worker has connected,
# and the workers hang; 'ps_dies_once DIR': the first ps exits 7 once every
# worker has connected, leaving DIR/died; a ps started when DIR/died exists
# serves and leaves DIR/restarted, which the workers wait for before 'done'.
# 'saves_on_sigterm': workers hang; on SIGTERM they wait 0.5 s, as a chief
# saving, then print 'saved' if ps task 0 still accepts connections, else
# 'ps gone', and exit 0.
# 'worker1_stops': worker 1 prints a progress line and stops itself
# (SIGSTOP); the other workers print 'done'.
FAKE_TASK = textwrap.dedent("""\
    import json, os, signal, socket, sys, time
    config = json.loads(os.environ['TF_CONFIG'])
    job, index = config['task']['type'], config['task']['index']
    if job == 'ps':
      signal.signal(signal.SIGTERM, lambda *unused: sys.exit(0))
      host, port = config['cluster']['ps'][index].rsplit(':', 1)
      server = socket.create_server((host, int(port)))
    else:
      deadline = time.monotonic() + 30
      for address in config['cluster']['ps']:
        host, port = address.rsplit(':', 1)
        while True:
          try:
            socket.create_connection((host, int(port)), timeout=1).close()
            break
          except OSError:
            if time.monotonic() > deadline:
              sys.exit('no ps task listens at %s' % address)
            time.sleep(0.05)
    threads = os.environ.get('TF_NUM_INTRAOP_THREADS')
    print('%s %d of %s, threads=%s' % (job, index, config['cluster'], threads))
    if job == 'ps':
      print('ps %d listening on %s:%d' % ((index,) + server.getsockname()))
      if sys.argv[1] == 'ps_quits':
        for _ in config['cluster']['worker']:
          server.accept()
        sys.exit(0)
      if sys.argv[1] == 'ps_dies_once':
        marks = sys.argv[2]
        if not os.path.exists(os.path.join(marks, 'died')):
          for _ in config['cluster']['worker']:
            server.accept()
          open(os.path.join(marks, 'died'), 'w').close()
          sys.exit(7)
        open(os.path.join(marks, 'restarted'), 'w').close()
      while True:
        time.sleep(0.05)
    mode = sys.argv[1]
    if mode == 'saves_on_sigterm':
      def save(*unused):
        time.sleep(0.5)
        host, port = config['cluster']['ps'][0].rsplit(':', 1)
        try:
          socket.create_connection((host, int(port)), timeout=1).close()
          print('saved')
        except OSError:
          print('ps gone')
        sys.exit(0)
      signal.signal(signal.SIGTERM, save)
      time.sleep(600)
    if mode == 'worker1_stops' and index == 1:
      print('step 3: loss = 1.0', flush=True)
      os.kill(os.getpid(), signal.SIGSTOP)
    if mode in ('hang', 'ps_quits') or (mode == 'fail1' and index != 1):
      time.sleep(600)
    if mode == 'fail1':
      sys.exit(3)
    while mode == 'ps_dies_once' and not os.path.exists(
        os.path.join(sys.argv[2], 'restarted')):
      time.sleep(0.05)
    print('done')
""")

LOOPBACK_ADDRESS = re.compile(r'^127\.0\.0\.1:\d+$')


class _Lines(io.StringIO):
  """A thread-safe output sink for LocalCluster."""

  def __init__(self):
    super().__init__()
    self._lock = threading.Lock()

  def write(self, text):
    with self._lock:
      return super().write(text)

  def getvalue(self):
    with self._lock:
      return super().getvalue()


def _wait_for_text(output, text, timeout=30):
  """Waits until `text` is in the _Lines `output`; fails after `timeout`."""
  deadline = time.monotonic() + timeout
  while text not in output.getvalue():
    if time.monotonic() > deadline:
      raise AssertionError('no %r within %d s in:\n%s'
                           % (text, timeout, output.getvalue()))
    time.sleep(0.05)


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


def _return_codes(cluster):
  return {name: process.returncode
          for name, process in cluster.processes.items()}


def test_free_ports_are_distinct_and_bound_on_loopback(monkeypatch):
  bound = []

  class RecordingSocket(socket.socket):

    def bind(self, address):
      super().bind(address)
      bound.append(self.getsockname())

  monkeypatch.setattr(socket, 'socket', RecordingSocket)
  ports = machine.free_ports(5)
  assert len(set(ports)) == 5
  assert bound == [('127.0.0.1', port) for port in ports]


def test_free_ports_are_released_for_the_tasks():
  for port in machine.free_ports(3):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
      sock.bind(('127.0.0.1', port))  # Raises if free_ports still held it.


def test_tf_config_of_a_task():
  config = json.loads(local_cluster_module.tf_config(['127.0.0.1:1'], ['127.0.0.1:2'],
                                       'worker', 0))
  assert config == {'cluster': {'ps': ['127.0.0.1:1'],
                                'worker': ['127.0.0.1:2']},
                    'task': {'type': 'worker', 'index': 0}}


@pytest.mark.parametrize('returncode,status', [(0, 0), (3, 3), (-9, 137),
                                               (-15, 143)])
def test_exit_status_is_shell_style(returncode, status):
  assert local_cluster_module.exit_status(returncode) == status


@pytest.mark.parametrize('num_ps,num_workers,message', [
    (1, 0, 'num_workers must be >= 1, got 0'),
    (-1, 1, 'num_ps must be >= 0, got -1'),
    (0, 1, '--num_ps 0 --num_workers 1 is no cluster'),
])
def test_bad_cluster_sizes(num_ps, num_workers, message):
  with pytest.raises(ValueError, match=message):
    launch.LocalCluster(['x.py'], num_ps, num_workers)


def test_negative_ps_restarts_is_refused():
  with pytest.raises(ValueError, match='ps_restarts must be >= 0, got -1'):
    launch.LocalCluster(['x.py'], 1, 1, ps_restarts=-1)


def test_a_cluster_larger_than_the_memory_available_is_refused():
  with pytest.raises(ValueError) as error:
    machine.check_memory(1, 100, task_memory_mib=430, available_mib=8192)
  assert str(error.value) == (
      '--num_ps 1 --num_workers 100 would start 101 TensorFlow processes, '
      'about 42.4 GiB at 430 MiB each, and this machine has 8.0 GiB '
      'available (MemAvailable); start at most 19 tasks, or, if one task of '
      'your script takes less, say how much with --task_memory_mib (0 skips '
      'this check)')


@pytest.mark.parametrize('task_memory_mib,available_mib', [
    (430, 19 * 430), (0, 8192), (430, None)])
def test_a_cluster_that_fits_or_no_memory_figure_passes_the_check(
    task_memory_mib, available_mib):
  machine.check_memory(1, 18, task_memory_mib, available_mib)


class _FileLimit:
  """Stands in for resource.getrlimit/setrlimit of RLIMIT_NOFILE."""

  def __init__(self, soft, hard):
    self.limits = (soft, hard)

  def getrlimit(self, which):
    assert which == machine.resource.RLIMIT_NOFILE
    return self.limits

  def setrlimit(self, which, limits):
    assert which == machine.resource.RLIMIT_NOFILE
    self.limits = limits


def test_the_open_file_limit_is_raised_for_many_tasks(monkeypatch):
  limit = _FileLimit(1024, 4096)
  monkeypatch.setattr(machine.resource, 'getrlimit', limit.getrlimit)
  monkeypatch.setattr(machine.resource, 'setrlimit', limit.setrlimit)
  assert machine.make_room_for_files(10) is None
  assert machine.make_room_for_files(2000) == (
      '[launch] raised the open-file limit from 1024 to 2064: one pipe per '
      'task\n')
  assert limit.limits == (2064, 4096)


def test_more_tasks_than_the_hard_file_limit_allows_are_refused(monkeypatch):
  limit = _FileLimit(1024, 4096)
  monkeypatch.setattr(machine.resource, 'getrlimit', limit.getrlimit)
  with pytest.raises(ValueError, match=re.escape(
      '5000 tasks need about 5064 open files in the launcher (one pipe each),'
      ' and the limit is 4096 (ulimit -Hn); start fewer tasks, or raise the '
      'limit')):
    machine.make_room_for_files(5000)


def test_main_reports_bad_cluster_sizes_with_status_2(capsys):
  status = launch.main(['--num_ps', '0', '--num_workers', '1', '--', 'x.py'])
  assert status == 2
  assert capsys.readouterr().err == (
      'error: --num_ps 0 --num_workers 1 is no cluster: without ps tasks the '
      'workers all-reduce, which takes at least 2; run the script directly '
      'to train alone\n')


def test_command_is_required_with_usage_status_2(capsys):
  with pytest.raises(SystemExit) as exit_info:
    launch.parse_args(['--num_ps', '1'])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert error.startswith('usage: python -m clusters.launch [options] -- '
                          'SCRIPT [ARGS...]\n')
  assert error.endswith(
      'python -m clusters.launch: error: give the script to run after --, '
      'e.g. -- train_image_classifier.py --dataset_name=digits ...\n')


def test_command_after_double_dash_is_passed_as_given():
  args = launch.parse_args(['--num_workers', '3', '--', 'train.py',
                            '--num_ps=7', '--', 'x'])
  assert args.command == ['train.py', '--num_ps=7', '--', 'x']
  assert (args.num_ps, args.num_workers) == (1, 3)


def _launch_lines(log):
  """{task name: TF_CONFIG} from the launcher's '[launch] <task>: pid' lines."""
  return {m.group(1): json.loads(m.group(2)) for m in re.finditer(
      r'^\[launch\] (\w+): pid \d+, (.*)$', log, re.M)}


def test_every_task_gets_its_own_tf_config_on_loopback(local_cluster,
                                                       fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'ok'], 2, 2, output=output)
  every = cluster.ps_hosts + cluster.worker_hosts
  assert [bool(LOOPBACK_ADDRESS.match(address)) for address in every] == [
      True] * 4, every
  assert len(set(every)) == 4
  cluster.start()
  assert cluster.wait(timeout=60) == 0
  log = output.getvalue()
  configs = _launch_lines(log)
  expected_cluster = {'ps': cluster.ps_hosts, 'worker': cluster.worker_hosts}
  assert configs == {
      name: {'cluster': expected_cluster,
             'task': {'type': name[:-1], 'index': int(name[-1])}}
      for name in ('ps0', 'ps1', 'worker0', 'worker1')}
  # Each ps task could listen on the address it was given.
  for i, address in enumerate(cluster.ps_hosts):
    assert '[ps%d] ps %d listening on %s\n' % (i, i, address) in log, log


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
  assert sorted(re.findall(r'^\[(\w+)\] done$', log, re.M)) == [
      'worker0', 'worker1']
  assert '[launch] all workers finished; stopping the ps tasks\n' in log
  # Stopped by SIGTERM, which the ps tasks turn into a clean exit.
  assert _return_codes(cluster) == {'ps0': 0, 'ps1': 0, 'worker0': 0,
                                    'worker1': 0}


def test_failed_worker_stops_the_rest_and_gives_its_status(local_cluster,
                                                           fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'fail1'], 1, 3, output=output)
  cluster.start()
  assert cluster.wait(timeout=60) == 3
  assert ('[launch] worker1 failed with exit status 3; stopping the cluster'
          in output.getvalue())
  # worker0 and worker2 were hanging: the launcher stopped them.
  assert _return_codes(cluster) == {'ps0': 0, 'worker0': -signal.SIGTERM,
                                    'worker1': 3, 'worker2': -signal.SIGTERM}


def test_stop_ends_the_workers_while_the_ps_tasks_still_serve(
    local_cluster, fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'saves_on_sigterm'], 1, 2,
                          output=output)
  cluster.start()
  for name in ('worker0', 'worker1'):
    _wait_for_text(output, '[%s] worker %s of' % (name, name[-1]))
  cluster.stop()
  log = output.getvalue()
  # A chief saves on SIGTERM, from the variables its ps tasks hold.
  assert sorted(re.findall(r'^\[(worker\d)\] saved$', log, re.M)) == [
      'worker0', 'worker1'], log
  assert _return_codes(cluster) == {'ps0': 0, 'worker0': 0, 'worker1': 0}


def test_a_ps_task_that_ends_stops_the_cluster_with_status_1(local_cluster,
                                                            fake_task):
  output = _Lines()
  cluster = local_cluster([fake_task, 'ps_quits'], 1, 2, output=output)
  cluster.start()
  # A ps task serves until it is stopped, so even exit status 0 is a failure.
  assert cluster.wait(timeout=60) == 1
  assert ('[launch] ps0 failed with exit status 1; stopping the cluster'
          in output.getvalue())
  assert _return_codes(cluster) == {'ps0': 0, 'worker0': -signal.SIGTERM,
                                    'worker1': -signal.SIGTERM}


def _ps_dies_once(local_cluster, fake_task, marks_dir, ps_restarts):
  """Runs the 'ps_dies_once' cluster; returns it, its status and its log."""
  output = _Lines()
  cluster = local_cluster([fake_task, 'ps_dies_once', marks_dir], 1, 2,
                          output=output, ps_restarts=ps_restarts)
  cluster.start()
  status = cluster.wait(timeout=60)
  return cluster, status, output.getvalue()


def test_a_dead_ps_task_is_restarted_on_its_address_with_ps_restarts(
    local_cluster, fake_task, tmp_path):
  cluster, status, log = _ps_dies_once(local_cluster, fake_task,
                                       str(tmp_path), ps_restarts=1)
  assert status == 0
  address = cluster.ps_hosts[0]
  assert ('[launch] ps0 exited with status 7; restarting it on %s (0 more '
          'restart(s) allowed)\n' % address) in log
  # Both ps processes listened on the one address of the cluster.
  assert re.findall(r'^\[ps0\] ps 0 listening on (\S+)$', log, re.M) == [
      address, address]
  assert len(re.findall(r'^\[launch\] ps0: pid \d+,', log, re.M)) == 2
  assert sorted(re.findall(r'^\[(\w+)\] done$', log, re.M)) == [
      'worker0', 'worker1']
  assert _return_codes(cluster) == {'ps0': 0, 'worker0': 0, 'worker1': 0}


def test_a_ps_task_dying_past_its_restarts_stops_the_cluster(local_cluster,
                                                            fake_task,
                                                            tmp_path):
  cluster, status, log = _ps_dies_once(local_cluster, fake_task,
                                       str(tmp_path), ps_restarts=0)
  assert status == 7
  assert '[launch] ps0 failed with exit status 7; stopping the cluster' in log
  assert 'restarting' not in log
  assert _return_codes(cluster) == {'ps0': 7, 'worker0': -signal.SIGTERM,
                                    'worker1': -signal.SIGTERM}


def test_timeout_stops_everything_with_124(local_cluster, fake_task,
                                           monkeypatch):
  output = _Lines()
  cluster = local_cluster([fake_task, 'hang'], 1, 2, output=output)
  cluster.start()
  for i in range(2):
    _wait_for_text(output, '[worker%d] worker %d of' % (i, i))
  clock = FakeClock()
  monkeypatch.setattr(local_cluster_module, 'time', clock)
  assert cluster.wait(timeout=2, poll_secs=0.25) == 124
  # Polls until the clock is past the deadline: 9 x 0.25 s = 2.25 s > 2 s.
  assert clock.sleeps == [0.25] * 9
  assert '[launch] timeout after 2 s; stopping the cluster\n' in (
      output.getvalue())
  assert _return_codes(cluster) == {'ps0': 0, 'worker0': -signal.SIGTERM,
                                    'worker1': -signal.SIGTERM}


def _default_sigint():
  # A shell starts background jobs with SIGINT ignored, and Python keeps an
  # ignored SIGINT ignored: without this, the SIGINT test fails whenever
  # pytest itself runs in the background.
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_launcher(*args):
  command = [sys.executable, '-m', 'clusters.launch'] + list(args)
  env = dict(os.environ, PYTHONPATH=REPO)
  process = subprocess.Popen(command, cwd=REPO, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True,
                             preexec_fn=_default_sigint)
  return process, LineReader(process.stdout)


def _task_pids(lines):
  return [int(m.group(1)) for m in
          (re.search(r'^\[launch\] \w+: pid (\d+)', l) for l in lines) if m]


def _kill_all(launcher, reader, pids):
  try:
    os.killpg(launcher.pid, signal.SIGKILL)
  except ProcessLookupError:
    pass
  launcher.wait(timeout=10)
  for pid in pids:
    if process_alive(pid):
      os.kill(pid, signal.SIGKILL)
  reader.close()


@pytest.mark.parametrize('signum,status', [(signal.SIGTERM, 143),
                                           (signal.SIGINT, 130)])
def test_launcher_signal_stops_every_task(fake_task, signum, status):
  process, reader = _start_launcher('--num_ps', '1', '--num_workers', '2',
                                    '--grace_secs', '3', '--', fake_task,
                                    'hang')
  pids = []
  try:
    lines = reader.until(r'^\[worker1\] worker 1')
    pids = _task_pids(lines)
    assert len(pids) == 3
    process.send_signal(signum)
    process.wait(timeout=30)
    rest = reader.rest()
    assert process.returncode == status, ''.join(lines) + rest
    assert rest.endswith('[launch] interrupted by signal %d; every task is '
                         'stopped\n' % signum), rest
    assert not [pid for pid in pids if process_alive(pid)]
  finally:
    _kill_all(process, reader, pids)


def test_a_worker_stopped_after_the_chief_finished_is_named_and_stopped(
    fake_task):
  process, reader = _start_launcher('--num_ps', '1', '--num_workers', '2',
                                    '--grace_secs', '3', '--finish_timeout',
                                    '2', '--', fake_task, 'worker1_stops')
  pids = []
  try:
    lines = reader.until(r'^\[launch\] worker1: pid')
    pids = _task_pids(lines)
    process.wait(timeout=60)  # Not for ever: 2 s after the chief's exit.
    output = ''.join(lines) + reader.rest()
    assert process.returncode == 0, output
    worker1 = pids[2]
    assert re.search(
        r"^\[launch\] worker1 \(pid %d, stopped \(SIGSTOP or a job control "
        r"signal\)\) has not finished \d+ s after the chief did \(bound 2 s, "
        r"--finish_timeout\); its last line, \d+ s ago: step 3: loss = 1\.0\. "
        r"Stopping it: the chief's final checkpoint is the run's result$"
        % worker1, output, re.M), output
    assert not [pid for pid in pids if process_alive(pid)]
  finally:
    _kill_all(process, reader, pids)


def test_tasks_die_with_a_killed_launcher(fake_task):
  process, reader = _start_launcher('--num_ps', '1', '--num_workers', '1',
                                    '--', fake_task, 'hang')
  pids = []
  try:
    pids = _task_pids(reader.until(r'^\[worker0\] worker 0'))
    assert len(pids) == 2
    process.kill()
    process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while (any(process_alive(pid) for pid in pids)
           and time.monotonic() < deadline):
      time.sleep(0.1)
    assert not [pid for pid in pids if process_alive(pid)]
  finally:
    _kill_all(process, reader, pids)


def test_usage_without_command_exits_2():
  process, reader = _start_launcher('--num_ps', '1')
  try:
    process.wait(timeout=30)
    output = reader.rest()
  finally:
    _kill_all(process, reader, [])
  assert process.returncode == 2
  assert output.endswith(
      'python -m clusters.launch: error: give the script to run after --, '
      'e.g. -- train_image_classifier.py --dataset_name=digits ...\n'), output


def test_a_hundred_thousand_workers_are_refused_at_once():
  started = time.monotonic()
  process, reader = _start_launcher('--num_workers', '100000', '--', 'x.py')
  try:
    process.wait(timeout=60)
    output = reader.rest()
  finally:
    _kill_all(process, reader, [])
  # A second of its own; the rest is starting Python on a busy machine.
  assert time.monotonic() - started < 20
  assert process.returncode == 2, output
  assert re.fullmatch(
      r'error: --num_ps 1 --num_workers 100000 would start 100001 '
      r'TensorFlow processes, about 41992\.6 GiB at 430 MiB each, and this '
      r'machine has [\d.]+ GiB available \(MemAvailable\); start at most \d+ '
      r'tasks, or, if one task of your script takes less, say how much with '
      r'--task_memory_mib \(0 skips this check\)\n', output), output
