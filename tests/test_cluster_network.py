"""cluster_network.py's pieces that need no root: the tc commands, the byte
counters, the tasks' TF_CONFIG on their hosts, the tables and the plot.

The network itself (namespaces, shaped links, a run of the benchmark) is
tested as root by tests/system/test_network.py (`make test-system`).
"""

import json
import os
import signal
import sys
import time
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_network
import cluster_runs
import netns
import netns_task
import network_report
from tests.test_benchmarks import header
from tests.test_benchmarks import table_rows
# pylint: enable=g-import-not-at-top,wrong-import-position

GBIT = 10 ** 9


@pytest.mark.parametrize('rate_bits,burst', [
    (GBIT, '131072'),  # Two 64 KiB packets: more than 1 ms at 1 Gbit/s.
    (10 * GBIT, '1250000'),  # 1 ms at 10 Gbit/s.
])
def test_each_cable_end_gets_an_htb_class_at_the_rate(rate_bits, burst):
  assert netns.shaping_commands('ns-h0', 'eth0', rate_bits) == [
      ['tc', '-n', 'ns-h0', 'qdisc', 'add', 'dev', 'eth0', 'root', 'handle',
       '1:', 'htb', 'default', '1'],
      ['tc', '-n', 'ns-h0', 'class', 'add', 'dev', 'eth0', 'parent', '1:',
       'classid', '1:1', 'htb', 'rate', '%dbit' % rate_bits, 'ceil',
       '%dbit' % rate_bits, 'burst', burst, 'cburst', burst, 'quantum',
       '60000']]


def test_the_delay_is_a_netem_qdisc_under_the_htb_class():
  assert netns.netem_command('ns-h1', 'eth0', 0.1) == [
      'tc', '-n', 'ns-h1', 'qdisc', 'add', 'dev', 'eth0', 'parent', '1:1',
      'handle', '10:', 'netem', 'delay', '0.1ms']


def test_left_behind_are_the_namespaces_of_processes_that_are_gone():
  names = ['slimnet-10-1-sw', 'slimnet-10-1-h0', 'slimnet-20-3-h1',
           'slimnet-x-1-h0', 'slimtest-10-one-h0', 'other']
  assert netns.left_behind(names, running=lambda pid: pid == 20) == [
      'slimnet-10-1-sw', 'slimnet-10-1-h0']
  assert netns.left_behind(names, running=lambda pid: True) == []


def test_net_dev_counters_are_received_then_sent_bytes():
  text = (
      'Inter-|   Receive                            |  Transmit\n'
      ' face |bytes    packets errs drop fifo frame compressed multicast|'
      'bytes    packets errs drop fifo colls carrier compressed\n'
      '    lo:       0       0    0    0    0     0          0         0 '
      '       0       0    0    0    0     0       0          0\n'
      '    h0: 52480123   3977    0    0    0     0          0         0 '
      '104960 1790    0    0    0     0       0          0\n')
  assert netns.parse_net_dev(text) == {'lo': (0, 0), 'h0': (52480123, 104960)}


@pytest.mark.parametrize('rate_bits,label', [
    (GBIT, '1 Gbit/s'), (2500 * 10 ** 6, '2.5 Gbit/s'),
    (500 * 10 ** 6, '500 Mbit/s')])
def test_rate_labels(rate_bits, label):
  assert netns.rate_label(rate_bits) == label


@pytest.mark.parametrize('kwargs,message', [
    (dict(num_hosts=0, rate_bits=GBIT), 'num_hosts must be >= 1, got 0'),
    (dict(num_hosts=2, rate_bits=0), 'rate_bits must be > 0, got 0'),
    (dict(num_hosts=2, rate_bits=GBIT, delay_ms=-1),
     'delay_ms must be >= 0, got -1')])
def test_a_network_of_no_valid_shape_is_refused_before_anything_is_made(
    kwargs, message):
  with pytest.raises(ValueError, match=message):
    netns.Network(**kwargs)


def test_sigterm_in_removed_on_signals_runs_the_cleanup_and_exits_143():
  previous = signal.getsignal(signal.SIGTERM)
  cleaned = []
  with pytest.raises(SystemExit) as stopped:
    with netns.removed_on_signals():
      try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
      finally:
        cleaned.append('network removed')
  assert stopped.value.code == 143
  assert cleaned == ['network removed']
  assert signal.getsignal(signal.SIGTERM) is previous


def test_each_task_gets_its_hosts_address_and_runs_in_its_namespace():
  network = types.SimpleNamespace(hosts=['n-h0', 'n-h1', 'n-h2'],
                                  addresses=['10.99.0.1', '10.99.0.2',
                                             '10.99.0.3'])
  hosts = netns_task.hosts_value(network, num_ps=1)
  local = json.dumps({'cluster': {'ps': ['127.0.0.1:4001'],
                                  'worker': ['127.0.0.1:4002',
                                             '127.0.0.1:4003']},
                      'task': {'type': 'worker', 'index': 1}})
  tf_config, command = netns_task.task_command(
      local, hosts, ['train.py', '--steps=5'], python='/venv/bin/python')
  assert json.loads(tf_config) == {
      'cluster': {'ps': ['10.99.0.1:2222'],
                  'worker': ['10.99.0.2:2222', '10.99.0.3:2222']},
      'task': {'type': 'worker', 'index': 1}}
  assert command == ['ip', 'netns', 'exec', 'n-h2', '/venv/bin/python',
                     'train.py', '--steps=5']


def test_rates_are_read_in_gbit_and_sorted():
  args = cluster_network.parse_args(['--rates_gbit=10,0.5,1'])
  assert args.rates == [5 * 10 ** 8, GBIT, 10 * GBIT]
  assert [s[0] for s in args.setups] == list(cluster_network.SETUP_NAMES)
  for bad in ('1,x', '0,1', ''):
    with pytest.raises(SystemExit):
      cluster_network.parse_args(['--rates_gbit=%s' % bad])


def _window(examples_per_sec, out_mib, in_mib, sent_mib=None):
  return cluster_runs.Window(examples_per_sec, 1.0, sent_mib or out_mib,
                             out_mib, in_mib)


def _measured():
  """Made-up runs: alone at 640 examples/sec, and two rates."""
  return {
      ('alone', None): [_window(600.0, 0, 0), _window(680.0, 0, 0)],
      ('1 ps + 2 workers sync', GBIT): [_window(128.0, 25.0, 25.0, 50.0)] * 2,
      ('2 workers all-reduce', GBIT): [_window(320.0, 12.5, 12.5, 25.0),
                                       _window(340.0, 12.5, 12.5, 25.0)],
      ('1 ps + 2 workers sync', 10 * GBIT): [_window(400.0, 25.0, 25.0)],
      ('2 workers all-reduce', 10 * GBIT): [_window(480.0, 12.5, 12.5)],
  }


def _args(rates_gbit='1,10'):
  return cluster_network.parse_args([
      '--rates_gbit=%s' % rates_gbit, '--batch_size=32',
      '--setups=1 ps + 2 workers sync,2 workers all-reduce'])


def test_throughput_table_has_the_alone_row_then_a_row_per_rate_and_setup():
  args = _args()
  measured = _measured()
  rows = table_rows(network_report.throughput_table(
      args.setups, args.rates, measured), 'link')
  assert [row[:6] for row in rows] == [
      ['none', 'alone', '1', '640', '1.000', '1.00'],
      ['1 Gbit/s', '1 ps + 2 workers sync', '3', '128', '0.200', '1.00'],
      ['1 Gbit/s', '2 workers all-reduce', '2', '330', '0.516', '1.00'],
      ['10 Gbit/s', '1 ps + 2 workers sync', '3', '400', '0.625', '1.00'],
      ['10 Gbit/s', '2 workers all-reduce', '2', '480', '0.750', '1.00']]
  assert [row[6:] for row in rows[1:3]] == [
      ['50.0', '25.0 / 25.0', '128, 128'],
      ['25.0', '12.5 / 12.5', '320, 340']]


def test_a_step_splits_into_compute_at_alones_speed_and_communication():
  args = _args()
  sync, all_reduce = args.setups[1], args.setups[2]
  # 64 examples per global step; alone does 640/s, two workers 1280/s.
  sync_time = network_report.step_time(args, sync, GBIT, _measured())
  assert sync_time.step == pytest.approx(0.5)
  assert sync_time.compute == pytest.approx(0.05)
  assert sync_time.communication == pytest.approx(0.45)
  # 25 MiB each way at 1 Gbit/s: 0.2097 s at once, twice that in turns.
  assert sync_time.wire_at_once == pytest.approx(0.2097152)
  assert sync_time.wire_in_turns == pytest.approx(0.4194304)
  reduce_time = network_report.step_time(args, all_reduce, GBIT, _measured())
  assert reduce_time.step == pytest.approx(64 / 330)
  assert reduce_time.wire_at_once == pytest.approx(0.1048576)
  # 1 CPU ms per example, 64 examples per global step, over the processes.
  assert sync_time.cpu_per_process == pytest.approx(0.064 / 3)
  assert reduce_time.cpu_per_process == pytest.approx(0.064 / 2)


def test_the_target_ratio_is_judged_at_1_gbit():
  args = _args()
  lines = network_report.ratio_lines(args.setups, args.rates, _measured())
  assert table_rows(lines, 'link') == [['1 Gbit/s', '2.58x'],
                                       ['10 Gbit/s', '1.20x']]
  assert lines[-1] == ('Target: at 1 Gbit/s, all-reduce at least 1.5x the '
                       'synchronous ps setup: met (2.58x).')
  measured = _measured()
  measured[('2 workers all-reduce', GBIT)] = [_window(150.0, 12.5, 12.5)]
  assert network_report.ratio_lines(args.setups, args.rates, measured)[
      -1].endswith(': NOT met (1.17x).')


KERAS = '2 workers Keras MultiWorkerMirroredStrategy'


def _with_keras():
  """_measured() and Keras's MultiWorkerMirroredStrategy at 255 and 400
  examples/sec."""
  measured = _measured()
  measured[(KERAS, GBIT)] = [_window(250.0, 12.5, 12.5, 25.0),
                             _window(260.0, 12.5, 12.5, 25.0)]
  measured[(KERAS, 10 * GBIT)] = [_window(400.0, 12.5, 12.5, 25.0)]
  return measured


def test_the_keras_setup_gets_its_rows_and_a_ratio_of_its_own():
  args = cluster_network.parse_args([
      '--rates_gbit=1,10', '--setups=1 ps + 2 workers sync,'
      '2 workers all-reduce,%s' % KERAS])
  assert [s.name for s in args.setups] == [
      'alone', '1 ps + 2 workers sync', '2 workers all-reduce', KERAS]
  measured = _with_keras()
  rows = table_rows(network_report.throughput_table(
      args.setups, args.rates, measured), 'link')
  assert [row[:5] for row in rows if row[1] == KERAS] == [
      ['1 Gbit/s', KERAS, '2', '255', '0.398'],
      ['10 Gbit/s', KERAS, '2', '400', '0.625']]
  time_rows = table_rows(network_report.time_table(
      args, args.setups, args.rates, measured), 'link')
  assert time_rows[2][:3] == ['1 Gbit/s', KERAS, '%.3f' % (64 / 255)]
  lines = network_report.ratio_lines(args.setups, args.rates, measured)
  assert header(lines, 'link') == [
      'link', 'all-reduce / sync ps (examples/sec)',
      'project all-reduce / Keras MWMS (examples/sec)']
  # 330 / 255 and 480 / 400.
  assert table_rows(lines, 'link') == [['1 Gbit/s', '2.58x', '1.29x'],
                                       ['10 Gbit/s', '1.20x', '1.20x']]
  assert lines[-2:] == [
      'Target: at 1 Gbit/s, all-reduce at least 1.5x the synchronous ps '
      'setup: met (2.58x).',
      'Target: at 1 Gbit/s, the project\'s all-reduce at least 1.3x '
      'Keras\'s MultiWorkerMirroredStrategy: NOT met (1.29x).']
  measured[(KERAS, GBIT)] = [_window(220.0, 12.5, 12.5)]
  assert network_report.ratio_lines(args.setups, args.rates, measured)[
      -1].endswith(': met (1.50x).')


def test_a_ratio_appears_only_when_both_its_setups_ran():
  args = cluster_network.parse_args([
      '--rates_gbit=1', '--setups=2 workers all-reduce,%s' % KERAS])
  lines = network_report.ratio_lines(args.setups, args.rates, _with_keras())
  assert table_rows(lines, 'link') == [['1 Gbit/s', '1.29x']]
  assert len([line for line in lines if line.startswith('Target')]) == 1
  args = cluster_network.parse_args(['--rates_gbit=1',
                                     '--setups=2 workers all-reduce'])
  assert network_report.ratio_lines(args.setups, args.rates,
                                    _with_keras()) == []


def test_fp16_compression_is_judged_against_the_float32_all_reduce():
  fp16 = '2 workers all-reduce fp16'
  args = cluster_network.parse_args([
      '--rates_gbit=1', '--setups=2 workers all-reduce,%s' % fp16])
  assert args.setups[-1].extra == ['--gradient_compression=fp16']
  measured = {('2 workers all-reduce', GBIT): [_window(330.0, 12.5, 12.5)],
              (fp16, GBIT): [_window(600.0, 6.3, 6.3)]}
  assert network_report.ratio_lines(args.setups, args.rates, measured) == [
      '| link | all-reduce fp16 / float32 (examples/sec) |', '|---|---:|',
      '| 1 Gbit/s | 1.82x |', '',
      'Target: at 1 Gbit/s, the all-reduce with --gradient_compression=fp16 '
      'at least 1.8x the float32 one: met (1.82x).']


def test_the_all_reduce_step_is_judged_against_its_link_time():
  args = _args()
  # 64 examples at 330/s: 0.194 s against 12.5 MiB at 1 Gbit/s, 0.105 s.
  assert network_report.wire_target_line(
      args, args.setups, args.rates, _measured()) == [
          'Target: at 1 Gbit/s, the all-reduce\'s global step at most 1.2x '
          'the time its busiest link\'s bytes take both ways at once: NOT '
          'met (0.194 s against 0.105 s, 1.85x).']
  measured = _measured()
  measured[('2 workers all-reduce', GBIT)] = [_window(520.0, 12.5, 12.5)]
  assert network_report.wire_target_line(
      args, args.setups, args.rates, measured)[0].endswith(
          ': met (0.123 s against 0.105 s, 1.17x).')
  # 64 examples at 480/s against 12.5 MiB at 10 Gbit/s: not judged there.
  assert network_report.wire_target_line(
      args, args.setups, [10 * GBIT], measured) == [
          'At 10 Gbit/s, the all-reduce\'s global step took 12.72x the time '
          'its busiest link\'s bytes take both ways at once (0.133 s against '
          '0.010 s); the target (1.2x) is judged at 1 Gbit/s.']
  assert network_report.wire_target_line(
      args, args.setups[:2], args.rates, measured) == []


def test_the_old_single_buffer_runs_as_a_setup_of_its_own():
  args = cluster_network.parse_args([
      '--setups=2 workers all-reduce in one 32 MiB buffer'])
  assert args.setups[-1].extra == ['--all_reduce_buffer_bytes=33554432']
  assert args.setups[-1].num_workers == 2


def test_the_result_file_takes_its_name_from_the_flag():
  assert cluster_network.parse_args([]).name == 'cluster_network'
  assert cluster_network.parse_args(
      ['--name=cluster_network_1gbit']).name == 'cluster_network_1gbit'


def test_where_the_time_goes_names_each_setups_parts():
  args = _args()
  lines = network_report.where_the_time_goes(args, args.setups, args.rates,
                                             _measured())
  assert lines[0] == 'At 1 Gbit/s, per global step:'
  assert lines[2] == (
      '- 1 ps + 2 workers sync: 0.500 s: 0.050 s of compute at the speed of '
      'the process alone and 0.450 s of communication; the busiest link '
      'carried 25.0 MiB out and 25.0 MiB in, 0.210 s at the rate both ways '
      'at once, 0.419 s one way after the other; each of its 3 processes '
      'used 0.021 s of CPU (4% of the step).')


def test_link_table_gives_the_share_of_the_shaped_rate():
  lines = network_report.link_table({GBIT: (0.957e9, 0.95e9)})
  assert table_rows(lines, 'link') == [
      ['1 Gbit/s', '0.957', '0.957', '0.950', '0.950']]


def test_plot_writes_a_png_of_the_setups_against_the_rate(tmp_path):
  args = _args()
  path = network_report.plot(str(tmp_path / 'plot.png'), args.setups,
                             args.rates, _measured(), 'no added delay')
  with open(path, 'rb') as png:
    assert png.read(8) == b'\x89PNG\r\n\x1a\n'
  from matplotlib import image  # pylint: disable=g-import-not-at-top
  assert image.imread(path).shape[:2] == (550, 700)
