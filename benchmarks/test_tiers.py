"""Times the test tiers: wall time of each, its slowest tests, under load.

Each run is a make target of the tiers (`test`, `test-slow`) run as CI
runs it, with the number of busy loops that load the cores meanwhile
(`yes > /dev/null`, one process each) and the value of
TF_ENABLE_ONEDNN_OPTS ('unset' leaves it out of the environment):

  .venv/bin/python benchmarks/test_tiers.py \
      --runs test:0:unset,test-slow:0:unset,test:2:0,test:2:1

The table gives each run's wall time, its pass and fail counts and the
tier's budget; then, for the first run of each tier, its 20 slowest tests
(setup, call and teardown together, as pytest's junit report adds them).
Written to benchmarks/results/test_tiers.md (--name for another file
name, --results_dir for another folder).
What is not timed: creating .venv and installing the requirements
(`make venv` runs before the clock starts).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results  # pylint: disable=g-import-not-at-top

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# docs/testing.md's budgets, in minutes of wall time on this machine.
BUDGETS = {'test': 10, 'test-slow': 12}
SLOWEST = 20


class Run:
  """One make target run: `tier` under `load` busy loops, oneDNN `onednn`."""

  def __init__(self, spec):
    try:
      self.tier, load, self.onednn = spec.split(':')
      self.load = int(load)
    except ValueError:
      raise argparse.ArgumentTypeError(
          'a run is TIER:LOAD:ONEDNN (test:2:1), got %r' % spec) from None
    if self.tier not in BUDGETS:
      raise argparse.ArgumentTypeError(
          'tier %r is not one of %s' % (self.tier, ', '.join(BUDGETS)))
    if self.onednn not in ('unset', '0', '1'):
      raise argparse.ArgumentTypeError(
          'ONEDNN is unset, 0 or 1, got %r' % self.onednn)
    self.wall = self.tests = self.failed = None
    self.slowest = []

  def label(self):
    return '`make %s`, %d busy loop(s), TF_ENABLE_ONEDNN_OPTS=%s' % (
        self.tier, self.load, self.onednn)


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--runs', required=True,
                      type=lambda text: [Run(s) for s in text.split(',')],
                      help='comma-separated TIER:LOAD:ONEDNN runs')
  parser.add_argument('--name', default='test_tiers',
                      help='the result file: <results_dir>/<name>.md')
  parser.add_argument('--results_dir', default=None)
  return parser.parse_args(argv)


def read_report(path):
  """(tests, failed, [(seconds, test id)] slowest first) of a junit file."""
  cases = []
  failed = 0
  for case in ElementTree.parse(path).getroot().iter('testcase'):
    name = '%s::%s' % (case.get('classname', '').replace('.', '/') + '.py',
                       case.get('name'))
    cases.append((float(case.get('time', 0)), name))
    if case.find('failure') is not None or case.find('error') is not None:
      failed += 1
  cases.sort(reverse=True)
  return len(cases), failed, cases


def time_run(run):
  """Runs `make TIER` with its load and environment; fills in `run`."""
  env = dict(os.environ)
  env.pop('TF_ENABLE_ONEDNN_OPTS', None)
  if run.onednn != 'unset':
    env['TF_ENABLE_ONEDNN_OPTS'] = run.onednn
  # Untimed: a changed requirements.txt or pyproject.toml reinstalls.
  subprocess.run(['make', 'venv'], cwd=REPO, env=env, check=True)
  loops = [subprocess.Popen(['yes'], stdout=subprocess.DEVNULL)
           for _ in range(run.load)]
  with tempfile.TemporaryDirectory() as directory:
    report = os.path.join(directory, 'report.xml')
    env['PYTEST_ADDOPTS'] = '--junitxml=%s -p no:cacheprovider' % report
    start = time.monotonic()
    try:
      subprocess.run(['make', run.tier], cwd=REPO, env=env, check=False)
    finally:
      run.wall = time.monotonic() - start
      for loop in loops:
        loop.kill()
        loop.wait()
    run.tests, run.failed, run.slowest = read_report(report)


def table(runs):
  lines = ['| run | wall | tests | failed | budget |',
           '|---|---:|---:|---:|---:|']
  for run in runs:
    lines.append('| %s | %d min %02d s | %d | %d | %d min |' % (
        run.label(), run.wall // 60, run.wall % 60, run.tests, run.failed,
        BUDGETS[run.tier]))
  seen = set()
  for run in runs:
    if run.tier in seen:
      continue
    seen.add(run.tier)
    lines += ['', '## The %d slowest tests of %s' % (SLOWEST, run.label()),
              '', '| s | test |', '|---:|---|']
    lines += ['| %.1f | `%s` |' % case for case in run.slowest[:SLOWEST]]
  return lines


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  for run in args.runs:
    time_run(run)
  return results.publish(
      args.name, 'Test tiers: wall time and slowest tests',
      table(args.runs), argv=argv, directory=args.results_dir,
      command=' '.join(['.venv/bin/python benchmarks/test_tiers.py'] + list(
          sys.argv[1:] if argv is None else argv)))


if __name__ == '__main__':
  main()
