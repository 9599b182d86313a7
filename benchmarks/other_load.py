"""How busy other processes keep the machine while a benchmark runs.

The load average counts the benchmark itself, so it cannot tell a quiet
machine from a busy one. This reads /proc instead: the cores' busy time
minus the CPU time of this process and of the child processes it has
waited for (a benchmark that runs its work in subprocesses must therefore
wait for them before the `with` block ends, which subprocess.run and
Popen.wait do).

  with OtherLoad() as load:
    run_benchmark()
  print(disturbance_note(load))
"""

import os
import time

# Above this share of the cores, results are reported as disturbed.
DISTURBED_FRACTION = 0.1


class OtherLoad:
  """Context manager; afterwards `fraction` is the share (0.0 to 1.0) of the
  cores' time that processes other than this one and its waited-for
  children used, or None without /proc.
  """

  def __init__(self):
    self.fraction = None
    self._start = None

  @staticmethod
  def _read_ticks():
    """(busy ticks of all cores, busy ticks of this process and of its
    waited-for children)."""
    with open('/proc/stat') as stat:
      fields = [int(x) for x in stat.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    with open('/proc/self/stat') as own:
      # Fields after the ')' closing the command name; utime, stime,
      # cutime and cstime are the 14th to 17th fields of the whole line.
      own_fields = own.read().rsplit(')', 1)[1].split()
    return sum(fields[:8]) - idle - iowait, sum(
        int(tick) for tick in own_fields[11:15])

  def __enter__(self):
    try:
      self._start = (time.monotonic(), self._read_ticks())
    except OSError:
      self._start = None
    return self

  def __exit__(self, *unused_exc_info):
    if self._start is None:
      return
    start_time, (start_busy, start_own) = self._start
    busy, own = self._read_ticks()
    elapsed_ticks = ((time.monotonic() - start_time)
                     * os.sysconf('SC_CLK_TCK') * os.cpu_count())
    self.fraction = max(0.0, (busy - start_busy) - (own - start_own)) / max(
        elapsed_ticks, 1.0)

  @property
  def disturbed(self):
    return self.fraction is not None and self.fraction > DISTURBED_FRACTION


def disturbance_note(load):
  """A Markdown list item saying how busy other processes kept the cores."""
  if load.fraction is None:
    return '- other processes: unknown (no /proc)'
  return ('- other processes kept %.0f%% of the %d cores busy meanwhile%s' % (
      100 * load.fraction, os.cpu_count(),
      '; re-run when the machine is quieter' if load.disturbed else ''))
