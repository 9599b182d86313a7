"""Runs the project's scripts as processes of their own, bounded in time.

The scripts are forked from a Python that has TensorFlow imported already
(tests/warm_python.py): each run then costs its own work, not the 5-8 s of
CPU of importing TensorFlow again. `fresh=True` (or SLIM_TESTS_FRESH=1 in
the environment, for every run) starts a new interpreter instead, for
tests about what a real start prints or when a fork is in doubt.
"""

import atexit
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MAX_MESSAGE = 1 << 20


def script_env():
  env = dict(os.environ)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  # A TF_CONFIG left in the caller's shell would make every run a cluster task.
  env.pop('TF_CONFIG', None)
  env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
  return env


class _ForkedProcess:
  """What the tests use of subprocess.Popen, for a child of the server."""

  def __init__(self, argv, pid, stdout):
    self.args = argv
    self.pid = pid
    self.stdout = stdout
    self.returncode = None
    self._exited = threading.Event()

  def _set_exited(self, returncode):
    self.returncode = returncode
    self._exited.set()

  def poll(self):
    return self.returncode

  def wait(self, timeout=None):
    if not self._exited.wait(timeout):
      raise subprocess.TimeoutExpired(self.args, timeout)
    return self.returncode

  def send_signal(self, sig):
    if self.returncode is None:
      os.kill(self.pid, sig)

  def kill(self):
    self.send_signal(signal.SIGKILL)

  def terminate(self):
    self.send_signal(signal.SIGTERM)

  def communicate(self, timeout=None):
    """Reads the output to its end and waits, like Popen.communicate."""
    output = []
    reader = threading.Thread(target=lambda: output.append(self.stdout.read()),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
      raise subprocess.TimeoutExpired(self.args, timeout)
    self.stdout.close()
    self.wait(timeout)
    return output[0], None


class _WarmPython:
  """The client of one tests/warm_python.py server, started on first use."""

  def __init__(self):
    self._socket, theirs = socket.socketpair(socket.AF_UNIX,
                                             socket.SOCK_SEQPACKET)
    self._server = subprocess.Popen(
        [sys.executable, os.path.join(REPO, 'tests', 'warm_python.py'),
         str(theirs.fileno())],
        cwd=REPO, env=script_env(), pass_fds=[theirs.fileno()],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    theirs.close()
    self._lock = threading.Lock()  # One request at a time: replies in order.
    self._started = []  # The pid reply of the request in flight.
    self._pid_arrived = threading.Condition(self._lock)
    self._processes = {}
    self._early_exits = {}
    threading.Thread(target=self._read_replies, daemon=True).start()

  def _read_replies(self):
    while True:
      try:
        message = self._socket.recv(_MAX_MESSAGE)
      except OSError:  # close() closed the socket between two replies.
        message = b''
      if not message:
        break
      reply = json.loads(message)
      with self._lock:
        if 'pid' in reply:
          self._started.append(reply['pid'])
          self._pid_arrived.notify_all()
          continue
        process = self._processes.pop(reply['exited'], None)
        if process is None:
          self._early_exits[reply['exited']] = reply['returncode']
        else:
          process._set_exited(reply['returncode'])  # pylint: disable=protected-access
    with self._lock:  # The server is gone: nothing left will report.
      for process in self._processes.values():
        process._set_exited(-signal.SIGKILL)  # pylint: disable=protected-access
      self._processes.clear()
      self._pid_arrived.notify_all()

  def start(self, argv, env):
    read_end, write_end = os.pipe()
    request = json.dumps({'argv': argv, 'cwd': REPO, 'env': env}).encode()
    with self._lock:
      try:
        socket.send_fds(self._socket, [request], [write_end])
      finally:
        os.close(write_end)
      while not self._started:
        if self._server.poll() is not None:
          os.close(read_end)
          raise RuntimeError('tests/warm_python.py exited with status %s'
                             % self._server.returncode)
        self._pid_arrived.wait(1.0)
      pid = self._started.pop()
      process = _ForkedProcess(argv, pid, os.fdopen(read_end, 'r'))
      if pid in self._early_exits:
        process._set_exited(self._early_exits.pop(pid))  # pylint: disable=protected-access
      else:
        self._processes[pid] = process
    return process

  def close(self):
    # shutdown() first: it wakes the reply reader, which close() alone
    # would leave blocked, holding the socket open.
    self._socket.shutdown(socket.SHUT_RDWR)
    self._socket.close()
    try:
      self._server.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self._server.kill()


_warm = None
_warm_lock = threading.Lock()


def _warm_python():
  global _warm
  with _warm_lock:
    if _warm is None:
      _warm = _WarmPython()
      atexit.register(_warm.close)
    return _warm


def _wants_fresh(fresh):
  return fresh or os.environ.get('SLIM_TESTS_FRESH') == '1'


def start_script(script, *args, env=None, fresh=False):
  """Starts a script in its own process group; stop it with `kill_group`.

  The output (stdout and stderr together) is the text stream `.stdout`.
  `env` adds to script_env().
  """
  argv = [os.path.join(REPO, script)] + list(args)
  full_env = dict(script_env(), **(env or {}))
  if _wants_fresh(fresh):
    return subprocess.Popen([sys.executable] + argv, cwd=REPO, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
  return _warm_python().start(argv, full_env)


def run_script(script, *args, timeout=180, env=None, fresh=False):
  """Runs `python script args...` from the repository; returns the result
  (a subprocess.CompletedProcess) once it ends. The output (stdout and
  stderr together) is in `.stdout`; past `timeout` seconds the run is
  killed and subprocess.TimeoutExpired raised."""
  process = start_script(script, *args, env=env, fresh=fresh)
  try:
    output, _ = process.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    kill_group(process)
    raise
  return subprocess.CompletedProcess(process.args, process.returncode,
                                     output)


def kill_group(process, sig=signal.SIGKILL):
  try:
    os.killpg(process.pid, sig)
  except ProcessLookupError:
    pass
  process.wait(timeout=30)


def wait_for_log_line(process, pattern, timeout=180):
  """Reads the process's output until a line matches; returns the lines."""
  lines = []
  deadline = time.time() + timeout
  for line in process.stdout:  # Ends when the process does.
    lines.append(line)
    if re.search(pattern, line):
      return lines
    if time.time() > deadline:
      break
  pytest.fail('no line matching %r within %d s:\n%s' % (
      pattern, timeout, ''.join(lines[-20:])))


def process_alive(pid):
  """Whether `pid` runs (a zombie, dead but not reaped, does not count)."""
  try:
    with open('/proc/%d/status' % pid) as status:
      return not re.search(r'^State:\s+Z', status.read(), re.M)
  except FileNotFoundError:
    return False


def digits_accuracy(digits_dir, train_dir, *args):
  """The digits test-split accuracy (%) of train_dir's latest checkpoint,
  from eval_image_classifier.py with `args` added."""
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % os.path.join(train_dir, 'eval'),
                      *args)
  assert result.returncode == 0, result.stdout[-3000:]
  return float(re.search(r'digits test: accuracy ([\d.]+)% on 360 examples',
                         result.stdout).group(1))


def error_lines(output):
  """The 'error: ...' lines a script printed."""
  return [line for line in output.splitlines() if line.startswith('error: ')]


def assert_one_usage_error(result, pattern):
  """A finished run exited 2 with one 'error:' line fully matching the
  regex `pattern`, and no traceback."""
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  errors = error_lines(result.stdout)
  assert len(errors) == 1, errors
  assert re.fullmatch(pattern, errors[0]), errors[0]


def file_digests(directory):
  """{path relative to directory: sha256 of its bytes}, file by file."""
  digests = {}
  for root, _, names in os.walk(directory):
    for name in names:
      path = os.path.join(root, name)
      with open(path, 'rb') as f:
        digests[os.path.relpath(path, directory)] = hashlib.sha256(
            f.read()).hexdigest()
  return digests
