"""How long TensorFlow's all-reduce between two hosts takes to move a
LeNet's gradients over a shaped link, by how they are cut into buffers.

Two processes, each on a host of a netns.Network whose links are shaped to
--rate_gbit, hold the same number of floats as LeNet's variables
(3,274,634: 12.5 MiB in float32) and all-reduce them again and again, with
nothing else to do: no model, no input, no update. The floats go in
buffers of at most --buffer_mib each, one CollectiveReduceV2 per buffer,
packed as deployment.collectives packs gradients; every buffer size is
measured in float32 and, when --wire_dtypes says so, in float16 (what
--gradient_compression=fp16 sends). The variants take turns for --rounds
rounds.

For each variant: the median seconds of an all-reduce (of --steps, after
--warmup), the bytes the busiest host sent and received per all-reduce
(the switch's counters), and the ratio of the time to what those bytes
take at the rate both ways at once. The rest of a training step (the
forward and backward pass, the update, the input) is measured by
cluster_network.py; this isolates the collective.

The table goes to benchmarks/results/all_reduce_buffers.md (--results_dir
to write elsewhere). Needs root and iproute2, like cluster_network.py.

  .venv/bin/python benchmarks/all_reduce_buffers.py
  .venv/bin/python benchmarks/all_reduce_buffers.py --buffer_mib 32,4 \
      --rounds 1
"""

import argparse
import json
import os
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

NAME = 'all_reduce_buffers'
TITLE = "All-reduce of a LeNet's gradients between two hosts, by buffer size"
LENET_FLOATS = 3274634  # nets.lenet at 10 classes, every variable.


def parse_args(argv=None):
  parser = argparse.ArgumentParser(
      description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  parser.add_argument('--rate_gbit', type=float, default=1.0)
  parser.add_argument('--buffer_mib', default='32,8,4,2,1',
                      help='comma-separated buffer sizes, MiB')
  parser.add_argument('--wire_dtypes', default='float32,float16')
  parser.add_argument('--steps', type=int, default=40,
                      help='timed all-reduces per run')
  parser.add_argument('--warmup', type=int, default=5,
                      help='all-reduces before the timed ones')
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--results_dir', default=None)
  args = parser.parse_args(argv)
  args.buffers = flag_values.positive_numbers(parser, '--buffer_mib',
                                              args.buffer_mib)
  args.dtypes = flag_values.wire_dtypes(parser, args.wire_dtypes)
  if args.steps < 2 or args.warmup < 0 or args.rounds < 1:
    parser.error('--steps must be >= 2, --warmup >= 0 and --rounds >= 1')
  return args


def member(addresses, index, buffer_bytes, dtype, steps, warmup):
  """One host's side: prints {"seconds": [...]} of its timed all-reduces."""
  # pylint: disable=g-import-not-at-top
  from deployment import collectives
  from tf2_compat.slim_compat import tf
  cluster = tf.train.ClusterSpec({'worker': addresses})
  config = tf.ConfigProto(intra_op_parallelism_threads=1,
                          inter_op_parallelism_threads=1)
  config.experimental.collective_group_leader = (
      '/job:worker/replica:0/task:0')
  server = tf.distribute.Server(cluster, job_name='worker',
                                task_index=index, config=config)
  with tf.Graph().as_default():
    with tf.device('/job:worker/replica:0/task:%d/device:CPU:0' % index):
      values = tf.get_local_variable(
          'values', initializer=tf.random_normal([LENET_FLOATS]))
      group = collectives.CollectiveGroup(
          len(addresses), collectives.REPLICA_GRADIENTS_GROUP_KEY)
      wire = None if dtype == 'float32' else tf.as_dtype(dtype)
      means = collectives.all_reduce_mean([values], group, index, 'probe',
                                          buffer_bytes, wire)
      done = tf.reduce_sum(means[0][:1])
    with tf.Session(server.target, config=config) as session:
      session.run(tf.local_variables_initializer())
      seconds = []
      for _ in range(warmup + steps):
        start = time.perf_counter()
        session.run(done)
        seconds.append(time.perf_counter() - start)
  print(json.dumps({'seconds': seconds[warmup:]}), flush=True)


def run_variant(args, buffer_mib, dtype):
  """(median seconds per all-reduce, busiest host's MiB out, MiB in)."""
  with netns.Network(2, int(args.rate_gbit * 1e9)) as network:
    before = network.link_bytes()
    try:
      outputs = network.run_members(__file__, [
          int(buffer_mib * 2 ** 20), dtype, args.steps, args.warmup])
    except RuntimeError as e:
      sys.exit('%g MiB %s: %s' % (buffer_mib, dtype, e))
    after = network.link_bytes()
  moved = [((a[0] - b[0]), (a[1] - b[1])) for a, b in zip(after, before)]
  out_bytes, in_bytes = max(moved, key=sum)
  count = (args.warmup + args.steps) * 2 ** 20
  return (statistics.median(s for o in outputs for s in o['seconds']),
          out_bytes / count, in_bytes / count)


def buffer_count(buffer_mib):
  """Collectives per all-reduce: the float32 values are cut into buffers
  before a 16-bit wire dtype halves each."""
  return -(-LENET_FLOATS * 4 // int(buffer_mib * 2 ** 20))


def table(args, measured):
  rate = args.rate_gbit * 1e9
  lines = [
      '| wire dtype | buffer MiB (float32) | collectives per all-reduce | s per '
      'all-reduce | busiest host: MiB out / in | both ways at the rate s | '
      'ratio to the link | s per round |',
      '|---|---:|---:|---:|---:|---:|---:|---|',
  ]
  for (dtype, buffer_mib), rounds in measured.items():
    seconds = statistics.median(r[0] for r in rounds)
    out_mib = statistics.median(r[1] for r in rounds)
    in_mib = statistics.median(r[2] for r in rounds)
    link = max(out_mib, in_mib) * 2 ** 20 * 8 / rate
    lines.append('| %s | %g | %d | %.3f | %.1f / %.1f | %.3f | %.2fx | %s |'
                 % (dtype, buffer_mib, buffer_count(buffer_mib),
                    seconds, out_mib, in_mib, link, seconds / link,
                    ', '.join('%.3f' % r[0] for r in rounds)))
  return lines


def main(argv=None):
  args = parse_args(argv)
  for name in netns.remove_left_behind():
    print('removed network namespace %s, left by a killed run' % name)
  variants = [(dtype, size) for dtype in args.dtypes
              for size in args.buffers]
  measured = {variant: [] for variant in variants}
  with netns.removed_on_signals(), OtherLoad() as load:
    for round_index in range(args.rounds):
      first = round_index % len(variants)
      for dtype, size in variants[first:] + variants[:first]:
        measured[(dtype, size)].append(run_variant(args, size, dtype))
        print('round %d, %s, %g MiB buffers: %.3f s per all-reduce' % (
            round_index + 1, dtype, size, measured[(dtype, size)][-1][0]),
              flush=True)
  lines = table(args, measured) + [
      '',
      'Two hosts, links shaped to %g Gbit/s (tc htb), %d floats (LeNet\'s '
      'variables, 12.5 MiB in float32) all-reduced %d times after %d, '
      'nothing else running in the processes; median over both hosts\' '
      'all-reduces and over %d round(s). Each process: 1 intra-op and 1 '
      'inter-op thread. Bytes: the switch ports\' counters per all-reduce, '
      'Ethernet headers included; the link time is the busiest direction '
      'of the busiest host at the rate.' % (
          args.rate_gbit, LENET_FLOATS, args.steps, args.warmup,
          args.rounds),
      '', '## Load', '', disturbance_note(load)]
  return results.publish(NAME, TITLE, lines, argv=argv,
                         directory=args.results_dir)


if __name__ == '__main__':
  if len(sys.argv) == 3 and sys.argv[1] == '--member':
    member(*json.loads(sys.argv[2]))
  else:
    main()
