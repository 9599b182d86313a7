"""The tables, closing note and plot of cluster_network.py, from its
measurements.

`measured` maps (setup name, link rate in bits/s) to the cluster_runs.Window
of each round; the process alone, which has no link, is under ('alone',
None). `setups` are cluster_runs.Setup tuples (name, ps tasks, workers,
flags, worker batches per global step, program), the process alone first.
"""

import collections
import statistics

import cluster_runs  # next to this script
import cluster_throughput  # next to this script
import netns  # next to this script

ALONE = 'alone'
SYNC_PS = '1 ps + 2 workers sync'
ALL_REDUCE = '2 workers all-reduce'
KERAS_MWMS = cluster_throughput.KERAS_MWMS
ALL_REDUCE_FP16 = cluster_throughput.ALL_REDUCE_FP16
# The rate the targets are judged at.
TARGET_RATE_BITS = 10 ** 9

# A ratio of examples/sec the results give at each rate: setup `faster`
# over setup `slower`, in the column `heading`. Its target: `faster` at
# least `target` times as fast at TARGET_RATE_BITS, which `claim` says in
# words (%.1fx where the target goes).
Ratio = collections.namedtuple('Ratio', ['faster', 'slower', 'heading',
                                         'target', 'claim'])
RATIOS = (
    Ratio(ALL_REDUCE, SYNC_PS, 'all-reduce / sync ps', 1.5,
          'all-reduce at least %.1fx the synchronous ps setup'),
    Ratio(ALL_REDUCE, KERAS_MWMS, 'project all-reduce / Keras MWMS', 1.3,
          'the project\'s all-reduce at least %.1fx Keras\'s '
          'MultiWorkerMirroredStrategy'),
    Ratio(ALL_REDUCE_FP16, ALL_REDUCE, 'all-reduce fp16 / float32', 1.8,
          'the all-reduce with --gradient_compression=fp16 at least %.1fx '
          'the float32 one'),
)
# The float32 all-reduce's global step at TARGET_RATE_BITS: at most this
# many times what its busiest link's bytes take both ways at once.
WIRE_TARGET = 1.2


def median_window(windows):
  """The Window of the medians of each field over rounds."""
  return cluster_runs.Window(*(statistics.median(w[i] for w in windows)
                               for i in range(len(cluster_runs.Window._fields))))


def throughput_table(setups, rates, measured):
  """Examples/sec, CPU and bytes per global step of each setup and rate."""
  alone = median_window(measured[(ALONE, None)])
  lines = [
      '| link | setup | processes | examples/sec | ratio to alone | CPU '
      'ms/example (all processes) | MiB sent per global step | busiest '
      'link: MiB out / in per global step | examples/sec per round |',
      '|---|---|---:|---:|---:|---:|---:|---:|---|',
  ]
  rows = [('none', setups[0], None)] + [
      (netns.rate_label(rate), setup, rate)
      for rate in rates for setup in setups[1:]]
  for label, setup, rate in rows:
    windows = measured[(setup[0], rate)]
    m = median_window(windows)
    lines.append(
        '| %s | %s | %d | %.0f | %.3f | %.2f | %.1f | %.1f / %.1f | %s |' % (
            label, setup[0], setup[1] + setup[2], m.examples_per_sec,
            m.examples_per_sec / alone.examples_per_sec,
            m.cpu_ms_per_example, m.mib_sent_per_step,
            m.busiest_out_mib_per_step, m.busiest_in_mib_per_step,
            ', '.join('%.0f' % w.examples_per_sec for w in windows)))
  return lines


# Seconds of one global step. compute: the workers' share of the step's
# examples at the speed of the process alone, side by side; communication:
# the rest of the step (moving bytes, waiting, the CPU the network stack
# takes). wire_at_once / wire_in_turns: the busiest link's bytes at the
# link rate, its two directions at the same time / one after the other.
# cpu_per_process: CPU seconds (user + system) a process of the setup
# spent per global step, on average; near `step`, the CPU decides the
# speed, not the link.
StepTime = collections.namedtuple(
    'StepTime', ['step', 'compute', 'communication', 'wire_at_once',
                 'wire_in_turns', 'cpu_per_process'])


def step_time(args, setup, rate, measured):
  """The StepTime of a cluster setup at a link rate."""
  examples = args.batch_size * setup[4]
  alone = median_window(measured[(ALONE, None)]).examples_per_sec
  m = median_window(measured[(setup[0], rate)])
  step = examples / m.examples_per_sec
  compute = examples / (alone * setup[2])
  seconds_per_mib = 2 ** 20 * 8 / rate
  out_mib, in_mib = m.busiest_out_mib_per_step, m.busiest_in_mib_per_step
  return StepTime(step, compute, step - compute,
                  max(out_mib, in_mib) * seconds_per_mib,
                  (out_mib + in_mib) * seconds_per_mib,
                  m.cpu_ms_per_example * examples / 1000 /
                  (setup[1] + setup[2]))


def time_table(args, setups, rates, measured):
  lines = [
      '| link | setup | s per global step | compute s (alone\'s speed) | '
      'communication s (the rest) | busiest link at the rate: both ways at '
      'once s | one way after the other s | CPU s per process |',
      '|---|---|---:|---:|---:|---:|---:|---:|',
  ]
  for rate in rates:
    for setup in setups[1:]:
      lines.append('| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |' % (
          (netns.rate_label(rate), setup[0])
          + tuple(step_time(args, setup, rate, measured))))
  return lines


def ratio_lines(setups, rates, measured, ratios=RATIOS):
  """A column per ratio whose two setups ran, a row per rate, then a line
  per target saying whether it was met; [] when no ratio's setups ran."""
  names = {setup[0] for setup in setups}
  ran = [ratio for ratio in ratios
         if {ratio.faster, ratio.slower} <= names]
  if not ran:
    return []
  lines = ['| link | %s |' % ' | '.join('%s (examples/sec)' % ratio.heading
                                        for ratio in ran),
           '|---|%s' % ('---:|' * len(ran))]
  for rate in rates:
    lines.append('| %s | %s |' % (netns.rate_label(rate), ' | '.join(
        '%.2fx' % _ratio(ratio, rate, measured) for ratio in ran)))
  if TARGET_RATE_BITS in rates:
    lines.append('')
    for ratio in ran:
      value = _ratio(ratio, TARGET_RATE_BITS, measured)
      lines.append('Target: at %s, %s: %s (%.2fx).' % (
          netns.rate_label(TARGET_RATE_BITS), ratio.claim % ratio.target,
          'met' if value >= ratio.target else 'NOT met', value))
  return lines


def _ratio(ratio, rate, measured):
  return (median_window(measured[(ratio.faster, rate)]).examples_per_sec /
          median_window(measured[(ratio.slower, rate)]).examples_per_sec)


def link_table(link_checks):
  """`link_checks`: {rate: (one sender's payload bits/s, two senders' to
  one receiver)}."""
  lines = ['| link | one sender: payload Gbit/s | share of the rate | two '
           'senders to one host: payload Gbit/s | share of the rate |',
           '|---|---:|---:|---:|---:|']
  for rate, (single, fan_in) in sorted(link_checks.items()):
    lines.append('| %s | %.3f | %.3f | %.3f | %.3f |' % (
        netns.rate_label(rate), single / 1e9, single / rate, fan_in / 1e9,
        fan_in / rate))
  return lines


def wire_target_line(args, setups, rates, measured):
  """Whether the float32 all-reduce's step at TARGET_RATE_BITS is within
  WIRE_TARGET of its link time; without that rate, the same ratio at the
  slowest rate run, unjudged; [] when the all-reduce did not run."""
  setup = [s for s in setups if s[0] == ALL_REDUCE]
  if not setup:
    return []
  rate = TARGET_RATE_BITS if TARGET_RATE_BITS in rates else min(rates)
  t = step_time(args, setup[0], rate, measured)
  ratio = t.step / t.wire_at_once
  if rate != TARGET_RATE_BITS:
    return ['At %s, the all-reduce\'s global step took %.2fx the time its '
            'busiest link\'s bytes take both ways at once (%.3f s against '
            '%.3f s); the target (%.1fx) is judged at %s.' % (
                netns.rate_label(rate), ratio, t.step, t.wire_at_once,
                WIRE_TARGET, netns.rate_label(TARGET_RATE_BITS))]
  return ['Target: at %s, the all-reduce\'s global step at most %.1fx the '
          'time its busiest link\'s bytes take both ways at once: %s (%.3f '
          's against %.3f s, %.2fx).' % (
              netns.rate_label(rate), WIRE_TARGET,
              'met' if ratio <= WIRE_TARGET else 'NOT met', t.step,
              t.wire_at_once, ratio)]


def where_the_time_goes(args, setups, rates, measured):
  """A line per cluster setup at the target rate (or the slowest rate
  run), from step_time."""
  rate = TARGET_RATE_BITS if TARGET_RATE_BITS in rates else min(rates)
  lines = ['At %s, per global step:' % netns.rate_label(rate), '']
  for setup in setups[1:]:
    t = step_time(args, setup, rate, measured)
    m = median_window(measured[(setup[0], rate)])
    lines.append(
        '- %s: %.3f s: %.3f s of compute at the speed of the process alone '
        'and %.3f s of communication; the busiest link carried %.1f MiB out '
        'and %.1f MiB in, %.3f s at the rate both ways at once, %.3f s one '
        'way after the other; each of its %d processes used %.3f s of CPU '
        '(%.0f%% of the step).' % (
            setup[0], t.step, t.compute, t.communication,
            m.busiest_out_mib_per_step, m.busiest_in_mib_per_step,
            t.wire_at_once, t.wire_in_turns, setup[1] + setup[2],
            t.cpu_per_process, 100 * t.cpu_per_process / t.step))
  return lines


def plot(path, setups, rates, measured, subtitle):
  """Draws examples/sec against link rate, a line per cluster setup and
  the process alone as a level line; writes a PNG to `path`."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')  # No display: draws into the file only.
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, axes = pyplot.subplots(figsize=(7, 5.5), dpi=100,
                                 layout='constrained')
  gbits = [rate / 1e9 for rate in rates]
  for setup in setups[1:]:
    axes.plot(gbits, [median_window(measured[(setup[0], rate)])
                      .examples_per_sec for rate in rates],
              marker='o', label=setup[0])
  alone = median_window(measured[(ALONE, None)]).examples_per_sec
  axes.axhline(alone, color='grey', linestyle='--',
               label='alone (no network)')
  axes.set_xscale('log')
  axes.set_xticks(gbits, ['%g' % g for g in gbits])
  axes.set_xlabel('link rate of every host, Gbit/s')
  axes.set_ylabel('examples/sec')
  axes.set_ylim(bottom=0)
  axes.set_title('LeNet on digits, each task its own host\n' + subtitle,
                 fontsize=10)
  axes.grid(True, alpha=0.3)
  # Below the axes, where no line runs.
  axes.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.14),
              ncol=2)
  figure.savefig(path, format='png')
  pyplot.close(figure)
  return path
