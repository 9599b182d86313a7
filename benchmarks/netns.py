"""A network of hosts on this machine: Linux network namespaces and a switch.

Each host is a network namespace with one interface, eth0, at 10.99.0.<i+1>.
Its cable is a veth pair whose other end is a port of a bridge, the switch,
in a namespace of its own; nothing is added to the machine's own network.
Both ends of each cable are shaped with tc's htb to the same rate, so a host
sends and receives at most that rate, as a full-duplex NIC would: two hosts
sending to a third share its link. A delay, when asked for, is added by a
netem qdisc to every packet as it leaves its host; on a kernel without
netem the network says so (`delay_applied`, `delay_note`) and runs without.

Needs root and iproute2 (`ip`, `tc`). Everything is removed by close() (or
at the end of a `with` block): deleting a namespace deletes its ends of the
cables and the bridge. A process killed by SIGTERM or Ctrl-C cleans up too
when it runs inside `removed_on_signals()`; one killed by SIGKILL leaves
its namespaces behind, and `remove_left_behind()` deletes them: those of
networks whose process no longer runs (the name holds the pid).

  with removed_on_signals(), Network(3, rate_bits=10**9) as network:
    network.command(0, ['python', 'serve.py'])  # argv run in host 0
    network.link_bytes()   # [(sent, received)] per host, so far
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

SUBNET = '10.99.0.%d'
# The checkout the benchmarks run from: members import its packages.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFIX_LENGTH = 24
# htb's default burst is too small above a few Gbit/s (it measured 7.9 of
# 10 Gbit/s here): a millisecond of the rate, and at least two full-size
# GSO packets (64 KiB each) so a single packet never waits for tokens.
_BURST_SECONDS = 0.001
_MIN_BURST_BYTES = 2 * 65536


def burst_bytes(rate_bits):
  """The htb burst (and cburst) of a link of `rate_bits` per second."""
  return max(_MIN_BURST_BYTES, int(rate_bits * _BURST_SECONDS / 8))


def shaping_commands(namespace, device, rate_bits):
  """The tc commands that shape one end of a cable: an htb root whose one
  class, the default, has rate = ceil = `rate_bits`.

  Returns:
    A list of argv lists.
  """
  burst = str(burst_bytes(rate_bits))
  tc = ['tc', '-n', namespace]
  commands = [
      tc + ['qdisc', 'add', 'dev', device, 'root', 'handle', '1:', 'htb',
            'default', '1'],
      tc + ['class', 'add', 'dev', device, 'parent', '1:', 'classid', '1:1',
            'htb', 'rate', '%dbit' % rate_bits, 'ceil', '%dbit' % rate_bits,
            'burst', burst, 'cburst', burst, 'quantum', '60000'],
  ]
  return commands


def netem_command(namespace, device, delay_ms):
  """The tc command that delays what leaves `device` by `delay_ms`: a netem
  qdisc under the htb class of shaping_commands."""
  return ['tc', '-n', namespace, 'qdisc', 'add', 'dev', device, 'parent',
          '1:1', 'handle', '10:', 'netem', 'delay', '%gms' % delay_ms]


def parse_net_dev(text):
  """{interface: (received bytes, sent bytes)} from /proc/net/dev's text."""
  counters = {}
  for line in text.splitlines()[2:]:
    name, _, fields = line.partition(':')
    fields = fields.split()
    counters[name.strip()] = (int(fields[0]), int(fields[8]))
  return counters


def rate_label(rate_bits):
  """'1 Gbit/s', '2.5 Gbit/s', '500 Mbit/s'."""
  if rate_bits >= 10 ** 9:
    return '%g Gbit/s' % (rate_bits / 1e9)
  return '%g Mbit/s' % (rate_bits / 1e6)


def _wait_until_in(process, namespace, timeout=10.0):
  """Waits until `process` (`ip netns exec NAMESPACE ...`) has entered the
  namespace: `ip` joins it, then execs the command in the same process."""
  wanted = os.stat('/run/netns/' + namespace).st_ino
  deadline = time.monotonic() + timeout
  while os.stat('/proc/%d/ns/net' % process.pid).st_ino != wanted:
    if process.poll() is not None or time.monotonic() > deadline:
      raise RuntimeError('ip netns exec %s did not start (exit status %s)'
                         % (namespace, process.poll()))
    time.sleep(0.01)


def _read(file):
  file.seek(0)
  return file.read()


def _wait_for_all(processes, errs, timeout):
  """Waits until every process has exited with status 0; raises
  RuntimeError at the first that fails, or after `timeout` seconds."""
  deadline = time.monotonic() + timeout
  while True:
    for i, process in enumerate(processes):
      if process.poll() not in (None, 0):
        raise RuntimeError('host %d failed (exit status %d):\n%s' % (
            i, process.returncode, _read(errs[i])[-3000:]))
    if all(process.returncode == 0 for process in processes):
      return
    if time.monotonic() > deadline:
      raise RuntimeError('hosts %s: no answer in %g s' % (
          ', '.join(str(i) for i, p in enumerate(processes)
                    if p.returncode is None), timeout))
    time.sleep(0.05)


def _run(argv, check=True):
  """Runs an ip or tc command and returns its CompletedProcess; with
  `check`, a failure raises RuntimeError with its stderr."""
  try:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
  except FileNotFoundError:
    raise RuntimeError('%s is not installed: install the Debian package '
                       'iproute2' % argv[0]) from None
  if check and done.returncode != 0:
    raise _failed(argv, done)
  return done


def _failed(argv, done):
  """The RuntimeError of a command that failed, with its stderr."""
  return RuntimeError('%s failed (exit status %d): %s' % (
      ' '.join(argv), done.returncode, done.stderr.strip()))


class Network:
  """Hosts in network namespaces, joined by a shaped switch.

  Args:
    num_hosts: how many hosts (namespaces with an eth0 each).
    rate_bits: the rate of every host's link, in bits per second, in each
      direction.
    delay_ms: delay added to every packet a host sends (0: none).
    prefix: names of the namespaces start with it; default
      'slimnet-<pid>-<n>', unique per process and network.

  Raises:
    RuntimeError: when a namespace, cable or qdisc cannot be made (not
      root, no iproute2, ...), after removing what was made.
  """

  _made = 0

  def __init__(self, num_hosts, rate_bits, delay_ms=0.0, prefix=None):
    if num_hosts < 1:
      raise ValueError('num_hosts must be >= 1, got %d' % num_hosts)
    if rate_bits <= 0:
      raise ValueError('rate_bits must be > 0, got %r' % rate_bits)
    if delay_ms < 0:
      raise ValueError('delay_ms must be >= 0, got %r' % delay_ms)
    Network._made += 1
    self.prefix = prefix or 'slimnet-%d-%d' % (os.getpid(), Network._made)
    self.rate_bits = rate_bits
    self.delay_ms = delay_ms
    self.delay_applied = False
    self.delay_note = 'no delay asked for'
    self.switch = self.prefix + '-sw'
    self.hosts = ['%s-h%d' % (self.prefix, i) for i in range(num_hosts)]
    self.addresses = [SUBNET % (i + 1) for i in range(num_hosts)]
    self._made_namespaces = []
    self._anchor = None
    with _signals_held():
      try:
        self._build()
      except BaseException:
        self._remove()
        raise

  def _add_namespace(self, name):
    _run(['ip', 'netns', 'add', name])
    self._made_namespaces.append(name)
    _run(['ip', '-n', name, 'link', 'set', 'lo', 'up'])

  def _build(self):
    self._add_namespace(self.switch)
    _run(['ip', '-n', self.switch, 'link', 'add', 'br0', 'type', 'bridge'])
    _run(['ip', '-n', self.switch, 'link', 'set', 'br0', 'up'])
    for i, host in enumerate(self.hosts):
      self._add_namespace(host)
      port = 'h%d' % i
      _run(['ip', 'link', 'add', 'eth0', 'netns', host, 'type', 'veth',
            'peer', 'name', port, 'netns', self.switch])
      _run(['ip', '-n', self.switch, 'link', 'set', port, 'master', 'br0',
            'up'])
      _run(['ip', '-n', host, 'addr', 'add',
            '%s/%d' % (self.addresses[i], PREFIX_LENGTH), 'dev', 'eth0'])
      _run(['ip', '-n', host, 'link', 'set', 'eth0', 'up'])
      for command in (shaping_commands(host, 'eth0', self.rate_bits) +
                      shaping_commands(self.switch, port, self.rate_bits)):
        _run(command)
    if self.delay_ms:
      self._add_delays()
    # A process that lives in the switch's namespace, so that its
    # /proc/PID/net/dev shows the switch's ports to this process. It reads
    # its input to the end, which comes when this process closes it or dies.
    self._anchor = subprocess.Popen(
        ['ip', 'netns', 'exec', self.switch, 'cat'], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, start_new_session=True)
    _wait_until_in(self._anchor, self.switch)

  def _add_delays(self):
    """A netem child qdisc on every host's eth0, if the kernel has netem."""
    for host in self.hosts:
      command = netem_command(host, 'eth0', self.delay_ms)
      done = _run(command, check=False)
      if done.returncode != 0 and 'unknown' in done.stderr:
        self.delay_note = (
            '%g ms asked for, NOT applied: this kernel has no netem qdisc '
            '(`%s`: %s)' % (self.delay_ms, ' '.join(command[3:]),
                            done.stderr.strip()))
        return
      if done.returncode != 0:
        raise _failed(command, done)
    self.delay_applied = True
    self.delay_note = ('%g ms added to every packet as it leaves its host '
                       '(netem)' % self.delay_ms)

  @property
  def delay_label(self):
    """A few words on the delay, for a plot's title."""
    if self.delay_applied:
      return '+%g ms per packet (netem)' % self.delay_ms
    if self.delay_ms:
      return 'no added delay (this kernel has no netem)'
    return 'no added delay'

  def command(self, host_index, argv):
    """`argv` run in host `host_index`'s namespace (an argv list)."""
    return ['ip', 'netns', 'exec', self.hosts[host_index]] + list(argv)

  def run_all(self, argvs, env=None, timeout=600):
    """Runs argvs[i] in host i, all at once, and returns their stdouts.

    Raises:
      RuntimeError: naming the host and the end of its stderr, as soon as a
        command exits with an error, or when they have not all finished
        after `timeout` seconds; the commands still running are killed
        first (a peer of a failed task would otherwise wait for it).
    """
    with contextlib.ExitStack() as files:
      outs = [files.enter_context(tempfile.TemporaryFile('w+'))
              for _ in argvs]
      errs = [files.enter_context(tempfile.TemporaryFile('w+'))
              for _ in argvs]
      processes = []
      try:
        for i, argv in enumerate(argvs):
          processes.append(subprocess.Popen(
              self.command(i, argv), env=env, stdout=outs[i],
              stderr=errs[i]))
        _wait_for_all(processes, errs, timeout)
      finally:
        for process in processes:
          if process.poll() is None:
            process.kill()
            process.wait()
      return [_read(out) for out in outs]

  def run_members(self, script, arguments, port=2222, timeout=600):
    """Runs `python script --member JSON` in every host, all at once, and
    returns what each printed last, parsed as JSON.

    JSON is [the hosts' addresses with `port`, the host's index] followed
    by `arguments`; the member reads it from sys.argv[2]. The members run
    from the repository (PYTHONPATH), TensorFlow's C++ logs kept to
    warnings.

    Raises:
      RuntimeError: as run_all.
    """
    addresses = ['%s:%d' % (address, port) for address in self.addresses]
    env = dict(os.environ, PYTHONPATH=_REPO, TF_CPP_MIN_LOG_LEVEL='2')
    outputs = self.run_all(
        [[sys.executable, os.path.abspath(script), '--member',
          json.dumps([addresses, i] + list(arguments))]
         for i in range(len(self.hosts))], env=env, timeout=timeout)
    return [json.loads(out.strip().splitlines()[-1]) for out in outputs]

  def link_bytes(self):
    """[(bytes sent, bytes received)] of each host's link so far.

    Read at the switch's port: what the host sent is what the port
    received, Ethernet headers included.
    """
    with open('/proc/%d/net/dev' % self._anchor.pid) as dev:
      counters = parse_net_dev(dev.read())
    return [counters['h%d' % i] for i in range(len(self.hosts))]

  def close(self):
    """Removes the namespaces (with their cables and bridge); idempotent.

    SIGINT and SIGTERM wait until it is done, so that a signal cannot leave
    half of the network behind.
    """
    with _signals_held():
      self._remove()

  def _remove(self):
    if self._anchor is not None:
      self._anchor.stdin.close()
      try:
        self._anchor.wait(timeout=5)
      except subprocess.TimeoutExpired:
        self._anchor.kill()
        self._anchor.wait()
      self._anchor = None
    problems = []
    while self._made_namespaces:
      name = self._made_namespaces.pop()
      done = _run(['ip', 'netns', 'delete', name], check=False)
      if done.returncode != 0:
        problems.append('%s: %s' % (name, done.stderr.strip()))
    if problems:
      raise RuntimeError('could not remove network namespace(s) %s'
                         % '; '.join(problems))

  def __enter__(self):
    return self

  def __exit__(self, *unused_exc_info):
    self.close()


@contextlib.contextmanager
def _signals_held():
  """SIGINT and SIGTERM wait for the end of the block: a namespace made is
  always recorded, and one being removed is always removed. (Commands run
  meanwhile inherit the mask: they are short, and the anchor ends on EOF.)
  """
  held = signal.pthread_sigmask(signal.SIG_BLOCK,
                                {signal.SIGINT, signal.SIGTERM})
  try:
    yield
  finally:
    signal.pthread_sigmask(signal.SIG_SETMASK, held)


def made_namespaces(prefix):
  """The network namespaces whose names start with `prefix`."""
  listed = subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                          text=True, check=True).stdout
  return [line.split()[0] for line in listed.splitlines()
          if line.startswith(prefix)]


def left_behind(names, running):
  """Of the namespace names, those that a Network of a process that no
  longer runs made (default names: slimnet-PID-...); `running(pid)` says
  whether a process runs."""
  pids = {name: re.match(r'slimnet-(\d+)-', name) for name in names}
  return [name for name, pid in pids.items()
          if pid and not running(int(pid.group(1)))]


def _runs(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # Another user's process.
  return True


def remove_left_behind():
  """Deletes the namespaces that networks of processes killed with SIGKILL
  left behind; returns their names."""
  gone = left_behind(made_namespaces('slimnet-'), _runs)
  for name in gone:
    _run(['ip', 'netns', 'delete', name])
  return gone


class _Stopped(Exception):
  pass


@contextlib.contextmanager
def removed_on_signals():
  """Turns SIGTERM into an exception inside the block, so that the `with`
  and `finally` blocks it runs through remove what they made; the process
  then exits 143, as a process killed by SIGTERM. SIGINT already raises
  KeyboardInterrupt."""

  def stop(signum, unused_frame):
    raise _Stopped(signum)

  previous = signal.signal(signal.SIGTERM, stop)
  try:
    yield
  except _Stopped:
    raise SystemExit(128 + signal.SIGTERM) from None
  finally:
    signal.signal(signal.SIGTERM, previous)
