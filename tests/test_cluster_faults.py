"""A cluster task whose peers are missing, silent or in its way: visible
waits that a SIGTERM ends, and a taken port named in one line."""

import hashlib
import os
import re
import signal
import socket
import threading
import time

import pytest

from clusters import addresses
from clusters import cluster
from clusters import local_cluster
from clusters import machine
from clusters import peers
from clusters import servers
from tf2_compat.slim_compat import tf
from tests.fake_clock import FakeClock
from tests.line_reader import LineReader
from tests.script_runner import kill_group
from tests.script_runner import run_script
from tests.script_runner import start_script

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')

TRAIN = 'train_image_classifier.py'
SIGTERM_STATUS = 128 + signal.SIGTERM


def _tf_config(ps_hosts, worker_hosts, job_name='worker', index=0):
  return {'TF_CONFIG': local_cluster.tf_config(ps_hosts, worker_hosts, job_name,
                                        index)}


def _train_args(digits_dir, train_dir, *extra):
  return ['--dataset_name=digits', '--dataset_dir=%s' % digits_dir,
          '--model_name=lenet', '--clone_on_cpu', '--batch_size=4',
          '--optimizer=sgd', '--learning_rate=0.01',
          '--max_number_of_steps=100000', '--log_every_n_steps=1',
          '--save_interval_secs=600', '--save_summaries_secs=600',
          '--train_dir=%s' % train_dir] + list(extra)


def _digest(directory):
  """What `directory` holds, file by file; None when it does not exist."""
  if not os.path.exists(directory):
    return None
  files = hashlib.sha256()
  for root, _, names in sorted(os.walk(directory)):
    for name in sorted(names):
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        files.update(path.encode() + b'\0' + hashlib.sha256(
            f.read()).digest())
  return files.hexdigest()


class _SilentListener:
  """A port where connections are accepted (by the kernel) and never
  answered, as at a stopped or hung process."""

  def __init__(self):
    self._socket = socket.create_server(('127.0.0.1', 0))
    self.address = '127.0.0.1:%d' % self._socket.getsockname()[1]

  def close(self):
    self._socket.close()


class _Greeter:
  """Accepts connections and writes `greeting` to each."""

  def __init__(self, greeting):
    self._socket = socket.create_server(('127.0.0.1', 0))
    self.address = '127.0.0.1:%d' % self._socket.getsockname()[1]
    self._greeting = greeting
    threading.Thread(target=self._serve, daemon=True).start()

  def _serve(self):
    try:
      while True:
        connection, _ = self._socket.accept()
        with connection:
          connection.sendall(self._greeting)
          connection.recv(64)
    except OSError:
      pass

  def close(self):
    self._socket.close()


# The start of a gRPC server's greeting: a SETTINGS frame on stream 0.
GRPC_GREETING = b'\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x00\x40\x00\x00'


def test_nothing_listening_is_connection_refused():
  address = '127.0.0.1:%d' % machine.free_ports(1)[0]
  assert peers.why_not_answering(address) == 'connection refused'


def test_a_listener_that_never_speaks_has_not_answered():
  listener = _SilentListener()
  try:
    assert peers.why_not_answering(listener.address, timeout_secs=0.5) == (
        'accepts connections but has not answered')
  finally:
    listener.close()


@pytest.mark.parametrize('greeting,why', [
    (GRPC_GREETING, None),
    (b'HTTP/1.1 400 Bad Request\r\n\r\n',
     'something answers there, but not a TensorFlow (gRPC) server; check '
     'the address'),
])
def test_only_a_grpc_greeting_counts_as_an_answer(greeting, why):
  greeter = _Greeter(greeting)
  try:
    assert peers.why_not_answering(greeter.address, timeout_secs=5) == why
  finally:
    greeter.close()


def _closed_port_address():
  """The address of a port that was listening a moment ago."""
  listener = _SilentListener()
  listener.close()
  return listener.address


def test_a_listening_port_accepts_connections_and_a_closed_one_does_not():
  listener = _SilentListener()
  try:
    assert addresses.accepts_connections(listener.address, 2.0)
  finally:
    listener.close()
  assert not addresses.accepts_connections(listener.address, 2.0)


def test_unreachable_workers_are_those_whose_port_refuses():
  alive = _SilentListener()
  dead_address = _closed_port_address()
  try:
    task = cluster.ClusterTask([], ['127.0.0.1:1', alive.address,
                                    dead_address], 'worker', 0)
    # Worker 0 is this task itself: not probed.
    assert peers.unreachable_workers(task, settle_secs=0) == [
        (2, dead_address)]
  finally:
    alive.close()


def test_a_ps_task_probes_every_worker():
  dead_address = _closed_port_address()
  task = cluster.ClusterTask(['127.0.0.1:2'], ['127.0.0.1:1', dead_address],
                             'ps', 0)
  assert peers.unreachable_workers(task, timeout_secs=0.5,
                                   settle_secs=0) == [
                                       (0, '127.0.0.1:1'), (1, dead_address)]


def test_a_worker_dying_while_probed_is_found_within_the_settle_time():
  dying = _SilentListener()
  task = cluster.ClusterTask([], ['127.0.0.1:1', dying.address], 'worker',
                             0)

  class ClosingClock(FakeClock):
    """The port still accepts at the first probe; closed by the second."""

    def sleep(self, seconds):
      super().sleep(seconds)
      dying.close()

  clock = ClosingClock()
  assert peers.unreachable_workers(task, settle_secs=3.0, clock=clock) == [
      (1, dying.address)]
  assert clock.sleeps == [0.25]


def test_a_tensorflow_server_answers():
  address = '127.0.0.1:%d' % machine.free_ports(1)[0]
  server = servers.start_server(
      cluster.ClusterTask([], [address], 'worker', 0))
  assert peers.why_not_answering(address) is None
  del server


@pytest.mark.parametrize('job_name,index,needed', [
    ('worker', 1, [('ps task 0', 'p0:1'), ('ps task 1', 'p1:1')]),
    ('ps', 0, []),
])
def test_a_worker_needs_every_ps_task_and_a_ps_task_nothing(job_name, index,
                                                            needed):
  task = cluster.ClusterTask(['p0:1', 'p1:1'], ['w0:1', 'w1:1'], job_name,
                             index)
  assert peers.needed_by(task) == needed


def test_an_all_reduce_worker_waits_for_its_peers_in_the_cluster_check():
  task = cluster.ClusterTask([], ['w0:1', 'w1:1', 'w2:1'], 'worker', 1)
  assert peers.needed_by(task) == []


def test_the_wait_names_each_silent_task_every_few_seconds():
  clock = FakeClock(start=0.0)
  # Task 0 answers at once; task 1 refuses the first 13 rounds, one a second.
  refusals = {'a:1': 0, 'b:1': 13}
  lines = []

  def probe(address):
    if refusals[address]:
      refusals[address] -= 1
      return 'connection refused'
    return None

  waited = peers.wait_for([('ps task 0', 'a:1'), ('ps task 1', 'b:1')],
                          log_fn=lambda fmt, *args: lines.append(fmt % args),
                          report_every_secs=5, poll_secs=1, probe=probe,
                          clock=clock)
  assert lines == ['waiting for ps task 1 at b:1: connection refused (5 s)',
                   'waiting for ps task 1 at b:1: connection refused (10 s)',
                   'ps task 1 at b:1 answers now (after 13 s)']
  assert waited == 13


@pytest.mark.parametrize('job_name', ['ps', 'worker'])
def test_a_taken_port_is_one_error_line_with_status_2(digits_dir, tmp_path,
                                                      job_name):
  train_dir = str(tmp_path / 'train')
  holder = socket.create_server(('127.0.0.1', 0))
  taken = '127.0.0.1:%d' % holder.getsockname()[1]
  other = '127.0.0.1:%d' % machine.free_ports(1)[0]
  ps_hosts, worker_hosts = ([taken], [other]) if job_name == 'ps' else (
      [other], [taken])
  started = time.monotonic()
  try:
    result = run_script(TRAIN, *_train_args(digits_dir, train_dir),
                        env=_tf_config(ps_hosts, worker_hosts, job_name),
                        timeout=120)
  finally:
    holder.close()
  assert time.monotonic() - started < 60
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  errors = [l for l in result.stdout.splitlines() if l.startswith('error:')]
  assert errors == [
      'error: %s task 0 cannot listen on %s: the port is already in use by '
      'another process (an earlier run of this task still running?); stop '
      'that process, or give this task a free port in TF_CONFIG'
      % (job_name, taken)], result.stdout[-3000:]
  assert _digest(train_dir) is None


def test_a_taken_port_is_refused_before_tensorflow_tries_it():
  holder = socket.create_server(('127.0.0.1', 0))
  address = '127.0.0.1:%d' % holder.getsockname()[1]
  try:
    task = cluster.ClusterTask([address], ['127.0.0.1:1'], 'ps', 0,
                               source='--ps_hosts/--worker_hosts')
    with pytest.raises(servers.PortUnavailable, match=re.escape(
        'ps task 0 cannot listen on %s: the port is already in use' %
        address)):
      servers.check_port(task)
  finally:
    holder.close()
  servers.check_port(task)  # Free again.


def _start_task(digits_dir, train_dir, ps_address, worker_address,
                job_name='worker'):
  return start_script(TRAIN, *_train_args(digits_dir, train_dir),
                      env=_tf_config([ps_address], [worker_address],
                                     job_name))


def _terminate(process, reader):
  """Sends SIGTERM; returns the seconds the process took to end, and the
  rest of its output."""
  sent = time.monotonic()
  process.send_signal(signal.SIGTERM)
  process.wait(timeout=30)
  return time.monotonic() - sent, reader.rest()


@pytest.mark.slow
@pytest.mark.parametrize('ps_kind,why', [
    ('nothing', 'connection refused'),
    ('silent', 'accepts connections but has not answered'),
])
def test_a_worker_waiting_for_its_ps_says_so_and_ends_on_sigterm(
    digits_dir, tmp_path, ps_kind, why):
  train_dir = str(tmp_path / 'train')
  listener = _SilentListener() if ps_kind == 'silent' else None
  ps_address = (listener.address if listener else
                '127.0.0.1:%d' % machine.free_ports(1)[0])
  process = _start_task(digits_dir, train_dir, ps_address,
                        '127.0.0.1:%d' % machine.free_ports(1)[0])
  reader = LineReader(process.stdout)
  try:
    reader.until(r'started worker task 0', timeout=120)
    started = time.monotonic()
    reader.until(r'waiting for ps task 0 at %s: %s \(\d+ s\)$' % (
        re.escape(ps_address), why), timeout=60)
    assert time.monotonic() - started < 30  # Every 5 s; a busy machine.
    elapsed, rest = _terminate(process, reader)
  finally:
    kill_group(process)
    reader.close()
    if listener:
      listener.close()
  assert process.returncode == SIGTERM_STATUS, rest
  assert elapsed < 10
  assert rest.splitlines()[-1].endswith(
      'SIGTERM: stopped before the first step; nothing was trained, so '
      'nothing is lost'), rest
  assert _digest(train_dir) is None


@pytest.mark.slow
def test_a_step_that_never_ends_stops_on_the_second_sigterm(digits_dir,
                                                            tmp_path):
  train_dir = str(tmp_path / 'train')
  ps_address, worker_address = ['127.0.0.1:%d' % p
                                for p in machine.free_ports(2)]
  ps = _start_task(digits_dir, train_dir, ps_address, worker_address, 'ps')
  worker = _start_task(digits_dir, train_dir, ps_address, worker_address)
  reader = LineReader(worker.stdout)
  try:
    reader.until(r'step \d+: loss', timeout=180)
    # A ps task that stops answering: the step in progress, or the next,
    # waits for it forever.
    os.kill(ps.pid, signal.SIGSTOP)
    time.sleep(1)
    worker.send_signal(signal.SIGTERM)
    reader.until(r'SIGTERM: stopping after the step in progress, then '
                 r'saving a checkpoint \(a second SIGTERM stops at once, '
                 r'without saving\)$')
    time.sleep(2)
    assert worker.poll() is None  # Still in its step.
    before = _digest(train_dir)
    elapsed, rest = _terminate(worker, reader)
  finally:
    kill_group(worker)
    reader.close()
    kill_group(ps)  # SIGKILL ends a stopped process too.
  assert worker.returncode == SIGTERM_STATUS, rest
  assert elapsed < 10
  latest = tf.train.latest_checkpoint(train_dir)
  assert latest
  assert rest.splitlines()[-1].endswith(
      'SIGTERM again: stopped at once, without finishing the step; the '
      'latest checkpoint, %s, is whole: a resumed run starts there' % latest
  ), rest
  assert _digest(train_dir) == before


@pytest.mark.slow
def test_a_ps_task_that_stops_answering_is_named_and_the_worker_exits(
    digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  ps_address, worker_address = ['127.0.0.1:%d' % p
                                for p in machine.free_ports(2)]
  ps = _start_task(digits_dir, train_dir, ps_address, worker_address, 'ps')
  worker = start_script(
      TRAIN, *_train_args(digits_dir, train_dir, '--step_timeout_secs=3'),
      env=_tf_config([ps_address], [worker_address]))
  reader = LineReader(worker.stdout)
  try:
    reader.until(r'step \d+: loss', timeout=180)
    os.kill(ps.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    before = _digest(train_dir)
    lines = reader.until(r'does not answer', timeout=60)
    named_after = time.monotonic() - stopped
    worker.wait(timeout=30)
    rest = reader.rest()
  finally:
    kill_group(worker)
    reader.close()
    kill_group(ps)  # SIGKILL ends a stopped process too.
  assert re.search(
      r'training step \d+ of this worker has not finished after \d+ s '
      r'\(bound 3 s, --step_timeout_secs\): ps task 0 at %s \(accepts '
      r'connections but has not answered\) does not answer\. Stopping this '
      r'process \(exit 1\)' % re.escape(ps_address), lines[-1]), lines[-1]
  assert named_after < 30  # 3 s, the probe's 2 s, a busy machine.
  assert worker.returncode == 1, rest
  assert _digest(train_dir) == before  # Nothing half-written.
