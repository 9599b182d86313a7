"""Nothing a launcher started outlives it: the processes its tasks start,
in their process group or out of it (clusters/process_tree.py)."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from clusters import launch
from clusters import process_tree
from tests.script_runner import REPO
from tests.script_runner import process_alive
from tests.stand_in_tasks import write_task
from tests.test_launch import _Lines

# The launcher picks its tasks' ports on 127.0.0.1.
pytestmark = pytest.mark.xdist_group('loopback')

# Every task of 2 workers starts two helpers that would sleep for 10
# minutes: one in the task's process group, as a data loader would be; one
# in a session of its own, as a daemon is. It writes their pids to
# MARKS/<its pid>.<its index>. Then worker0 sleeps, and worker1, once
# worker0 of the same start has written its file, exits 3.
HELPING_TASK = textwrap.dedent("""\
    import json, os, subprocess, sys, time
    index = json.loads(os.environ['TF_CONFIG'])['task']['index']
    marks = sys.argv[1]
    sleeper = [sys.executable, '-c', 'import time; time.sleep(600)']
    helper = subprocess.Popen(sleeper)
    daemon = subprocess.Popen(sleeper, start_new_session=True,
                              stdout=subprocess.DEVNULL)
    mark = os.path.join(marks, '%d.%d' % (os.getpid(), index))
    with open(mark + '.tmp', 'w') as pids:  # Whole when it has its name.
      pids.write('%d %d' % (helper.pid, daemon.pid))
    os.rename(mark + '.tmp', mark)
    print('helpers started', flush=True)
    if index == 0:
      time.sleep(600)
    def written(i):
      return len([n for n in os.listdir(marks) if n.endswith('.%d' % i)])
    deadline = time.monotonic() + 30
    while written(0) < written(1) and time.monotonic() < deadline:
      time.sleep(0.02)
    sys.exit(3)
""")


def _helper_pids(marks):
  """{task pid: (helper pid, daemon pid)} of every start of a task."""
  return {int(name.split('.')[0]): tuple(
      int(pid) for pid in (marks / name).read_text().split())
          for name in os.listdir(marks)}


def _kill_left(pids):
  for pid in pids:
    if process_alive(pid):
      os.kill(pid, signal.SIGKILL)


def _wait_until_gone(pids, timeout=5):
  """The pids still alive after `timeout` (SIGKILL takes effect at once,
  the parent's reaping a moment later)."""
  deadline = time.monotonic() + timeout
  while any(process_alive(p) for p in pids) and time.monotonic() < deadline:
    time.sleep(0.05)
  return [pid for pid in pids if process_alive(pid)]


@pytest.fixture
def helping_task(tmp_path):
  return write_task(tmp_path, 'helping_task.py', HELPING_TASK)


def test_after_the_launcher_exits_nothing_it_started_is_alive(helping_task):
  script, marks = helping_task
  try:
    result = subprocess.run(
        [sys.executable, '-m', 'clusters.launch', '--num_ps', '0',
         '--num_workers', '2', '--max_restarts', '2', '--grace_secs', '5',
         '--timeout', '60', '--', script, str(marks)],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        timeout=120)
    helpers = _helper_pids(marks)
    log = result.stdout
    assert result.returncode == 3, log
    tasks = [int(pid) for pid in
             re.findall(r'^\[launch\] worker\d: pid (\d+)', log, re.M)]
    # Three starts of each worker: the first and two restarts.
    assert sorted(tasks) == sorted(helpers) and len(tasks) == 6, log
    started = tasks + [pid for pair in helpers.values() for pid in pair]
    # Checked at once: the launcher reaps what it ends before it exits.
    assert [pid for pid in started if process_alive(pid)] == []
    # The daemons had left their tasks' groups: the launcher ended those
    # once every task was stopped, at each restart and at the end, and
    # named them.
    ended = re.findall(r'^\[launch\] ended (\d+) process\(es\) the tasks '
                       r'had left running: pid (.*)$', log, re.M)
    assert len(ended) == 3, log
    assert sorted(int(pid) for _, pids in ended
                  for pid in pids.split(', ')) == sorted(
                      daemon for _, daemon in helpers.values())
    assert [count for count, _ in ended] == ['2', '2', '2']
  finally:
    _kill_left(pid for pair in _helper_pids(marks).values() for pid in pair)


def test_a_task_that_exits_takes_its_process_group_with_it(helping_task):
  script, marks = helping_task
  cluster = launch.LocalCluster([script, str(marks)], 0, 2, output=_Lines(),
                                grace_secs=5)
  try:
    cluster.start()
    worker1 = cluster.processes['worker1']
    assert worker1.wait(timeout=30) == 3
    # The daemons hold the tasks' pipes (stderr), and only the launcher's
    # end_leftovers ends them (the test above): gone, they let the output
    # end with the tasks.
    _kill_left(daemon for _, daemon in _helper_pids(marks).values())
    helper, _ = _helper_pids(marks)[worker1.pid]
    # Ended while the cluster still runs: worker0 has not been stopped yet.
    assert _wait_until_gone([helper]) == []
    assert cluster.processes['worker0'].poll() is None
    assert cluster.wait(timeout=30) == 3
  finally:
    cluster.stop()
    _kill_left(pid for pair in _helper_pids(marks).values() for pid in pair)


def test_descendants_are_found_below_a_process():
  child = subprocess.Popen(
      [sys.executable, '-c', textwrap.dedent("""\
          import subprocess, sys
          grandchild = subprocess.Popen([sys.executable, '-c',
                                         'import time; time.sleep(600)'])
          print(grandchild.pid, flush=True)
          sys.stdin.read()
          grandchild.kill()
      """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    grandchild = int(child.stdout.readline())
    assert process_tree.descendants(child.pid) == [grandchild]
    assert child.pid in process_tree.descendants(os.getpid())
  finally:
    child.kill()
    child.wait(timeout=10)
    _kill_left([grandchild])
