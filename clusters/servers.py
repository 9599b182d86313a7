"""A task's gRPC server: its port checked first, then served until a signal.

Typical use (what train_image_classifier.py does):

  server = servers.start_server(task)   # PortUnavailable: port taken
  if task.is_ps:
    servers.serve_until_stopped(server)
"""

import errno
import signal
import socket
import threading

from clusters import addresses
from tf2_compat.slim_compat import tf


class PortUnavailable(Exception):
  """This task's server cannot listen on its port, e.g. another process
  holds it. The message names the task, its address and the fix."""


def _bind_error(port):
  """The OSError of binding `port` as TensorFlow's server does, or None.

  gRPC listens on every interface, IPv6 and IPv4 (or IPv4 alone where
  there is no IPv6), with SO_REUSEADDR: a port only in TIME_WAIT is free.
  """
  for family, host in ((socket.AF_INET6, '::'), (socket.AF_INET, '0.0.0.0')):
    try:
      probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
      continue  # No IPv6 in this kernel.
    with probe:
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
      if family == socket.AF_INET6:
        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
      try:
        probe.bind((host, port))
        probe.listen(1)
      except OSError as e:
        if family == socket.AF_INET6 and e.errno == errno.EADDRNOTAVAIL:
          continue  # IPv6 switched off: gRPC listens on IPv4 alone.
        return e
      return None
  return None


def check_port(task):
  """Raises PortUnavailable unless `task`'s server can listen on its port.

  Checked before starting the server: TensorFlow's own failure is a bare
  "Could not start gRPC server", which names neither the task nor the port.

  Args:
    task: a clusters.cluster.ClusterTask.
  """
  error = _bind_error(addresses.split_address(task.address)[1])
  if error is None:
    return
  if error.errno == errno.EADDRINUSE:
    why = ('the port is already in use by another process (an earlier run '
           'of this task still running?); stop that process, or %s'
           % task.port_fix)
  else:
    why = '%s; %s' % (error.strerror or error, task.port_fix)
  raise PortUnavailable('%s task %d cannot listen on %s: %s' % (
      task.job_name, task.task_index, task.address, why))


def start_server(task, config=None):
  """Starts this task's gRPC server (tf.distribute.Server) and returns it.

  Whatever host `task.address` names, TensorFlow listens on every interface
  (0.0.0.0:<port>), without authentication; nothing in the ServerDef
  narrows that, so clusters belong on trusted networks.

  Args:
    task: a clusters.cluster.ClusterTask.
    config: the server's tf.ConfigProto, or None.

  Raises:
    PortUnavailable: the port is taken, before or while the server starts.
    RuntimeError: when the server cannot start for another reason.
  """
  check_port(task)
  try:
    return tf.train.Server(task.cluster_spec, job_name=task.job_name,
                           task_index=task.task_index, config=config,
                           start=True)
  except tf.errors.OpError as e:
    check_port(task)  # Taken since the check?
    raise RuntimeError('cannot start the server of %s: %s' % (
        task, e.message)) from None


def serve_until_stopped(server, stop_signals=(signal.SIGTERM, signal.SIGINT),
                        stopped=None):
  """Serves until one of `stop_signals` arrives, or another thread sets the
  threading.Event `stopped`, then returns.

  `server.join()` would block in C++ where Python signal handlers never run,
  so a SIGTERM would kill the process uncleanly; waiting on an event keeps
  the main thread interruptible. Holding `server` here keeps it alive (a
  garbage-collected server stops). Must be called from the main thread.
  """
  stopped = stopped or threading.Event()
  previous = {}
  for signum in stop_signals:
    previous[signum] = signal.signal(signum, lambda *unused: stopped.set())
  try:
    while not stopped.wait(3600):
      pass
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
