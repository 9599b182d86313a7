"""The benchmarks' table and result-file code, with tiny settings.

Each benchmark writes benchmarks/results/<name>.md; here they write into a
temporary folder. The fast tests feed the table functions made-up
measurements; the slow ones run a benchmark end to end for a few steps.
"""

import os
import re
import shlex
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import cluster_runs
import cluster_throughput
import make_run
import results
import test_tiers
import training_loop
# pylint: enable=g-import-not-at-top,wrong-import-position

# It uses 127.0.0.1 (servers, clusters, or a count of its bytes): under
# `make test`'s `pytest -n 2`, its tests run on one worker with the other
# such modules', never beside them.
pytestmark = pytest.mark.xdist_group('loopback')



def table_rows(lines, header_start):
  """Cells of the rows of the Markdown table whose header starts so."""
  lines = list(lines)
  start = next(i for i, line in enumerate(lines)
               if line.startswith('| ' + header_start))
  rows = []
  for line in lines[start + 2:]:
    if not line.startswith('|'):
      break
    rows.append([cell.strip() for cell in line.strip('|').split('|')])
  return rows


def header(lines, header_start):
  line = next(line for line in lines if line.startswith('| ' + header_start))
  return [cell.strip() for cell in line.strip('|').split('|')]


def assert_result_file(path, directory, name, title):
  """The file is <directory>/<name>.md and opens with its machine."""
  assert path == os.path.join(str(directory), name + '.md')
  with open(path) as f:
    lines = f.read().splitlines()
  assert lines[0] == '# ' + title
  assert lines[2].startswith('Command: `.venv/bin/python benchmarks/%s.py '
                             % name)
  assert lines[4] == '## Machine'
  assert lines[6].startswith('- date (UTC): ')
  assert re.match(r'- CPU: .*, \d+ cores usable', lines[7])
  assert re.match(r'- CPU vector extensions: .*; TF_ENABLE_ONEDNN_OPTS=\S+$',
                  lines[8])
  assert lines[9].startswith('- TensorFlow 2.')
  return lines


# --- results.py ------------------------------------------------------------


def test_write_result_writes_into_the_given_directory(tmp_path):
  path = results.write_result('demo', 'Demo', ['| a |', '|---|', '| 1 |'],
                              command='.venv/bin/python benchmarks/demo.py '
                              '--x 1', directory=str(tmp_path / 'out'))
  lines = assert_result_file(path, tmp_path / 'out', 'demo', 'Demo')
  assert lines[-3:] == ['| a |', '|---|', '| 1 |']


def test_write_result_quotes_the_benchmark_and_its_arguments(tmp_path):
  path = results.write_result('demo', 'Demo', ['x'], argv=['--steps', '5'],
                              directory=str(tmp_path))
  lines = assert_result_file(path, tmp_path, 'demo', 'Demo')
  assert lines[2] == 'Command: `.venv/bin/python benchmarks/demo.py --steps 5`'


# --- make_run.py -------------------------------------------------------------


def makefile_run_commands():
  """The `run` target's commands, continuation lines joined, as argv lists,
  and the Makefile's variables."""
  with open(os.path.join(REPO, 'Makefile')) as f:
    text = f.read()
  variables = dict(re.findall(r'^(\w+) :?= (.*)$', text, re.M))
  recipe = re.search(r'^run:.*\n((?:\t.*\n)+)', text, re.M).group(1)
  joined = re.sub(r'\\\n\s*', ' ', recipe)
  return [shlex.split(line) for line in joined.splitlines()], variables


def test_make_run_commands_are_the_makefiles():
  commands, variables = makefile_run_commands()
  stages = make_run.stage_commands('$(PY)', '$(DIGITS_DIR)', '$(RUN_DIR)')
  assert [argv for argv in commands if argv[0] == '$(PY)'] == [
      argv for _, argv in stages]
  # The only other command empties RUN_DIR, as each round's fresh folder.
  assert [argv for argv in commands if argv[0] != '$(PY)'] == [
      ['rm', '-rf', '$(RUN_DIR)']]
  assert variables['DIGITS_DIR'] == make_run.DIGITS_DIR
  assert variables['RUN_DIR'] == make_run.RUN_DIR


def test_make_run_steps_replace_only_max_number_of_steps():
  default = make_run.stage_commands('py', 'd', 'r')
  short = make_run.stage_commands('py', 'd', 'r', steps=5)
  assert [name for name, _ in short] == ['convert', 'train', 'eval']
  changed = [(a, b) for (_, x), (_, y) in zip(default, short)
             for a, b in zip(x, y) if a != b]
  assert changed == [('--max_number_of_steps=800', '--max_number_of_steps=5')]


def test_make_run_parses_the_eval_accuracy_line():
  output = ('eval/Accuracy[0.9861]\neval/Recall_5[1.0000]\n'
            'digits test: accuracy 98.61% on 360 examples '
            '(checkpoint step 800)\n')
  assert make_run.parse_eval_output(output) == (98.61, 360, 800)
  with pytest.raises(ValueError, match='no accuracy line'):
    make_run.parse_eval_output('Traceback ...')


def test_make_run_table_has_a_row_per_stage_and_the_total():
  rounds = [({'convert': (8.0, 5.0), 'train': (50.0, 90.0),
              'eval': (6.0, 5.4)}, (98.61, 360, 800)),
            ({'convert': (10.0, 5.2), 'train': (46.0, 88.0),
              'eval': (7.0, 5.0)}, (98.33, 360, 800))]
  lines = make_run.table(rounds)
  assert header(lines, 'stage') == ['stage', 'wall s (median)',
                                    'CPU s (median)', 'wall s per round']
  assert table_rows(lines, 'stage') == [
      ['convert', '9.0', '5.1', '8.0, 10.0'],
      ['train', '48.0', '89.0', '50.0, 46.0'],
      ['eval', '6.5', '5.2', '6.0, 7.0'],
      ['total', '63.5', '99.3', '64.0, 63.0']]
  assert lines[-1] == ('test accuracy: 98.47% on 360 examples, checkpoint '
                       'step 800 (per round: 98.61%, 98.33%)')


@pytest.mark.slow
def test_make_run_writes_its_result_file(tmp_path):
  path = make_run.main(['--steps=5', '--results_dir=%s' % tmp_path])
  lines = assert_result_file(path, tmp_path, 'make_run',
                             'make run, stage by stage')
  rows = table_rows(lines, 'stage')
  assert [row[0] for row in rows] == ['convert', 'train', 'eval', 'total']
  assert all(float(row[1]) > 0 for row in rows)
  assert re.search(r'^test accuracy: [\d.]+% on 360 examples, checkpoint '
                   r'step 5 ', '\n'.join(lines), re.M)
  assert any('make run trains 800: this is not its job' in line
             for line in lines)
  assert any(line.startswith('- other processes') for line in lines)


# --- cluster_throughput.py ---------------------------------------------------


def test_cluster_throughput_table_is_relative_to_the_process_alone():
  args = cluster_throughput.parse_args([
      '--setups=1 ps + 1 worker,1 ps + 2 workers,1 ps + 2 workers sync,'
      '2 workers all-reduce'])
  measured = {'alone': [(900.0, 1.0, 0.0), (1000.0, 1.2, 0.0)],
              '1 ps + 1 worker': [(400.0, 2.8, 24.5), (380.0, 2.6, 24.7)],
              '1 ps + 2 workers': [(500.0, 2.5, 24.5), (520.0, 2.7, 24.5)],
              '1 ps + 2 workers sync': [(300.0, 3.0, 49.0),
                                        (320.0, 3.2, 49.2)],
              '2 workers all-reduce': [(600.0, 2.0, 24.6),
                                       (640.0, 2.2, 24.4)]}
  lines = cluster_throughput.table(args, measured)
  assert header(lines, 'setup')[4] == 'ratio to alone'
  assert header(lines, 'setup')[6] == 'MiB sent per global step'
  assert table_rows(lines, 'setup') == [
      ['alone', '1', '950', '950', '1.000', '1.10', '0.0', '900, 1000'],
      ['1 ps + 1 worker', '2', '390', '390', '0.411', '2.70', '24.6',
       '400, 380'],
      ['1 ps + 2 workers', '3', '510', '255', '0.537', '2.60', '24.5',
       '500, 520'],
      ['1 ps + 2 workers sync', '3', '310', '155', '0.326', '3.10', '49.1',
       '300, 320'],
      ['2 workers all-reduce', '2', '620', '310', '0.653', '2.10', '24.5',
       '600, 640']]


def test_cluster_runs_window_counts_bytes_per_global_step():
  # (time, global step, CPU s, [(sent, received)] of the loopback interface
  # so far): 10 steps of 2 x 32.
  mib = 2 ** 20
  samples = [(0.0, 5, 1.0, [(0, 0)]), (1.0, 10, 2.0, [(10 * mib, 10 * mib)]),
             (2.0, 20, 3.0, [(30 * mib, 30 * mib)])]
  assert cluster_runs.window(samples, 10, 64) == (
      640.0, 1000.0 / 640, 2.0, 2.0, 2.0)


def test_cluster_runs_window_names_the_busiest_link():
  # Three hosts, a ps and two workers: the ps sends 4 MiB and receives
  # 6 MiB per step, each worker the reverse of its half.
  mib = 2 ** 20
  start = [(1 * mib, 1 * mib), (0, 0), (5, 7)]
  end = [(41 * mib, 61 * mib), (30 * mib, 20 * mib),
         (5 + 30 * mib, 7 + 20 * mib)]
  window = cluster_runs.window(
      [(0.0, 10, 0.0, start), (4.0, 20, 8.0, end)], 10, 32)
  assert window.examples_per_sec == 80.0
  assert window.cpu_ms_per_example == 25.0
  assert window.mib_sent_per_step == 10.0
  assert (window.busiest_out_mib_per_step,
          window.busiest_in_mib_per_step) == (4.0, 6.0)


def test_cluster_runs_window_needs_two_step_lines_after_the_warmup():
  samples = [(0.0, 5, 1.0, [(0, 0)]), (1.0, 10, 2.0, [(0, 0)])]
  assert cluster_runs.window(samples, 10, 64) is None


@pytest.mark.slow
def test_cluster_throughput_writes_its_result_file(tmp_path, digits_dir):
  # Alone, and the two clusters furthest apart: through a ps, all-reduce.
  # 12 steps, logged every 4: the window needs 2 step lines from step 4
  # on. A batch of 8 computes less; each step still moves all the weights.
  path = cluster_throughput.main([
      '--rounds=1', '--steps=12', '--warmup_steps=4', '--log_every=4',
      '--batch_size=8', '--setups=1 ps + 1 worker,2 workers all-reduce',
      '--dataset_dir=%s' % digits_dir, '--results_dir=%s' % tmp_path])
  lines = assert_result_file(path, tmp_path, 'cluster_throughput',
                             'What going through a ps costs')
  rows = table_rows(lines, 'setup')
  assert [row[0] for row in rows] == ['alone', '1 ps + 1 worker',
                                      '2 workers all-reduce']
  assert [row[1] for row in rows] == ['1', '2', '2']
  assert rows[0][4] == '1.000'
  assert all(float(row[2]) > 0 for row in rows)
  # Loopback traffic: LeNet's 12.5 MiB of weights and gradients each step,
  # through a ps or between the workers; none of the process alone. The
  # benchmark counts all of 127.0.0.1: under `pytest -n 2` it counted
  # 2.1 MiB per step of other traffic for the process alone (twice, the
  # source not found), so the bound is relative.
  sent = [float(row[6]) for row in rows]
  assert sent[1] > 20 and sent[2] > 20
  assert sent[0] < 0.25 * min(sent[1:])


def test_cluster_throughput_setups_are_checked():
  assert [setup[0] for setup in cluster_throughput.parse_args([]).setups] == [
      setup[0] for setup in cluster_throughput.SETUPS]
  with pytest.raises(SystemExit):
    cluster_throughput.parse_args(['--setups=alone,3 workers'])


# --- training_loop.py --------------------------------------------------------


def test_training_loop_trains_with_make_runs_flags():
  args = training_loop.parse_args([])
  flags = training_loop.train_flags(args, 'DIGITS', 'TRAIN')
  make_run_train = dict(make_run.stage_commands('py', 'DIGITS', 'TRAIN'))
  assert flags == make_run_train['train'][2:]
  assert training_loop.global_batch(flags) == 64


def test_training_loop_with_flag_replaces_or_appends():
  flags = ['--a=1', '--b=2']
  assert training_loop.with_flag(flags, 'a', 5) == ['--a=5', '--b=2']
  assert training_loop.with_flag(flags, 'a', 1) == flags
  assert training_loop.with_flag(flags, 'c', 3) == ['--a=1', '--b=2', '--c=3']


def test_training_loop_times_steps_from_the_step_lines():
  run = training_loop.Run(
      lines=['INFO:tensorflow:global step 99: loss = 1.0 (0.080 sec/step)\n',
             'INFO:tensorflow:global step 199: loss = 0.5 (0.100 sec/step)\n',
             'INFO:tensorflow:global step 299: loss = 0.4 (0.090 sec/step)\n'],
      samples=[(10.0, 99, 5.0), (18.0, 199, 20.0), (27.0, 299, 36.0)],
      wall=40.0, cpu=70.0)
  assert run.seconds_per_step(100) == pytest.approx(0.09)
  assert run.seconds_per_step(0) == pytest.approx(0.085)
  assert run.seconds_per_step(250) is None
  assert run.cpu_seconds_per_step(100) == pytest.approx(0.16)
  assert run.cpu_seconds_per_step(0) == pytest.approx(0.155)
  assert run.self_reported_rate(64) == pytest.approx(64 / 0.09)
  project = training_loop.Run(
      ['step 100: loss = 1.0, learning rate = 0.001, 700.0 examples/sec\n',
       'step 200: loss = 0.5, learning rate = 0.001, 760.0 examples/sec\n'],
      [], 1.0, 1.0)
  assert project.self_reported_rate(64) == pytest.approx(730.0)


def test_training_loop_table_is_relative_to_upstream_style():
  args = training_loop.parse_args(['--steps=300', '--warmup_steps=100'])
  upstream, project = (name for name, _ in training_loop.LOOPS)

  def run(seconds_per_step, cpu_per_step, wall):
    return training_loop.Run(
        [], [(0.0, 100, 3.0), (200 * seconds_per_step, 300,
                               3.0 + 200 * cpu_per_step)], wall, cpu=70.0)

  runs = {upstream: [run(0.08, 0.15, 40.0), run(0.1, 0.17, 42.0)],
          project: [run(0.1, 0.18, 45.0), run(0.08, 0.2, 47.0)]}
  lines = training_loop.loops_table(args, runs, 64)
  assert header(lines, 'loop')[:6] == [
      'loop', 's/step (median)', 'examples/sec',
      'ratio of s/step to upstream-style', 'CPU ms/step (median)',
      'ratio of CPU/step']
  rows = table_rows(lines, 'loop')
  assert [row[0] for row in rows] == [upstream, project]
  assert rows[0][1:6] == ['0.0900', '711', '1.000', '160.0', '1.000']
  assert rows[1][1:6] == ['0.0900', '711', '1.000', '190.0', '1.188']
  assert rows[0][6] == '-'  # No self-reported rate in these runs.
  assert rows[1][7:9] == ['46.0', '19.0']  # 46 s - 300 steps x 0.09 s.
  assert rows[1][9] == '13.0'  # 70 CPU s - 300 steps x 0.19 CPU s.
  assert rows[1][10] == '0.1000, 0.0800'


def test_training_loop_refuses_a_run_without_timed_window():
  with pytest.raises(SystemExit):
    training_loop.parse_args(['--steps=150', '--warmup_steps=100'])


@pytest.mark.slow
def test_training_loop_writes_its_result_file(tmp_path, digits_dir):
  path = training_loop.main([
      '--rounds=1', '--steps=12', '--log_every=4', '--warmup_steps=4',
      '--profile_rounds=1', '--profile_steps_per_round=2',
      '--profile_warmup_steps=1', '--dataset_dir=%s' % digits_dir,
      '--results_dir=%s' % tmp_path])
  lines = assert_result_file(
      path, tmp_path, 'training_loop',
      'Training loop: this script against upstream-style Slim')
  rows = table_rows(lines, 'loop')
  assert [row[0] for row in rows] == [name for name, _ in training_loop.LOOPS]
  assert rows[0][3] == '1.000'
  assert all(float(row[1]) > 0 for row in rows)
  variants = table_rows(lines, 'each step runs')
  assert len(variants) == 8
  assert variants[0][:2] == ['train op alone', 'tf.data']
  assert variants[0][5] == '1.000'
  parts = table_rows(lines, 'part of a script-loop step')
  assert parts[-1][0] == 'total'
  assert {row[0].split(':')[0] for row in parts[1:-2]} == {
      'NanTensorHook', 'CheckpointSaverHook', 'SummarySaverHook',
      'ProgressLogHook', 'StopAtStepHook'}
  assert sum(float(row[1]) for row in parts[:-1]) == pytest.approx(
      float(parts[-1][1]), abs=0.01)


# --- clone_overhead.py -------------------------------------------------------


def test_clone_overhead_tables_are_relative_to_the_first_row():
  import clone_overhead  # pylint: disable=g-import-not-at-top
  configs = [types.SimpleNamespace(num_clones=n, num_ops=ops,
                                   step_seconds=seconds)
             for n, ops, seconds in ((1, 600, [0.10, 0.12, 0.11]),
                                     (2, 900, [0.11, 0.13, 0.121]))]
  rows = table_rows(clone_overhead.step_table(configs), 'clones')
  assert rows == [['1', '128', '600', '0.1100', '0.1000-0.1200', '1.000'],
                  ['2', '64', '900', '0.1210', '0.1100-0.1300', '1.100']]
  build = clone_overhead.build_table({
      ('resnet_v1_50', 1): [clone_overhead.BuildTime(2.0, 1.5)],
      ('resnet_v1_50', 4): [clone_overhead.BuildTime(5.0, 4.0),
                            clone_overhead.BuildTime(7.0, 6.0)]})
  assert table_rows(build, 'network') == [
      ['resnet_v1_50', '1', '2.00', '1.50', '1'],
      ['resnet_v1_50', '4', '6.00', '5.00', '2']]


@pytest.mark.slow
def test_clone_overhead_writes_its_result_file(tmp_path):
  import clone_overhead  # pylint: disable=g-import-not-at-top
  path = clone_overhead.main([
      '--clones=1,2', '--steps=2', '--warmup_steps=1', '--steps_per_round=1',
      '--skip_build', '--results_dir=%s' % tmp_path])
  lines = assert_result_file(path, tmp_path, 'clone_overhead',
                             'Clone overhead')
  rows = table_rows(lines, 'clones')
  assert [row[:2] for row in rows] == [['1', '128'], ['2', '64']]
  assert rows[0][5] == '1.000'
  assert float(rows[1][5]) > 0
  assert any(line.startswith('- other processes') for line in lines)


# --- test_tiers.py ---------------------------------------------------------

JUNIT_REPORT = '''<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_a" name="test_quick" time="0.5"/>
<testcase classname="tests.test_b" name="test_long[x]" time="42.25"/>
<testcase classname="tests.test_a" name="test_broken" time="3.0">
<failure message="assert 1 == 2"/></testcase>
</testsuite></testsuites>
'''


def test_test_tiers_reads_counts_failures_and_the_slowest_first(tmp_path):
  path = tmp_path / 'report.xml'
  path.write_text(JUNIT_REPORT)
  assert test_tiers.read_report(str(path)) == (3, 1, [
      (42.25, 'tests/test_b.py::test_long[x]'),
      (3.0, 'tests/test_a.py::test_broken'),
      (0.5, 'tests/test_a.py::test_quick')])


def test_test_tiers_table_gives_each_run_and_each_tiers_slowest_once():
  runs = test_tiers.parse_args(
      ['--runs', 'test:0:unset,test:2:1,test-slow:0:0']).runs
  for run, wall in zip(runs, (512.0, 700.5, 61.0)):
    run.wall, run.tests, run.failed = wall, 3, 0
    run.slowest = [(42.25, 'tests/test_b.py::test_long[x]')]
  lines = test_tiers.table(runs)
  assert table_rows(lines, 'run') == [
      ['`make test`, 0 busy loop(s), TF_ENABLE_ONEDNN_OPTS=unset',
       '8 min 32 s', '3', '0', '10 min'],
      ['`make test`, 2 busy loop(s), TF_ENABLE_ONEDNN_OPTS=1',
       '11 min 40 s', '3', '0', '10 min'],
      ['`make test-slow`, 0 busy loop(s), TF_ENABLE_ONEDNN_OPTS=0',
       '1 min 01 s', '3', '0', '12 min']]
  headings = [line for line in lines if line.startswith('## ')]
  assert headings == [
      '## The 20 slowest tests of `make test`, 0 busy loop(s), '
      'TF_ENABLE_ONEDNN_OPTS=unset',
      '## The 20 slowest tests of `make test-slow`, 0 busy loop(s), '
      'TF_ENABLE_ONEDNN_OPTS=0']
  assert '| 42.2 | `tests/test_b.py::test_long[x]` |' in lines


@pytest.mark.parametrize('spec, message', [
    ('test:2', 'a run is TIER:LOAD:ONEDNN'),
    ('test-fast:0:0', "tier 'test-fast' is not one of test, test-slow"),
    ('test:0:2', "ONEDNN is unset, 0 or 1, got '2'"),
])
def test_test_tiers_refuses_a_bad_run(spec, message):
  with pytest.raises(test_tiers.argparse.ArgumentTypeError, match=message):
    test_tiers.Run(spec)
