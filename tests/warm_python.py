"""A Python that has TensorFlow imported already and forks the tests' scripts.

Importing TensorFlow, tf-slim and tf-keras takes 5-8 s of CPU on the test
machines, longer than most of the script runs the tests make. This server
imports them once; `tests/script_runner.py` then asks it for each run, and
it forks a child that runs the script as `__main__` with the given
arguments, working directory, environment and output pipe, in a session of
its own (so `os.killpg(pid, ...)` reaches it and whatever it starts).

Only third-party modules and `tf2_compat.quiet` are imported here: the
project's other modules and its flags load in each child, as in a fresh
process. What a child cannot get afresh is what those imports read from
the environment once (for instance TF_CPP_MIN_LOG_LEVEL), so the server
starts with the environment the scripts get. Tests about the interpreter's own start (the terminal lines of
a TensorFlow import, tracebacks) start real processes instead.

Protocol, over the SOCK_SEQPACKET socket whose descriptor is argv[1], one
JSON object per message:
  request  {"argv": [script, arg...], "cwd": dir, "env": {...}}, with the
           write end of the output pipe attached (SCM_RIGHTS);
  replies  {"pid": pid} once the child runs, and {"exited": pid,
           "returncode": code} when it ends (-N when killed by signal N).
When the socket closes, the server kills what is left and exits.
"""

import atexit
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback

import numpy as np

# TensorFlow as the project imports it (tf2_compat.quiet reads nothing else
# of the project), then the libraries every script loads.
from tf2_compat import quiet
quiet.import_tensorflow()
# pylint: disable=g-import-not-at-top,unused-import,wrong-import-position
import tf_keras
import tf_slim
# pylint: enable=g-import-not-at-top,unused-import,wrong-import-position

_MAX_MESSAGE = 1 << 20


def _exit_code(exit_request):
  """The process exit status Python gives a SystemExit(code)."""
  code = exit_request.code
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  print(code, file=sys.stderr)
  return 1


def _run_child(request, output_fd, server, in_session_fd):
  """In the forked child: becomes the script's process; never returns."""
  code = 1
  try:
    server.close()
    os.setsid()
    os.close(in_session_fd)  # Tells the server that killpg(pid) works now.
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.clear()
    os.environ.update(request['env'])
    os.chdir(request['cwd'])
    script = request['argv'][0]
    sys.argv = list(request['argv'])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    np.random.seed()  # The server's state would be every child's.
    try:
      runpy.run_path(script, run_name='__main__')
      code = 0
    except SystemExit as exit_request:
      code = _exit_code(exit_request)
    except BaseException:  # pylint: disable=broad-except
      sys.excepthook(*sys.exc_info())
      code = 1
    atexit._run_exitfuncs()  # pylint: disable=protected-access
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
  finally:
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except Exception:  # pylint: disable=broad-except
        pass
    os._exit(code)  # pylint: disable=protected-access


def _reap(server, children):
  while children:
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
      return
    children.discard(pid)
    server.send(json.dumps({
        'exited': pid,
        'returncode': os.waitstatus_to_exitcode(status)}).encode())


def serve(server):
  children = set()
  try:
    while True:
      readable, _, _ = select.select([server], [], [], 0.05)
      _reap(server, children)
      if not readable:
        continue
      message, fds, _, _ = socket.recv_fds(server, _MAX_MESSAGE, 1)
      if not message:
        return
      request = json.loads(message)
      # The pid is reported once the child leads its own session, as
      # Popen(start_new_session=True) returns: a caller that kills its
      # group at once must not miss it.
      in_session_read, in_session_write = os.pipe()
      pid = os.fork()
      if pid == 0:
        os.close(in_session_read)
        _run_child(request, fds[0], server, in_session_write)
      os.close(in_session_write)
      os.read(in_session_read, 1)  # End of file once the child closed it.
      os.close(in_session_read)
      os.close(fds[0])
      children.add(pid)
      server.send(json.dumps({'pid': pid}).encode())
  finally:
    for pid in children:
      try:
        os.killpg(pid, signal.SIGKILL)
      except ProcessLookupError:
        pass


if __name__ == '__main__':
  serve(socket.socket(fileno=int(sys.argv[1])))
