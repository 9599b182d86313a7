"""Whether the other tasks answer: waited for at the start, named when gone.

A worker's session needs every ps task of its cluster. TensorFlow waits
for them inside session creation, in C++, and says so only in log lines
that the default TF_CPP_MIN_LOG_LEVEL=2 hides, so a ps task that never
started, or one that hangs, looked like a silent hang. Before it builds anything, a worker now
probes those tasks itself and, every few seconds, logs which one it waits
for, at which address, and why:

  waiting for ps task 0 at 127.0.0.1:2222: connection refused (10 s)
  waiting for ps task 1 at 10.0.0.5:2222: accepts connections but has not
      answered (10 s)

A task answers when its gRPC server sends the HTTP/2 greeting (a SETTINGS
frame) that every gRPC server sends on a new connection. A process that
listens but is stopped (SIGSTOP, a debugger) or hung does not, and neither
does a server of another kind on the address.

Nothing waits for the tasks to come back once they have answered: a task
that goes away later is TensorFlow's to handle, as before. When the
all-reduce between workers fails, `unreachable_workers` names the workers
whose address no longer accepts a connection.
"""

import socket
import time

from clusters import addresses
from tf2_compat.slim_compat import tf

# What an HTTP/2 client sends first: the connection preface, then an empty
# SETTINGS frame (length 0, type 4, no flags, stream 0).
_HTTP2_PREFACE = (b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' +
                  b'\x00\x00\x00\x04\x00\x00\x00\x00\x00')
_SETTINGS_FRAME_TYPE = 4


def needed_by(task):
  """The tasks `task` waits for here: [(name, address)].

  A worker waits for every ps task; a ps task for none. All-reduce workers
  wait for each other in replica_session.check_same_cluster instead, which
  gives up after --collective_timeout_secs naming the worker that does not
  answer, and which must meet a worker that lists another cluster (one
  that may never start) to say so.
  """
  if task.is_ps:
    return []
  return [('ps task %d' % i, address)
          for i, address in enumerate(task.ps_hosts)]


def needed_at_each_step(task, sync_replicas=False):
  """The tasks a step of `task` waits for: [(name, address)].

  Every ps task holds variables a step reads or updates. The other workers
  take part in a step of all-reduce training (their gradients are summed)
  and of synchronous ps training (a step waits for their gradients); an
  asynchronous worker steps without them. [] without a cluster (task
  None).
  """
  if task is None:
    return []
  needed = needed_by(task)
  if task.all_reduce or sync_replicas:
    needed += [('worker task %d' % i, address)
               for i, address in enumerate(task.worker_hosts)
               if i != task.task_index]
  return needed


def why_not_answering(address, timeout_secs=2.0):
  """None when a gRPC server answers at `address`, else why not, in words.

  Args:
    address: 'host:port'.
    timeout_secs: how long to wait for the connection, then for the reply.
  """
  connection, why = addresses.open_connection(address, timeout_secs)
  if connection is None:
    return why
  with connection:
    try:
      connection.sendall(_HTTP2_PREFACE)
      greeting = connection.recv(64)
    except socket.timeout:
      return 'accepts connections but has not answered'
    except OSError as e:
      return 'the connection dropped (%s)' % (e.strerror or e)
  if not greeting:
    return 'accepts connections but closes them without answering'
  if len(greeting) < 4 or greeting[3] != _SETTINGS_FRAME_TYPE:
    return ('something answers there, but not a TensorFlow (gRPC) server; '
            'check the address')
  return None


def wait_for(tasks, log_fn=None, report_every_secs=5.0, poll_secs=0.5,
             probe=why_not_answering, clock=time):
  """Returns once every task answers; logs the ones it waits for.

  Waits as long as it takes, as TensorFlow would (tasks of a cluster start
  in any order); a signal ends the wait (training/preemption.py).

  Args:
    tasks: [(name, address)], e.g. from `needed_by`.
    log_fn: where the lines go (tf.logging.info by default).
    report_every_secs: seconds between two reports of a task still silent;
      the first comes after this long too, so a task a moment late at the
      start goes unmentioned.
    poll_secs: seconds between two rounds of probes.
    probe: why_not_answering, or a stand-in.
    clock: the time module, or a stand-in.

  Returns:
    The seconds waited.
  """
  log = log_fn or tf.logging.info
  start = clock.monotonic()
  next_report = start + report_every_secs
  reported = set()
  pending = list(tasks)
  while True:
    silent = []
    for name, address in pending:
      why = probe(address)
      if why is None:
        if name in reported:
          log('%s at %s answers now (after %d s)', name, address,
              clock.monotonic() - start)
      else:
        silent.append((name, address, why))
    pending = [(name, address) for name, address, _ in silent]
    now = clock.monotonic()
    if not pending:
      return now - start
    if now >= next_report:
      for name, address, why in silent:
        log('waiting for %s at %s: %s (%d s)', name, address, why,
            now - start)
        reported.add(name)
      next_report = now + report_every_secs
    clock.sleep(poll_secs)


def unreachable_workers(task, timeout_secs=2.0, settle_secs=3.0,
                        clock=time):
  """The other workers of `task`'s cluster whose address refuses a TCP
  connection: (index, address) pairs, e.g. of a worker that died.

  A worker killed a moment ago may still hold its port while the kernel
  closes its files, so the probes are repeated for up to `settle_secs`
  until one refuses.
  """
  others = [(index, address)
            for index, address in enumerate(task.worker_hosts)
            if task.is_ps or index != task.task_index]
  deadline = clock.monotonic() + settle_secs
  while True:
    missing = [(index, address) for index, address in others
               if not addresses.accepts_connections(address, timeout_secs)]
    if missing or clock.monotonic() >= deadline:
      return missing
    clock.sleep(0.25)
