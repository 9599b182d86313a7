"""clusters.script_contract: the progress line the launcher reads has one
home, which the script and the launcher import; the script defines the
flags the contract names (training/flags.py keeps their names written out,
which tests/test_readme.py reads)."""

import glob
import os
import re

import pytest

from clusters import restarts
from clusters import script_contract
from tests.script_runner import REPO


def test_the_launcher_reads_the_step_of_the_line_the_script_writes():
  line = script_contract.progress_line(120, 0.43121, 0.05, 812.34)
  assert line == ('step 120: loss = 0.4312, learning rate = 0.05, 812.3 '
                  'examples/sec')
  steps = restarts.StepLog()
  start = steps.new_start()
  steps.observe(start, 'worker1', 'INFO:tensorflow:%s, 1m05s left\n' % line)
  assert steps.highest == 120


def test_the_script_defines_the_flags_the_launcher_reads():
  from training import flags  # pylint: disable=g-import-not-at-top
  assert flags.FLAGS[script_contract.TRAIN_DIR_FLAG].default == '/tmp/tfmodel/'
  assert flags.FLAGS[script_contract.SYNC_REPLICAS_FLAG].default is False
  assert restarts.read_script_args([
      'train_image_classifier.py', '--train_dir=/runs/a',
      '--sync_replicas']) == restarts.ScriptArgs('/runs/a', True)


@pytest.mark.parametrize('pattern', [
    r"step %d: loss = ",  # The line's format.
    r"step \(\\d\+\): loss",  # The regex that reads it.
])
def test_no_other_module_spells_the_line_out(pattern):
  sources = sorted(glob.glob(os.path.join(REPO, 'training', '*.py'))
                   + glob.glob(os.path.join(REPO, 'clusters', '*.py')))
  spelled = []
  for path in sources:
    with open(path) as source:
      if re.search(pattern, source.read()):
        spelled.append(os.path.relpath(path, REPO))
  assert spelled == [os.path.join('clusters', 'script_contract.py')]
