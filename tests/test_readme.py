"""The README's code runs as printed."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'README.md')


def _python_block_after(heading):
  with open(README) as f:
    text = f.read()
  section = text[text.index(heading):]
  return re.search(r'```python\n(.*?)```', section, re.S).group(1)


def test_custom_training_loop_example_trains(capsys):
  namespace = {}
  exec(_python_block_after('### A custom training loop on `deploy()`'),  # pylint: disable=exec-used
       namespace)
  final = float(re.search(r'final loss ([\d.]+)',
                          capsys.readouterr().out).group(1))
  # Cross-entropy of a 2-class guess is 0.693; 200 steps learn the rule.
  assert final < 0.35
  assert namespace['model'].train_op.op.name == 'train_op'
  average_names = sorted(
      v.op.name for v in namespace['graph'].get_collection('variables')
      if v.op.name.endswith('ExponentialMovingAverage'))
  assert average_names == [
      'hidden/biases/ExponentialMovingAverage',
      'hidden/weights/ExponentialMovingAverage',
      'logits/biases/ExponentialMovingAverage',
      'logits/weights/ExponentialMovingAverage']
