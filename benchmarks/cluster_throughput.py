"""Measures what training through a parameter server costs on one machine.

Nine setups train LeNet on the embedded digits dataset with
train_image_classifier.py, or the last with tf-keras (batch --batch_size per
clone, SGD):

  * alone: one process, no cluster: a local session, no gRPC.
  * 1 ps + 1 worker: the worker reads every variable from the ps and sends
    every gradient back over gRPC on 127.0.0.1 at each step (LeNet's fc3
    weights alone are 12.25 MiB).
  * 1 ps + 2 workers: two workers update the same variables asynchronously.
  * 1 ps + 2 workers sync: SyncReplicasOptimizer, one global step per two
    worker batches.
  * 2 workers all-reduce: no ps; each worker holds the variables and the
    two average their gradients with collective ops every step.
  * 2 workers averaging every 10 steps: each worker trains on its own and
    the two average their weights every 10th step (--replica_averaging_steps).
  * 1 ps + 1 worker x 2 clones: the worker reads each variable from the ps
    once per step and its two clones share it (--cache_variable_reads, the
    default); "(reads not cached)" is the upstream way, a read per use.
  * 2 workers Keras MultiWorkerMirroredStrategy: the same training written
    with tf-keras (keras_mwms_train.py), whose strategy all-reduces the
    gradients with its default communication options.

Bytes per global step are those sent on the loopback interface during the
timed window (/proc/net/dev), so other traffic on 127.0.0.1 counts too.

The clusters are started with clusters.launch.LocalCluster. Every process
gets TF_NUM_INTRAOP_THREADS and TF_NUM_INTEROP_THREADS (1 by default) and
one reader and one preprocessing thread, so that the setups differ in what
goes through the ps and not in how many threads each process grabs; with 3
single-threaded processes on a 2-core machine the last setup is also short
of cores, which the CPU column shows.

Measurement: the step lines that the workers log every --log_every steps
carry the global step; the benchmark timestamps them as they arrive and
reads the CPU time of all the setup's processes from /proc at the same
moment. After the global step passes --warmup_steps, examples/sec is
(global steps done x batch) / wall time, and CPU ms/example is the CPU time
of all processes (ps included) per example, which depends much less on
other load on the machine than examples/sec. The setups take turns for
--rounds rounds and the table gives the median of each column; the ratio
to the process alone is that of the medians.

The table is printed and written, after the machine it was measured on, to
benchmarks/results/cluster_throughput.md (--results_dir to write
elsewhere).

Usage (from the repository root):

  .venv/bin/python benchmarks/cluster_throughput.py
  .venv/bin/python benchmarks/cluster_throughput.py --rounds 1 --steps 200
"""

import functools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_runs  # next to this script
from other_load import OtherLoad, disturbance_note  # next to this script
import results  # next to this script
# pylint: enable=g-import-not-at-top,wrong-import-position

KERAS_MWMS = '2 workers Keras MultiWorkerMirroredStrategy'
ALL_REDUCE_FP16 = '2 workers all-reduce fp16'
ALL_REDUCE_ONE_BUFFER = '2 workers all-reduce in one 32 MiB buffer'
# cluster_runs.Setup: (name, ps tasks, workers, extra flags, worker batches
# per global step[, the program, train_image_classifier.py unless given])
SETUPS = tuple(cluster_runs.Setup(*setup) for setup in (
    ('alone', 0, 1, [], 1),
    ('1 ps + 1 worker', 1, 1, [], 1),
    ('1 ps + 2 workers', 1, 2, [], 1),
    ('1 ps + 2 workers sync', 1, 2,
     ['--sync_replicas', '--replicas_to_aggregate=2'], 2),
    ('2 workers all-reduce', 0, 2, [], 2),
    (ALL_REDUCE_FP16, 0, 2, ['--gradient_compression=fp16'], 2),
    # The buffer size before buffers were cut at 4 MiB (see
    # all_reduce_buffers.py).
    (ALL_REDUCE_ONE_BUFFER, 0, 2, ['--all_reduce_buffer_bytes=%d' % 2 ** 25],
     2),
    ('2 workers averaging every 10 steps', 0, 2,
     ['--replica_averaging_steps=10'], 2),
    ('1 ps + 1 worker x 2 clones', 1, 1, ['--num_clones=2'], 2),
    ('1 ps + 1 worker x 2 clones (reads not cached)', 1, 1,
     ['--num_clones=2', '--nocache_variable_reads'], 2),
    (KERAS_MWMS, 0, 2, [], 2, cluster_runs.KERAS_MWMS),
))


def parse_args(argv=None):
  parser = cluster_runs.run_parser(__doc__, SETUPS, default_steps=400,
                                   default_warmup_steps=60)
  return cluster_runs.parse_run_args(parser, argv, SETUPS)


def measure(args, dataset_dir):
  setups = args.setups
  measured = {setup[0]: [] for setup in setups}
  for round_index in range(args.rounds):
    first = round_index % len(setups)  # Rotates, so no setup always leads.
    for setup in setups[first:] + setups[:first]:
      if setup.num_ps + setup.num_workers == 1:
        run = functools.partial(cluster_runs.run_alone, args, dataset_dir)
      else:
        run = functools.partial(
            cluster_runs.run_cluster, args, dataset_dir, num_ps=setup.num_ps,
            num_workers=setup.num_workers, extra=setup.extra,
            program=setup.program)
      result = cluster_runs.timed_run(setup.name, args, setup.batches, run)
      measured[setup.name].append(result)
      print('round %d, %s: %.0f examples/sec, %.2f CPU ms/example, %.1f '
            'MiB/step' % ((round_index + 1, setup.name) + result[:3]),
            flush=True)
  return measured


def table(args, measured):
  """Markdown lines; `measured` is {setup name: [(examples/sec, CPU
  ms/example, MiB/step) per round]}, ratios are to the first setup
  (alone)."""
  alone = statistics.median(r[0] for r in measured[SETUPS[0][0]])
  lines = [
      '| setup | processes | examples/sec | per worker | ratio to alone | '
      'CPU ms/example (all processes) | MiB sent per global step | '
      'examples/sec per round |',
      '|---|---:|---:|---:|---:|---:|---:|---|',
  ]
  for setup in args.setups:
    rate, cpu, sent = (statistics.median(r[i] for r in measured[setup.name])
                       for i in range(3))
    lines.append('| %s | %d | %.0f | %.0f | %.3f | %.2f | %.1f | %s |' % (
        setup.name, setup.num_ps + setup.num_workers, rate,
        rate / setup.num_workers, rate / alone, cpu, sent,
        ', '.join('%.0f' % r[0] for r in measured[setup.name])))
  lines += [
      '',
      'LeNet on digits, batch %d per clone (one clone per worker unless '
      'named), SGD; %d global '
      'steps per run, timed after step %d; median of %d round(s). Every '
      'process: TF_NUM_INTRAOP_THREADS=%d, TF_NUM_INTEROP_THREADS=%d, 1 '
      'reader, 1 preprocessing thread.' % (
          args.batch_size, args.steps, args.warmup_steps, args.rounds,
          args.intra_op_threads, args.inter_op_threads),
  ]
  return lines


def main(argv=None):
  """Measures, prints the table and writes the result file; returns its
  path."""
  args = parse_args(argv)
  with cluster_runs.digits_dataset(args.dataset_dir) as dataset_dir:
    with OtherLoad() as load:
      measured = measure(args, dataset_dir)
  return results.publish(
      'cluster_throughput', 'What going through a ps costs',
      table(args, measured) + ['', disturbance_note(load)], argv=argv,
      directory=args.results_dir)


if __name__ == '__main__':
  main()
