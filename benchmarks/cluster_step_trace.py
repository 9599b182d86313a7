"""Where a step of two all-reduce workers goes, op by op, on a shaped link.

cluster_network.py times steps from the outside. This looks inside them.
Two processes, each on a host of a netns.Network whose links are shaped to
a rate, build LeNet's training step with deploy() as all-reduce replicas
(batch --batch_size each, SGD, random images: no input pipeline). They run
--steps steps, timing each and counting their CPU. Then they run
--traced_steps more with TensorFlow's step statistics (RunOptions
FULL_TRACE). Each traced step of each worker is cut into:

  before the all-reduce  from the step's first op to its first collective:
                         the forward pass and the first buffer's gradients.
                         No all-reduce can overlap them, since the next
                         step's forward pass needs this step's update.
  waiting                from there to the first RecvBuf, the first pull of
                         the peer's bytes (the peer may still be computing).
  receiving              from the first RecvBuf's start to the last one's
                         end; "busy" counts only the time in which at least
                         one RecvBuf was under way.
  after                  from the last RecvBuf's end to the step's last op:
                         the unpacking and the update.
  backward overlapped    compute ops (the backward pass, and the casts and
                         unpacking of buffers already in) that ran while
                         receiving.

Each host's eth0 counters, read around the timed steps, give the bytes the
busiest link carried per step, and so the time they take at the rate both
ways at once. The shortest step this compute allows follows from the
measurements:

  the link: before + the link's time + after, with any transport at the
            rate;
  the CPU:  both processes' CPU per step over the machine's cores, with
            TensorFlow's transport, whose CPU it includes.

Setups: float32 and (--wire_dtypes) float16 on the wire
(--gradient_compression=fp16); rates from --rates_gbit. The table goes to
benchmarks/results/cluster_step_trace.md (--results_dir to write
elsewhere). Needs root and iproute2, like cluster_network.py.

  .venv/bin/python benchmarks/cluster_step_trace.py
  .venv/bin/python benchmarks/cluster_step_trace.py --rates_gbit 1 \\
      --wire_dtypes float32 --steps 20 --traced_steps 2
"""

import argparse
import collections
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
import flag_values  # next to this script
import netns  # next to this script
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
# pylint: enable=g-import-not-at-top,wrong-import-position

NAME = 'cluster_step_trace'
TITLE = 'Inside a step of two all-reduce workers on a shaped link'
COMPRESSION = {'float32': 'none', 'float16': 'fp16', 'bfloat16': 'bf16'}
UNTIMED_STEPS = 10  # the first of --steps: start-up, not timed

# An op of a traced step: its kind ('collective', 'transfer' or 'compute'),
# start and end in microseconds since the epoch.
Op = collections.namedtuple('Op', ['kind', 'start', 'end'])
PHASES = ('step', 'before', 'waiting', 'receiving', 'busy', 'after',
          'overlapped')


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--rates_gbit', default='1,0.25',
                      help='comma-separated link rates, Gbit/s')
  parser.add_argument('--wire_dtypes', default='float32,float16',
                      help='what the gradients travel as: float32, float16 '
                      'or bfloat16')
  parser.add_argument('--batch_size', type=int, default=32,
                      help='examples per worker per step')
  parser.add_argument('--steps', type=int, default=40,
                      help='steps, the first %d of them untimed' % UNTIMED_STEPS)
  parser.add_argument('--traced_steps', type=int, default=5)
  parser.add_argument('--inter_op_threads', type=int, default=2)
  parser.add_argument('--results_dir', default=None)
  args = parser.parse_args(argv)
  args.rates = flag_values.positive_numbers(parser, '--rates_gbit',
                                            args.rates_gbit)
  args.dtypes = flag_values.wire_dtypes(parser, args.wire_dtypes)
  if (args.steps <= UNTIMED_STEPS or args.traced_steps < 1 or
      args.batch_size < 1 or args.inter_op_threads < 1):
    parser.error('--steps must be >= %d; --traced_steps, --batch_size and '
                 '--inter_op_threads >= 1' % (UNTIMED_STEPS + 1))
  return args


def _union_seconds(intervals):
  """Seconds covered by at least one of the (start, end) microseconds."""
  covered, reach = 0, None
  for start, end in sorted(intervals):
    if reach is None or start > reach:
      covered += end - start
      reach = end
    elif end > reach:
      covered += end - reach
      reach = end
  return covered / 1e6


def phases(ops):
  """{phase: seconds} of one worker's traced step, from its Ops.

  The phases are those of the module docstring, plus 'step': from the
  first op's start to the last op's end.
  """
  kinds = {op.kind for op in ops}
  if not {'collective', 'transfer'} <= kinds:
    raise ValueError(
        'a traced step needs collectives and RecvBufs (the pulls of the '
        'peer\'s bytes); this one has only %s ops' % (
            ', '.join(sorted(kinds)) or 'no'))
  start = min(op.start for op in ops)
  end = max(op.end for op in ops)
  launch = min(op.start for op in ops if op.kind == 'collective')
  transfers = [(op.start, op.end) for op in ops if op.kind == 'transfer']
  first_byte = min(s for s, _ in transfers)
  last_byte = max(e for _, e in transfers)
  compute = [(max(op.start, first_byte), min(op.end, last_byte))
             for op in ops if op.kind == 'compute'
             and op.end > first_byte and op.start < last_byte]
  return dict(step=(end - start) / 1e6, before=(launch - start) / 1e6,
              waiting=(first_byte - launch) / 1e6,
              receiving=(last_byte - first_byte) / 1e6,
              busy=_union_seconds(transfers),
              after=(end - last_byte) / 1e6,
              overlapped=_union_seconds(compute))


def ops_of(step_stats, graph):
  """The Ops of a tf.RunMetadata's step_stats; `graph` tells the kinds.

  RecvBuf, the pull of a peer's bytes, is no graph op: it is a 'transfer'.
  Collective ops are 'collective'; other graph ops are 'compute'. Nodes
  of no graph op (the executor's _SOURCE, ...) are left out.
  """
  ops = []
  for device in step_stats.dev_stats:
    for node in device.node_stats:
      end = node.all_start_micros + node.all_end_rel_micros
      if node.node_name == 'RecvBuf':
        ops.append(Op('transfer', node.all_start_micros, end))
        continue
      try:
        op_type = graph.get_operation_by_name(node.node_name).type
      except (KeyError, ValueError):
        continue
      kind = 'collective' if op_type.startswith('Collective') else 'compute'
      ops.append(Op(kind, node.all_start_micros, end))
  return ops


def member(addresses, index, batch_size, wire_dtype, steps, traced_steps,
           inter_op_threads, interface='eth0'):
  """One worker: prints {"seconds", "cpu_seconds", "mib", "phases"} as
  JSON; "mib": (sent, received) per timed step by `interface`."""
  # pylint: disable=g-import-not-at-top
  from deployment import model_deploy
  from deployment import update
  from nets import nets_factory
  from tf2_compat.slim_compat import tf
  config = model_deploy.DeploymentConfig(
      clone_on_cpu=True, replica_id=index, num_replicas=len(addresses),
      collective_timeout_secs=120)
  session_config = model_deploy.session_config(
      config, intra_op_parallelism_threads=1,
      inter_op_parallelism_threads=inter_op_threads)
  server = tf.distribute.Server(
      tf.train.ClusterSpec({'worker': addresses}), job_name='worker',
      task_index=index, config=session_config)
  with tf.Graph().as_default() as graph:
    network_fn = nets_factory.get_network_fn('lenet', 10, is_training=True)

    def model_fn():
      images = tf.random.uniform([batch_size, 28, 28, 1])
      labels = tf.random.uniform([batch_size], 0, 10, tf.int32)
      logits, _ = network_fn(images)
      tf.losses.sparse_softmax_cross_entropy(labels, logits)

    train_op = model_deploy.deploy(
        config, model_fn, optimizer=tf.train.GradientDescentOptimizer(0.01),
        update=update.UpdateOptions(
            gradient_compression=COMPRESSION[wire_dtype])).train_op
    broadcast = model_deploy.broadcast_variables(config)
    with tf.Session(server.target, config=session_config) as session:
      session.run(tf.global_variables_initializer())
      session.run(broadcast)
      seconds = []
      for step in range(steps):
        if step == UNTIMED_STEPS:
          before = resource.getrusage(resource.RUSAGE_SELF)
          bytes_before = link_bytes(interface)
        started = time.perf_counter()
        session.run(train_op)
        seconds.append(time.perf_counter() - started)
      after = resource.getrusage(resource.RUSAGE_SELF)
      bytes_after = link_bytes(interface)
      traced = []
      for _ in range(traced_steps):
        metadata = tf.RunMetadata()
        session.run(train_op, run_metadata=metadata, options=tf.RunOptions(
            trace_level=tf.RunOptions.FULL_TRACE))
        traced.append(phases(ops_of(metadata.step_stats, graph)))
  timed = steps - UNTIMED_STEPS
  cpu = (after.ru_utime + after.ru_stime - before.ru_utime -
         before.ru_stime) / timed
  mib = [(a - b) / timed / 2 ** 20 for a, b in zip(bytes_after, bytes_before)]
  print(json.dumps({'seconds': seconds[UNTIMED_STEPS:], 'cpu_seconds': cpu,
                    'mib': mib, 'phases': traced}), flush=True)


def link_bytes(interface):
  """(bytes sent, bytes received) by `interface` of this process's network
  namespace so far. A host's eth0 sends what its port on the switch
  receives and the other way round, Ethernet headers included."""
  with open('/proc/net/dev') as dev:
    received, sent = netns.parse_net_dev(dev.read())[interface]
  return sent, received


def run_setup(args, rate_gbit, wire_dtype):
  """The workers' outputs: [{"seconds", "cpu_seconds", "mib" (out, in
  per step), "phases"}, one per worker]."""
  with netns.Network(2, int(rate_gbit * 1e9)) as network:
    try:
      return network.run_members(__file__, [
          args.batch_size, wire_dtype, args.steps, args.traced_steps,
          args.inter_op_threads])
    except RuntimeError as e:
      sys.exit('%g Gbit/s, %s: %s' % (rate_gbit, wire_dtype, e))


def summary(workers, rate_gbit, cores):
  """The medians of one setup and the floors they set, as a dict.

  `workers`: what run_setup returned. Phases are medians over both
  workers and all traced steps; the link's bytes are those of the worker
  that moved the most.
  """
  mib = max((w['mib'] for w in workers), key=sum)
  median = {phase: statistics.median(
      steps[phase] for worker in workers for steps in worker['phases'])
            for phase in PHASES}
  link = max(mib) * 2 ** 20 * 8 / (rate_gbit * 1e9)
  return dict(
      median,
      waiting_each=[statistics.median(steps['waiting']
                                      for steps in w['phases'])
                    for w in workers],
      untraced=statistics.median(s for w in workers for s in w['seconds']),
      cpu=statistics.median(w['cpu_seconds'] for w in workers),
      link=link, mib=mib,
      link_floor=median['before'] + link + median['after'],
      cpu_floor=sum(w['cpu_seconds'] for w in workers) / cores)


def table(rows):
  """Markdown: one row per (rate, wire dtype); `rows` maps those to
  summary() dicts."""
  lines = [
      '| link | wire | s per step | traced step s | before the all-reduce s '
      '| waiting s (each worker) | receiving s (busy) | backward '
      'overlapped s | after s | busiest link MiB out / in | both ways at the '
      'rate s | receiving / link | CPU s per step per process |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for (rate_gbit, dtype), row in rows.items():
    lines.append(
        '| %s | %s | %.3f | %.3f | %.3f | %.3f (%s) | %.3f (%.3f) | %.3f | '
        '%.3f | %.1f / %.1f | %.3f | %.2fx | %.3f |' % (
            netns.rate_label(rate_gbit * 1e9), dtype, row['untraced'],
            row['step'], row['before'], row['waiting'],
            ' / '.join('%.3f' % w for w in row['waiting_each']),
            row['receiving'], row['busy'], row['overlapped'], row['after'],
            row['mib'][0], row['mib'][1], row['link'],
            row['receiving'] / row['link'], row['cpu']))
  return lines


def floor(row):
  """The shortest step a setup's compute allows with TensorFlow's
  transport: the larger floor."""
  return max(row['link_floor'], row['cpu_floor'])


def floor_lines(rows, cores):
  """What each setup's step could shrink to, and its ratios."""
  lines = []
  for (rate_gbit, dtype), row in rows.items():
    lines.append(
        '- %s, %s on the wire: a step of %.3f s, %.2fx the %.3f s its '
        'busiest link needs both ways at once. With any transport at the '
        'rate, the %.3f s before the all-reduce and the %.3f s after it '
        'leave at least %.3f s (%.2fx). With TensorFlow\'s, the two '
        'processes\' CPU per step over %d cores, its own included (%.3f s), '
        'bounds it too: at least %.3f s (%.2fx).' % (
            netns.rate_label(rate_gbit * 1e9), dtype, row['untraced'],
            row['untraced'] / row['link'], row['link'], row['before'],
            row['after'], row['link_floor'], row['link_floor'] / row['link'],
            cores, row['cpu_floor'], floor(row), floor(row) / row['link']))
  return lines


def compression_lines(rows):
  """Per rate with float32 and a 16-bit wire: how much faster the 16-bit
  steps are, and how much faster they could be were both at their floors."""
  lines = []
  for (rate_gbit, dtype), row in rows.items():
    full = rows.get((rate_gbit, 'float32'))
    if dtype == 'float32' or full is None:
      continue
    lines.append(
        '- %s: %s steps are %.2fx as fast as float32 ones. With both at '
        'their floors they would be %.2fx as fast with any transport at the '
        'rate (%.3f s against %.3f s), %.2fx with TensorFlow\'s (%.3f s '
        'against %.3f s).' % (
            netns.rate_label(rate_gbit * 1e9), dtype,
            full['untraced'] / row['untraced'],
            full['link_floor'] / row['link_floor'], row['link_floor'],
            full['link_floor'], floor(full) / floor(row), floor(row),
            floor(full)))
  return lines


def main(argv=None):
  args = parse_args(argv)
  for name in netns.remove_left_behind():
    print('removed network namespace %s, left by a killed run' % name)
  cores = len(os.sched_getaffinity(0))
  rows = {}
  with netns.removed_on_signals(), OtherLoad() as load:
    for rate in args.rates:
      for dtype in args.dtypes:
        rows[(rate, dtype)] = summary(run_setup(args, rate, dtype), rate,
                                      cores)
        print('%g Gbit/s, %s: %.3f s per step' % (
            rate, dtype, rows[(rate, dtype)]['untraced']), flush=True)
  lines = table(rows) + [
      '',
      'Two workers, each on a host whose link is shaped to the rate (tc '
      'htb), LeNet with deploy() as all-reduce replicas, batch %d per '
      'worker, SGD, random images (no input pipeline); %d steps timed '
      'after %d, then %d traced (FULL_TRACE). Phases: medians over both '
      'workers and the traced steps (see the script\'s docstring); tracing '
      'slows a step a little, so "s per step" is the untraced median. Each '
      'process: 1 intra-op and %d inter-op threads. Bytes: each host\'s '
      'eth0 counters over the timed steps, Ethernet headers included.' % (
          args.batch_size, args.steps - UNTIMED_STEPS, UNTIMED_STEPS,
          args.traced_steps,
          args.inter_op_threads),
      '', '## The shortest step this compute allows', ''
  ] + floor_lines(rows, cores) + [''] + compression_lines(rows) + [
      '', '## Load', '', disturbance_note(load)]
  return results.publish(NAME, TITLE, lines, argv=argv,
                         directory=args.results_dir)


if __name__ == '__main__':
  if len(sys.argv) == 3 and sys.argv[1] == '--member':
    member(*json.loads(sys.argv[2]))
  else:
    main()
