"""The launcher's output when it breaks (clusters/task_output.py): the
tasks' output is still read, the cluster finishes, and stderr says once
what was lost."""

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from clusters import task_output
from tests.script_runner import REPO
from tests.stand_in_tasks import write_task
from tests.test_launch import _Lines

# The launcher picks its tasks' ports on 127.0.0.1.
pytestmark = pytest.mark.xdist_group('loopback')

CLOSED = ('[launch] output closed (Broken pipe): task output is dropped from '
          'here on; training goes on\n')
FAILED = ('[launch] output failed (No space left on device): task output is '
          'dropped until it can be written again; training goes on\n')

# Each worker prints 3000 lines, about 140 KiB: more than a pipe holds, so
# a worker whose pipe is not read blocks. Then it leaves MARKS/worker<i>.
CHATTY_TASK = textwrap.dedent("""\
    import json, os, sys
    index = json.loads(os.environ['TF_CONFIG'])['task']['index']
    for i in range(3000):
      print('worker %d, line %d of its training output' % (index, i))
    open(os.path.join(sys.argv[1], 'worker%d' % index), 'w').close()
""")


class _FailingStream:
  """A stream whose writes raise `errors` in turn (None: the write goes
  through), then go through."""

  def __init__(self, *errors):
    self.errors = list(errors)
    self.written = []
    self.tries = 0

  def write(self, text):
    self.tries += 1
    error = self.errors.pop(0) if self.errors else None
    if error is not None:
      raise error
    self.written.append(text)

  def flush(self):
    pass


def _broken_pipe():
  return BrokenPipeError(errno.EPIPE, 'Broken pipe')


def _no_space():
  return OSError(errno.ENOSPC, 'No space left on device')


def test_after_a_broken_pipe_no_line_is_tried_and_stderr_says_so_once():
  stream, errors = _FailingStream(_broken_pipe()), _Lines()
  output = task_output.TaskOutput(stream, errors=errors)
  for i in range(3):
    output.write('line %d\n' % i)
  assert (stream.tries, stream.written) == (1, [])
  assert errors.getvalue() == CLOSED


def test_a_closed_file_is_a_closed_output():
  stream = _FailingStream(ValueError('I/O operation on closed file.'))
  errors = _Lines()
  output = task_output.TaskOutput(stream, errors=errors)
  output.write('a\n')
  output.write('b\n')
  assert stream.tries == 1
  assert errors.getvalue() == (
      '[launch] output closed (closed file): task output is dropped from '
      'here on; training goes on\n')


def test_on_a_full_disk_lines_are_lost_until_space_returns_and_counted():
  stream, errors = _FailingStream(None, _no_space(), _no_space(), None, None,
                                  _no_space()), _Lines()
  output = task_output.TaskOutput(stream, errors=errors)
  for i in range(5):
    output.write('line %d\n' % i)
  assert stream.written == [
      'line 0\n',
      '[launch] 2 line(s) of output lost here: writing failed (No space left '
      'on device)\n',
      'line 3\n']
  # Said once when the writes started failing, and again when they failed
  # again after a success.
  assert errors.getvalue() == FAILED * 2


def test_a_write_never_raises_when_stderr_is_gone_too():
  errors = _FailingStream(_broken_pipe())
  output = task_output.TaskOutput(_FailingStream(_no_space(), _no_space()),
                                  errors=errors)
  output.write('a\n')
  output.write('b\n')
  assert errors.tries == 1


def test_a_file_on_a_full_disk_is_written_through_its_descriptor():
  errors = _Lines()
  with open('/dev/full', 'w') as full:
    output = task_output.TaskOutput(full, errors=errors)
    output.write('line\n')
  assert errors.getvalue() == FAILED


@pytest.fixture
def chatty_task(tmp_path):
  return write_task(tmp_path, 'chatty_task.py', CHATTY_TASK)


def _launch(chatty_task, stdout, stderr):
  """Starts the launcher on chatty_task, 2 workers, no ps."""
  script, marks = chatty_task
  return subprocess.Popen(
      [sys.executable, '-m', 'clusters.launch', '--num_ps', '0',
       '--num_workers', '2', '--timeout', '60', '--', script, str(marks)],
      cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), stdout=stdout,
      stderr=stderr, start_new_session=True)


def _finish(launcher, timeout=30):
  """The launcher's status once it exits; kills it (its tasks die with it)
  if it has not within `timeout`."""
  try:
    return launcher.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=10)
    raise AssertionError('the launcher did not finish within %d s' % timeout)


def test_the_cluster_finishes_when_the_output_pipe_closes(chatty_task,
                                                          tmp_path):
  stderr_path = tmp_path / 'stderr'
  with open(stderr_path, 'w') as stderr:
    launcher = _launch(chatty_task, subprocess.PIPE, stderr)
  with launcher.stdout:  # As `| head -5` does.
    head = [launcher.stdout.readline() for _ in range(5)]
  assert _finish(launcher) == 0, head
  assert sorted(os.listdir(chatty_task[1])) == ['worker0', 'worker1']
  # No "Exception ignored ... BrokenPipeError" from Python at exit.
  assert stderr_path.read_text() == CLOSED


def test_the_cluster_finishes_when_the_disk_of_its_log_is_full(chatty_task,
                                                               tmp_path):
  stderr_path = tmp_path / 'stderr'
  with open('/dev/full', 'w') as full, open(stderr_path, 'w') as stderr:
    launcher = _launch(chatty_task, full, stderr)
  assert _finish(launcher) == 0
  assert sorted(os.listdir(chatty_task[1])) == ['worker0', 'worker1']
  assert stderr_path.read_text() == FAILED


def test_the_cluster_finishes_when_stdout_and_stderr_are_gone(chatty_task):
  read_end, write_end = os.pipe()
  os.close(read_end)
  launcher = _launch(chatty_task, write_end, write_end)
  os.close(write_end)
  assert _finish(launcher) == 0
  assert sorted(os.listdir(chatty_task[1])) == ['worker0', 'worker1']
