"""benchmarks/cluster_step_trace.py without root: its flags, how it cuts a
traced step into phases, the floors it derives, its tables, and both
workers of a traced all-reduce step on 127.0.0.1."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_step_trace as trace
from cluster_step_trace import Op
from clusters import machine
from tests.test_benchmarks import table_rows
# pylint: enable=g-import-not-at-top,wrong-import-position


def test_defaults_trace_both_wires_at_1_gbit_and_250_mbit():
  args = trace.parse_args([])
  assert args.rates == [1.0, 0.25]
  assert args.dtypes == ['float32', 'float16']
  assert (args.batch_size, args.steps, args.traced_steps) == (32, 40, 5)


@pytest.mark.parametrize('argv,named', [
    (['--rates_gbit=1,fast'], '--rates_gbit'),
    (['--rates_gbit=0'], '--rates_gbit'),
    (['--wire_dtypes=float32,int8'], 'int8'),
    (['--steps=10'], '--steps'),
    (['--traced_steps=0'], '--traced_steps'),
])
def test_bad_flags_are_refused_by_name(argv, named, capsys):
  with pytest.raises(SystemExit):
    trace.parse_args(argv)
  assert named in capsys.readouterr().err


def test_union_counts_overlapping_time_once():
  assert trace._union_seconds([(30, 40), (0, 10), (5, 20)]) == 30e-6
  assert trace._union_seconds([(0, 100), (10, 20)]) == 100e-6


# A step: forward 0-300 us, the collective launched at 300, backward
# 310-500 while bytes arrive 350-700 and 800-880, the update 880-950.
STEP = [Op('compute', 0, 100), Op('compute', 100, 300),
        Op('collective', 300, 900), Op('compute', 310, 500),
        Op('transfer', 350, 600), Op('transfer', 400, 700),
        Op('transfer', 800, 880), Op('compute', 880, 950)]


def test_phases_of_a_step():
  phases = trace.phases(STEP)
  expected = dict(step=950, before=300, waiting=50, receiving=530, busy=430,
                  after=70, overlapped=150)
  assert phases == pytest.approx({k: v / 1e6 for k, v in expected.items()})
  assert set(phases) == set(trace.PHASES)


def test_step_stats_nodes_are_sorted_by_kind():
  # pylint: disable=g-import-not-at-top
  from tensorflow.core.framework import step_stats_pb2
  from tf2_compat.slim_compat import tf
  with tf.Graph().as_default() as graph:
    x = tf.constant([1.0], name='x')
    tf.add(x, x, name='doubled')
    tf.raw_ops.CollectiveReduceV2(
        input=x, group_size=2, group_key=1, instance_key=1,
        ordering_token=[], merge_op='Add', final_op='Id',
        name='CollectiveReduceV2_3')
  stats = step_stats_pb2.StepStats()
  device = stats.dev_stats.add(device='/job:worker/task:0/device:CPU:0')
  for name, start, length in [('_SOURCE', 5, 1), ('x', 10, 2),
                              ('doubled', 12, 3),
                              ('CollectiveReduceV2_3', 15, 40),
                              ('RecvBuf', 20, 30)]:
    device.node_stats.add(node_name=name, all_start_micros=start,
                          all_end_rel_micros=length)
  assert trace.ops_of(stats, graph) == [
      Op('compute', 10, 12), Op('compute', 12, 15),
      Op('collective', 15, 55), Op('transfer', 20, 50)]


def _worker(seconds, cpu, mib, before, after, waiting=0.1):
  phases = dict.fromkeys(trace.PHASES, 0.1)
  phases.update(before=before, after=after, waiting=waiting)
  return dict(seconds=seconds, cpu_seconds=cpu, mib=mib,
              phases=[phases, phases])


WORKERS = [_worker([0.25, 0.26, 0.27], 0.20, [12.5, 12.5], 0.05, 0.01,
                   waiting=0.004),
           _worker([0.26, 0.28], 0.22, [12.5, 12.6], 0.07, 0.01)]


def test_summary_takes_the_busiest_link_and_sets_both_floors():
  row = trace.summary(WORKERS, 1.0, cores=2)
  link = 12.6 * 2 ** 20 * 8 / 1e9
  assert row['mib'] == [12.5, 12.6]
  assert row['link'] == pytest.approx(link)
  assert row['untraced'] == 0.26
  assert row['cpu'] == pytest.approx(0.21)
  assert row['before'] == pytest.approx(0.06)
  assert row['waiting'] == pytest.approx(0.052)
  assert row['waiting_each'] == [0.004, 0.1]
  assert row['link_floor'] == pytest.approx(0.06 + link + 0.01)
  assert row['cpu_floor'] == pytest.approx(0.21)
  assert trace.floor(row) == pytest.approx(0.21)


def test_tables_show_the_phases_the_floors_and_the_compression_ratio():
  full = trace.summary(WORKERS, 1.0, cores=2)
  half = dict(full, untraced=0.2, link=full['link'] / 2,
              link_floor=0.14, cpu_floor=0.15)
  rows = {(1.0, 'float32'): full, (1.0, 'float16'): half}
  cells = table_rows(trace.table(rows), 'link')
  assert cells[0][:6] == ['1 Gbit/s', 'float32', '0.260', '0.100', '0.060',
                          '0.052 (0.004 / 0.100)']
  assert cells[0][9:] == ['12.5 / 12.6', '0.106', '0.95x', '0.210']
  assert cells[1][1] == 'float16'
  floors = trace.floor_lines(rows, cores=2)
  assert floors[0].startswith('- 1 Gbit/s, float32 on the wire: a step of '
                              '0.260 s, 2.46x the 0.106 s')
  assert floors[0].endswith(
      'With any transport at the rate, the 0.060 s before the all-reduce '
      'and the 0.010 s after it leave at least 0.176 s (1.66x). With '
      'TensorFlow\'s, the two processes\' CPU per step over 2 cores, its own '
      'included (0.210 s), bounds it too: at least 0.210 s (1.99x).')
  assert trace.compression_lines(rows) == [
      '- 1 Gbit/s: float16 steps are 1.30x as fast as float32 ones. With '
      'both at their floors they would be 1.25x as fast with any transport '
      'at the rate (0.140 s against 0.176 s), 1.40x with TensorFlow\'s '
      '(0.150 s against 0.210 s).']


def test_a_step_without_transfers_is_refused_by_name():
  with pytest.raises(ValueError, match=r'needs collectives and RecvBufs .*'
                     r'this one has only collective, compute ops$'):
    trace.phases([op for op in STEP if op.kind != 'transfer'])


@pytest.mark.xdist_group('loopback')
def test_two_workers_trace_an_all_reduce_step_on_127_0_0_1():
  addresses = ['127.0.0.1:%d' % port for port in machine.free_ports(2)]
  env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL='2')
  script = os.path.join(REPO, 'benchmarks', 'cluster_step_trace.py')
  processes = [subprocess.Popen(
      [sys.executable, script, '--member',
       json.dumps([addresses, i, 8, 'float32', 12, 1, 2, 'lo'])],
      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(2)]
  workers = []
  try:
    for process in processes:
      out, err = process.communicate(timeout=300)
      assert process.returncode == 0, err[-2000:]
      workers.append(json.loads(out.strip().splitlines()[-1]))
  finally:
    for process in processes:
      process.kill()
  lenet_mib = 3274634 * 4 / 2 ** 20
  for worker in workers:
    assert len(worker['seconds']) == 2
    assert worker['cpu_seconds'] > 0
    # lo counts what both workers send. A worker's own 12.5 MiB per step
    # fall inside its timed window; some of its peer's may fall outside
    # (a peer ahead by a step sends before this worker starts counting).
    assert lenet_mib <= worker['mib'][0] <= 2.5 * lenet_mib
    (phases,) = worker['phases']
    assert 0 < phases['before'] < phases['step']
    assert 0 < phases['busy'] <= phases['receiving'] < phases['step']
    assert phases['before'] + phases['receiving'] <= phases['step']
