"""Measures the cluster setups with every task on a host of its own, each
host's link shaped to a rate, as between machines.

On 127.0.0.1 (cluster_throughput.py) moving a step's bytes costs CPU on the
same cores as the compute, and nothing limits the bandwidth. Here each task
runs in its own Linux network namespace (netns.Network), joined to the
others by a bridge through a veth cable shaped with tc htb at both ends to
the link rate (--rates_gbit), and, where the kernel has netem, with a delay
(--delay_ms) on every packet a host sends. Every process still runs on this
machine; the benchmark creates the namespaces, runs each task in its own
with `ip netns exec` (netns_task.py), and removes them afterwards, also on
failure, Ctrl-C and SIGTERM. Needs root and iproute2.

Setups (LeNet on digits, batch --batch_size per worker, SGD): alone (one
process, no network), 1 ps + 2 workers (asynchronous), 1 ps + 2 workers
sync, 2 workers all-reduce, 2 workers averaging every 10 steps, and 2
workers of the same training in tf-keras with MultiWorkerMirroredStrategy
(keras_mwms_train.py), whose own all-reduce is the peer of the project's.
Each runs at each rate; the setups and rates take turns for --rounds rounds.

Before the runs, a TCP transfer checks each rate (link_check.py): one host
to another, and two hosts to one (they share its link). During the runs,
the byte counters of the switch's ports give the bytes each host sent and
received per global step; examples/sec and CPU are measured as in
cluster_throughput.py (cluster_runs.py). From those, the time of a global
step is split into compute (at the speed of the process alone) and
communication (the rest), beside the time the busiest link's bytes take at
the rate.

The tables go to benchmarks/results/cluster_network.md, with the machine,
its load average and the share of the cores other processes used, and the
plot of examples/sec against link rate to cluster_network.png beside it
(--results_dir to write elsewhere).

Usage (from the repository root, as root):

  .venv/bin/python benchmarks/cluster_network.py
  .venv/bin/python benchmarks/cluster_network.py --rates_gbit 1 --rounds 1
"""

import functools
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_runs  # next to this script
import cluster_throughput  # next to this script
import flag_values  # next to this script
import link_check  # next to this script
import netns  # next to this script
import netns_task  # next to this script
import network_report  # next to this script
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
# pylint: enable=g-import-not-at-top,wrong-import-position

NAME = 'cluster_network'
TITLE = 'Clusters on a shaped network, a host per task'
SCRIPT = 'benchmarks/cluster_network.py'  # the result file's command runs it
SETUP_NAMES = ('alone', '1 ps + 2 workers', '1 ps + 2 workers sync',
               '2 workers all-reduce', cluster_throughput.ALL_REDUCE_FP16,
               cluster_throughput.ALL_REDUCE_ONE_BUFFER,
               '2 workers averaging every 10 steps',
               cluster_throughput.KERAS_MWMS)
SETUPS = tuple(setup for setup in cluster_throughput.SETUPS
               if setup.name in SETUP_NAMES)


def parse_args(argv=None):
  parser = cluster_runs.run_parser(__doc__, SETUPS, default_steps=200,
                                   default_warmup_steps=40)
  parser.add_argument('--rates_gbit', default='0.5,1,2.5,10',
                      help='comma-separated link rates, Gbit/s')
  parser.add_argument('--delay_ms', type=float, default=0.1,
                      help='delay added to every packet a host sends '
                      '(netem; recorded as not applied on a kernel without '
                      'it)')
  parser.add_argument('--check_seconds', type=float, default=1.0,
                      help='length of each link check transfer at the rate')
  parser.add_argument('--name', default=NAME,
                      help='the result file is NAME.md, its plot NAME.png')
  args = cluster_runs.parse_run_args(parser, argv, SETUPS)
  rates = flag_values.positive_numbers(parser, '--rates_gbit',
                                      args.rates_gbit)
  args.rates = sorted({int(rate * 1e9) for rate in rates})
  return args


def check_links(args):
  """{rate: (payload bits/s one host to another, two hosts to one)}, and
  the last network (for its delay_note and delay_label)."""
  checks = {}
  for rate in args.rates:
    with netns.Network(3, rate, args.delay_ms) as network:
      size = int(rate / 8 * args.check_seconds)
      checks[rate] = (
          link_check.payload_rate(network, [0], 1, size),
          link_check.payload_rate(network, [0, 1], 2, size // 2))
    print('link check, %s: %.3f Gbit/s of payload, %.3f with two senders'
          % ((netns.rate_label(rate),) + tuple(r / 1e9 for r in
                                                checks[rate])), flush=True)
  return checks, network


def run_on_network(args, dataset_dir, setup, rate, train_dir):
  """One run of a cluster setup, each task on a host of a new Network."""
  with netns.Network(setup.num_ps + setup.num_workers, rate,
                     args.delay_ms) as network:
    return cluster_runs.run_cluster(
        args, dataset_dir, train_dir, setup.num_ps, setup.num_workers,
        setup.extra, wrapper=[os.path.abspath(netns_task.__file__)],
        env={netns_task.HOSTS_VARIABLE: netns_task.hosts_value(
            network, setup.num_ps)},
        link_bytes=network.link_bytes, program=setup.program)


def _report(key, round_index, result):
  name, rate = key
  print('round %d, %s, %s: %.0f examples/sec, %.2f CPU ms/example, %.1f '
        'MiB sent/step, busiest link %.1f MiB out, %.1f in/step' % (
            (round_index + 1, netns.rate_label(rate) if rate else 'no link',
             name) + tuple(result)), flush=True)


def measure(args, dataset_dir):
  """{(setup name, rate or None for alone): [Window per round]}."""
  alone, clusters = args.setups[0], args.setups[1:]
  runs = [(alone, None)] + [(setup, rate) for rate in args.rates
                            for setup in clusters]
  measured = {(setup[0], rate): [] for setup, rate in runs}
  for round_index in range(args.rounds):
    first = round_index % len(runs)  # Rotates, so no run always leads.
    for setup, rate in runs[first:] + runs[:first]:
      if rate is None:
        run = functools.partial(cluster_runs.run_alone, args, dataset_dir,
                                link_bytes=cluster_runs.no_link)
      else:
        run = functools.partial(run_on_network, args, dataset_dir, setup,
                                rate)
      result = cluster_runs.timed_run(setup[0], args, setup[4], run)
      measured[(setup[0], rate)].append(result)
      _report((setup[0], rate), round_index, result)
  return measured


def report_lines(args, measured, link_checks, delay_note, load, loadavg):
  setups, rates = args.setups, args.rates
  return (
      ['## Link check', '',
       'Payload of a TCP transfer of %g s at the rate between two hosts, '
       'then from two hosts to a third at once (they share its link); 1448 '
       'of every 1514 bytes a link carries are payload (95.6%%). Sender and '
       'receiver are Python processes on the same cores as everything '
       'else (see Load): at fast rates, the CPU they get can limit them '
       'before the link does (tests/system/test_network.py checks the '
       'shaping at rates they fill).' % args.check_seconds, ''] +
      network_report.link_table(link_checks) +
      ['', '- delay: %s' % delay_note, '', '## Throughput', ''] +
      network_report.throughput_table(setups, rates, measured) +
      ['', 'LeNet on digits, batch %d per worker, SGD; %d global steps per '
       'run, timed after step %d; median of %d round(s). Every process: '
       'TF_NUM_INTRAOP_THREADS=%d, TF_NUM_INTEROP_THREADS=%d, 1 reader, 1 '
       'preprocessing thread. Bytes: the switch ports\' counters, Ethernet '
       'headers included.' % (
           args.batch_size, args.steps, args.warmup_steps, args.rounds,
           args.intra_op_threads, args.inter_op_threads), ''] +
      network_report.ratio_lines(setups, rates, measured) +
      ['', '## Where the time of a global step goes', ''] +
      network_report.time_table(args, setups, rates, measured) + [''] +
      network_report.where_the_time_goes(args, setups, rates, measured) +
      [''] + network_report.wire_target_line(args, setups, rates, measured) +
      ['', '![examples/sec against link rate](%s.png)' % args.name, '',
       '## Load', '', disturbance_note(load),
       '- load average (1, 5, 15 min): %s at the start, %s at the end' % (
           ', '.join('%.2f' % x for x in loadavg[0]),
           ', '.join('%.2f' % x for x in loadavg[1]))])


def main(argv=None):
  """Measures, prints and writes the tables and the plot; returns the
  result file's path."""
  args = parse_args(argv)
  for name in netns.remove_left_behind():
    print('removed network namespace %s, left by a killed run' % name)
  with netns.removed_on_signals(), cluster_runs.digits_dataset(
      args.dataset_dir) as dataset_dir:
    loadavg = [os.getloadavg()]
    with OtherLoad() as load:
      link_checks, network = check_links(args)
      measured = measure(args, dataset_dir)
    loadavg.append(os.getloadavg())
  path = results.publish(args.name, TITLE, report_lines(
      args, measured, link_checks, network.delay_note, load, loadavg),
                         directory=args.results_dir,
                         command=shlex.join(
                             ['.venv/bin/python', SCRIPT] +
                             list(sys.argv[1:] if argv is None else argv)))
  network_report.plot(
      os.path.join(os.path.dirname(path), args.name + '.png'), args.setups,
      args.rates, measured,
      'host links shaped with tc htb; ' + network.delay_label)
  return path


if __name__ == '__main__':
  main()
