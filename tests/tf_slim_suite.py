"""Runs tf-slim 1.1.0's own test suite against this project's compat layer.

    python tests/tf_slim_suite.py [--output docs/tf_slim_test_suite.md]
    python tests/tf_slim_suite.py --only learning_test,layers/layers_test

The tf-slim wheel ships its 35 `*_test.py` files. Each runs in a process of
its own as `python -m tf2_compat.run_slim FILE`, the way any Slim program
runs on this project: the aliases of `tf2_compat.slim_compat`, the loop
threads of `tf2_compat.slim_loops` and the tensorflow.contrib stubs, and
nothing set up by hand. (The files switch eager execution off themselves,
in `setUpModule`.)

Every failing test is matched against the KNOWN_CAUSES of
tests/tf_slim_causes.py: the reasons a test can fail that are no fault of
the library on TF 2.21 (a NumPy 2 idiom in the test, a TensorFlow name the
test imports that moved, a TF 2.x behaviour the test pins). A failure no
cause explains is reported as unexplained: a library failure left to fix.

Causes that lie in the test code come with the edit that fixes the test
(`Cause.fix`). Three more passes check that the library then passes, and
that the yardstick measures the loop fix:

  fixed   each file a fix changes runs again as a copy with the fixes;
  eager   the loop tests (learning, training, evaluation) run again with
          those fixes and with eager execution left on, graph mode entered
          in the main thread only, as in a user's program: the threads the
          loops start begin eager, and only `tf2_compat.slim_loops` keeps
          them working;
  no-fix  the eager pass once more with `tf2_compat.slim_loops` removed:
          it must fail ("global_step:0 ... is out of scope").

The report, with the totals of every pass, goes to --output. Exit status 1
when a failure is unexplained, when a fixed test still fails, when the
no-fix pass passes, or when a file did not finish.
"""

import argparse
import collections
import dataclasses
import glob
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

import tf_slim_causes  # The sibling module: this file runs as a script.

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE_TIMEOUT_SECS = 3600


# The tests of slim's loops, run once more the way a user's program runs:
# eager execution left on for the process. Each test runs with graph mode
# entered in the main thread only (`context.graph_mode()`, what `with
# tf.Graph().as_default()` enters), so the threads the loops start begin
# eager, as in a user's program: only tf2_compat.slim_loops keeps them
# working.
EAGER_FILES = ('learning_test', 'evaluation_test', 'training/training_test',
               'training/evaluation_test')
_EAGER_OFF = r'^(\s*)tf\.disable_eager_execution\(\)$'
_EAGER_ON = r'\1import graph_mode_per_test; graph_mode_per_test.install()'
WITHOUT_LOOP_FIX = 'TF_SLIM_SUITE_WITHOUT_LOOP_FIX'
GRAPH_MODE_PER_TEST = '''\
import os
import unittest

from tensorflow.python.eager import context


def install():
  if os.environ.get('%s'):
    from tf2_compat import slim_loops
    slim_loops.uninstall()
  run = unittest.TestCase.run

  def run_in_graph_mode(self, result=None):
    with context.graph_mode():
      return run(self, result)

  unittest.TestCase.run = run_in_graph_mode
''' % WITHOUT_LOOP_FIX

# evaluation_test.py imports `nose.tools.nottest`, from the nose test runner,
# which tf-slim does not depend on; nottest marks a function as no test.
NOSE_SHIM = 'def nottest(function):\n  function.__test__ = False\n  return function\n'


@dataclasses.dataclass
class Outcome:
  test: str            # 'layers/layers_test:DropoutTest.testCreateDropout'
  status: str          # 'passed', 'failed' or 'skipped'
  detail: str = ''     # message and traceback of a failure
  cause: tf_slim_causes.Cause = None


def _tf_slim_root():
  # Found, not imported: importing it would load TensorFlow here for nothing.
  return importlib.util.find_spec('tf_slim').submodule_search_locations[0]


def test_files():
  """{'layers/layers_test': path} for each test file of the tf-slim wheel."""
  root = _tf_slim_root()
  paths = glob.glob(os.path.join(root, '**', '*_test.py'), recursive=True)
  return {os.path.relpath(path, root)[:-3]: path for path in sorted(paths)}


def write_shims(folder):
  os.makedirs(os.path.join(folder, 'nose'), exist_ok=True)
  open(os.path.join(folder, 'nose', '__init__.py'), 'w').close()
  with open(os.path.join(folder, 'nose', 'tools.py'), 'w') as tools:
    tools.write(NOSE_SHIM)
  with open(os.path.join(folder, 'graph_mode_per_test.py'), 'w') as helper:
    helper.write(GRAPH_MODE_PER_TEST)
  return folder


def fixed_source(source, eager=False):
  """The test source with every cause's fix applied (and eager left on)."""
  source = tf_slim_causes.fix_test_code(source)
  if eager:
    source = re.sub(_EAGER_OFF, _EAGER_ON, source, flags=re.M)
  return source


def run_file(path, stem, shims, extra_env):
  """Runs one test file through run_slim; returns (exit status, seconds)."""
  env = dict(os.environ, **extra_env)
  env.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  env['PYTHONPATH'] = os.pathsep.join(
      [REPO, shims] + list(filter(None, [env.get('PYTHONPATH')])))
  start = time.time()
  with open(stem + '.log', 'w') as log:
    try:
      status = subprocess.run(
          [sys.executable, '-m', 'tf2_compat.run_slim', path,
           '--xml_output_file=%s.xml' % stem],
          cwd=os.path.dirname(stem), env=env, stdout=log,
          stderr=subprocess.STDOUT, timeout=FILE_TIMEOUT_SECS,
          check=False).returncode
    except subprocess.TimeoutExpired:
      status = None
  return status, time.time() - start


def read_outcomes(name, stem, status):
  """The outcome of every test case of one run (XML report and status)."""
  outcomes = []
  if os.path.exists(stem + '.xml') and os.path.getsize(stem + '.xml'):
    for case in ElementTree.parse(stem + '.xml').iter('testcase'):
      test = '%s:%s.%s' % (name, case.get('classname').rsplit('.', 1)[-1],
                           case.get('name'))
      problems = case.findall('failure') + case.findall('error')
      if problems:
        detail = '\n'.join('%s\n%s' % (p.get('message', ''), p.text or '')
                           for p in problems)
        outcomes.append(Outcome(test, 'failed', detail))
      elif case.get('result') == 'suppressed':
        outcomes.append(Outcome(test, 'skipped'))
      else:
        outcomes.append(Outcome(test, 'passed'))
  if status != 0 and not any(o.status == 'failed' for o in outcomes):
    # The file did not load, crashed or timed out: one failure for it.
    with open(stem + '.log', errors='replace') as log:
      tail = log.read()[-4000:]
    outcomes.append(Outcome('%s:<file>' % name, 'failed',
                            'exit status %s\n%s' % (status, tail)))
  for outcome in outcomes:
    if outcome.status == 'failed':
      outcome.cause = tf_slim_causes.cause_of(outcome.detail)
  return outcomes


@dataclasses.dataclass
class Pass:
  """One run of some test files: their outcomes and how each file ended."""
  name: str
  files: dict = dataclasses.field(default_factory=dict)  # name: (status, s)
  outcomes: list = dataclasses.field(default_factory=list)

  def counts(self, prefix=''):
    return collections.Counter(o.status for o in self.outcomes
                               if o.test.startswith(prefix))

  def failed(self):
    return [o for o in self.outcomes if o.status == 'failed']


def run_pass(name, sources, work, shims, extra_env=None):
  """Runs {file name: path} and prints a line per file."""
  result = Pass(name)
  for file_name, path in sources.items():
    stem = os.path.join(work, name, file_name.replace(os.sep, '.'))
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    status, secs = run_file(path, stem, shims, extra_env or {})
    result.files[file_name] = (status, secs)
    outcomes = read_outcomes(file_name, stem, status)
    result.outcomes += outcomes
    counts = collections.Counter(o.status for o in outcomes)
    print('%-8s %-34s %4d passed %4d failed %3d skipped  exit %-4s %5.0f s'
          % (name, file_name, counts['passed'], counts['failed'],
             counts['skipped'], status, secs), flush=True)
  return result


def write_copies(files, work, eager=False):
  """Copies of the files the fixes change, {name: path of the copy}."""
  copies = {}
  for file_name, path in files.items():
    with open(path) as original:
      source = original.read()
    changed = fixed_source(source, eager)
    if changed == source:
      continue
    copy = os.path.join(work, 'eager' if eager else 'fixed', file_name + '.py')
    os.makedirs(os.path.dirname(copy), exist_ok=True)
    with open(copy, 'w') as out:
      out.write(changed)
    copies[file_name] = copy
  return copies


def _last_line(detail):
  lines = [line.strip() for line in detail.splitlines() if line.strip()]
  return lines[-1][:200] if lines else ''


def _problems(passes):
  """The failures that make the run fail: unexplained, or left after a fix."""
  shipped = passes[0]
  problems = ['unexplained: %s: %s' % (o.test, _last_line(o.detail))
              for o in shipped.failed() if o.cause is None]
  for later in passes[1:3]:
    problems += ['fails in the %s pass: %s: %s' % (
        later.name, o.test, _last_line(o.detail)) for o in later.failed()
                 if o.cause is None or o.cause.fix]
  problems += ['did not finish: %s (%s pass)' % (name, p.name)
               for p in passes for name, (status, _) in p.files.items()
               if status is None]
  if passes[3].files and not passes[3].failed():
    problems.append('the eager pass passes without tf2_compat.slim_loops: '
                    'it no longer tests the fix')
  return problems


def report(passes, seconds):
  """The markdown report of the four passes."""
  shipped, fixed, eager, unfixed = passes
  total = shipped.counts()
  explained = [o for o in shipped.failed() if o.cause]
  unexplained = [o for o in shipped.failed() if not o.cause]
  lines = [
      '# tf-slim 1.1.0 test suite on TensorFlow 2.21',
      '',
      'Written by `make tf-slim-suite` (`tests/tf_slim_suite.py`). Each of '
      'the %d `*_test.py` files of the tf-slim wheel runs as `python -m '
      'tf2_compat.run_slim FILE` (NumPy 2.4, tf-keras 2.21). The files '
      'switch eager execution off themselves; "skipped" counts the tests '
      'they skip and TF\'s `test_session` helper, which absltest lists as '
      '"Not a test".' % len(shipped.files),
      '',
      '| pass | tests | passed | failed | skipped |',
      '|---|---:|---:|---:|---:|',
  ]
  for one, what in ((shipped, 'as shipped'),
                    (fixed, 'files with test-code failures, the test code '
                            'fixed (Fix column below)'),
                    (eager, 'the loop tests, fixed, eager execution left '
                            'on (graph mode in the main thread only)'),
                    (unfixed, 'the same without tf2_compat.slim_loops')):
    counts = one.counts()
    lines.append('| %s: %s | %d | %d | %d | %d |' % (
        one.name, what, len(one.outcomes), counts['passed'],
        counts['failed'], counts['skipped']))
  lines += [
      '',
      'As shipped, %d of %d tests pass; the %d failures are all explained '
      'below: %d by the test code (NumPy 2 idioms, TensorFlow internals it '
      'imports), %d by TF 2.x behaviour a test pins. %d failures have no '
      'known cause.' % (
          total['passed'], len(shipped.outcomes), len(shipped.failed()),
          sum(1 for o in explained if o.cause.fix),
          sum(1 for o in explained if not o.cause.fix), len(unexplained)),
      '',
      'With the test code fixed, %d of the %d tests of the loops '
      '(`learning_test`, `evaluation_test`, `training/*`) pass with eager '
      'execution left on, the way a user\'s program runs. Without '
      '`tf2_compat.slim_loops`, %d of them fail, %d with the error of the '
      'issue (`global_step:0 ... is out of scope`, raised in a Supervisor '
      'thread).' % (
          eager.counts()['passed'],
          eager.counts()['passed'] + eager.counts()['failed'],
          len(unfixed.failed()),
          sum(1 for o in unfixed.failed() if 'out of scope' in o.detail)),
      '',
  ]
  fixed_by_test = {o.test: o for o in fixed.outcomes}
  for group, heading in tf_slim_causes.GROUPS.items():
    lines += ['## %s' % heading, '',
              '| cause | failures | after the fix | fix | tests |',
              '|---|---:|---:|---|---|']
    for cause in (c for c in tf_slim_causes.KNOWN_CAUSES if c.group == group):
      members = [o for o in explained if o.cause is cause]
      if not members:
        continue
      after = ('%d pass' % sum(
          1 for o in members
          if getattr(fixed_by_test.get(o.test), 'status', '') == 'passed')
               if cause.fix else '')
      fix = '; '.join('`%s` -> `%s`' % (p, r) for p, r in cause.fix)
      files = collections.Counter(o.test.split(':')[0] for o in members)
      lines.append('| %s | %d | %s | %s | %s |' % (
          cause.title, len(members), after, fix.replace('|', '\\|'),
          ', '.join('%s (%d)' % item for item in sorted(files.items()))))
    lines.append('')
  lines += ['## Library failures the compat layer mends', '',
            'Beyond the TF-internal names `tf2_compat.slim_compat` '
            'restores:', '',
            '| test | mended by | what | fixed pass |', '|---|---|---|---|']
  for test, module, what in tf_slim_causes.LIBRARY_FIXES:
    outcome = fixed_by_test.get(test)
    lines.append('| `%s` | `%s` | %s | %s |' % (
        test, module, what, outcome.status if outcome else 'not run'))
  lines += ['', '## Unexplained (library failures left to fix)', '']
  lines += ['- `%s`: %s' % (o.test, _last_line(o.detail))
            for o in unexplained] or ['None.']
  lines += ['', '## Per file', '',
            '| file | passed | failed | skipped | fixed: passed / failed '
            '| eager on: passed / failed | seconds |',
            '|---|---:|---:|---:|---:|---:|---:|']
  for name, (status, secs) in shipped.files.items():
    counts = shipped.counts(name + ':')
    cells = []
    for later in (fixed, eager):
      later_counts = later.counts(name + ':')
      cells.append('%d / %d' % (later_counts['passed'],
                                later_counts['failed'])
                   if name in later.files else '')
    lines.append('| %s | %d | %d | %d | %s | %s | %.0f%s |' % (
        name, counts['passed'], counts['failed'], counts['skipped'],
        cells[0], cells[1], secs, '' if status is not None else ' timeout'))
  lines += ['', 'Total time: %.0f min.' % (seconds / 60), '']
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--output', default=os.path.join(
      REPO, 'docs', 'tf_slim_test_suite.md'))
  parser.add_argument('--only', default='',
                      help='comma-separated file names, e.g. '
                           'learning_test,layers/layers_test (no report)')
  parser.add_argument('--keep_logs', default='',
                      help="folder for each run's output and XML report")
  args = parser.parse_args(argv)
  files = test_files()
  only = set(filter(None, args.only.split(',')))
  if only - set(files):
    parser.error('no such test file: %s' % ', '.join(sorted(only - set(files))))
  if only:
    files = {name: path for name, path in files.items() if name in only}
  work = args.keep_logs or tempfile.mkdtemp(prefix='tf_slim_suite_')
  shims = write_shims(os.path.join(work, 'shims'))
  start = time.time()
  shipped = run_pass('shipped', files, work, shims)
  fixed = run_pass('fixed', write_copies(files, work), work, shims)
  loop_files = {name: path for name, path in files.items()
                if name in EAGER_FILES}
  eager_copies = write_copies(loop_files, work, eager=True)
  eager = run_pass('eager', eager_copies, work, shims)
  # The yardstick's own check: the eager pass fails without the fix.
  unfixed = run_pass('no-fix', eager_copies, work, shims,
                     {WITHOUT_LOOP_FIX: '1'})
  passes = (shipped, fixed, eager, unfixed)
  if not only:
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, 'w') as output:
      output.write(report(passes, time.time() - start))
    print('wrote %s' % args.output)
  problems = _problems(passes)
  for problem in problems:
    print(problem)
  print('logs and XML reports in %s' % work)
  return 1 if problems else 0


if __name__ == '__main__':
  sys.exit(main())
