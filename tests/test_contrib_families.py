"""Each tf.contrib family a TF 1.x program uses, through `run_slim --tf1`:
tests/tf1_program/contrib_families.py trains on 2 clones with the
family's names to its last step."""

import os
import re

import pytest

from tests.script_runner import REPO
from tests.script_runner import run_script

PROGRAM = os.path.join(REPO, 'tests', 'tf1_program', 'contrib_families.py')
LAST_STEP = 60
# The loss of a guess is ln 2 = 0.69; training on 2 clones halves it.
LEARNT_LOSS = 0.3


def _run(family, train_dir):
  # `python -m tf2_compat.run_slim --tf1 PROGRAM ...`, forked from a Python
  # with TensorFlow imported (the start of a Python is not what these tests
  # are about; tests/test_run_slim.py starts real ones).
  result = run_script(
      os.path.join('tf2_compat', 'run_slim.py'), '--tf1', PROGRAM,
      '--family=%s' % family, '--train_dir=%s' % train_dir,
      '--max_number_of_steps=%d' % LAST_STEP, timeout=300)
  assert result.returncode == 0, result.stdout[-3000:]
  return result.stdout


def _figure(output, family, name):
  return float(re.search(r'^%s: %s (\S+)$' % (family, name), output,
                         re.M).group(1))


@pytest.mark.slow
@pytest.mark.parametrize('family', [
    'layers', 'losses', 'framework', 'lookup', 'data', 'metrics', 'opt',
    'training'])
def test_a_tf1_program_of_the_family_trains_on_2_clones_to_its_last_step(
    family, tmp_path):
  output = _run(family, tmp_path / 'train')
  assert 'step %d\n' % LAST_STEP in output
  assert _figure(output, family, 'final loss') < LEARNT_LOSS
  if family == 'framework':
    assert "framework: packed {'step': %d}\n" % LAST_STEP in output
  if family == 'lookup':  # Predictions named back through the tables.
    assert 0.35 < _figure(output, family, 'named_first') < 0.65
  if family == 'metrics':
    assert _figure(output, family, 'accuracy') > 0.85
    assert 0.4 < _figure(output, family, 'mean_label') < 0.6
  if family == 'opt':
    assert 'opt: checkpoint holds the averages True\n' in output
    assert 'opt: averages differ from the weights True\n' in output
