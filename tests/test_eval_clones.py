"""Evaluation on several clones: every example counted exactly once."""

import re

import numpy as np
import pytest

from tf2_compat.slim_compat import tf
from tests.script_runner import run_script
from training import eval_input


def test_padded_batches_mark_every_example_once_then_only_padding(graph):
  labels = np.arange(7, dtype=np.int64)
  batches = tf.data.Dataset.from_tensor_slices(
      (np.ones([7, 2, 2, 1], np.float32), labels)).batch(3)
  iterator = tf.data.make_one_shot_iterator(
      eval_input.padded_batches(batches, 3))
  get_next = iterator.get_next()
  with tf.Session() as sess:
    runs = [sess.run(get_next) for _ in range(4)]
  assert [list(run[2]) for run in runs] == [[1, 1, 1], [1, 1, 1], [1, 0, 0],
                                            [0, 0, 0]]
  assert [list(run[1]) for run in runs][:3] == [[0, 1, 2], [3, 4, 5],
                                               [6, 0, 0]]
  assert runs[3][0].sum() == 0  # Padding images are zeros.


def _evaluate(digits_dir, train_dir, tmp_path, *flags):
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % (tmp_path / 'eval'), *flags)
  return result


@pytest.mark.slow
def test_one_two_and_three_clones_give_the_same_accuracy(digits_dir,
                                                          trained_lenet,
                                                          tmp_path):
  train_dir = trained_lenet
  reports = []
  for num_clones in (1, 2, 3):
    # 360 examples: 3 clones of batch 50 take 150 per run, so the third
    # run holds 60 real examples and 90 padding ones.
    result = _evaluate(digits_dir, train_dir, tmp_path, '--batch_size=50',
                       '--num_clones=%d' % num_clones, '--clone_on_cpu')
    assert result.returncode == 0, result.stdout[-3000:]
    reports.append(re.search(r'digits test: accuracy ([\d.]+)% on (\d+) '
                             r'examples', result.stdout).groups())
  assert reports[0][1] == '360'
  assert reports == [reports[0]] * 3


@pytest.mark.slow
def test_eval_with_no_clones_exits_2(digits_dir, tmp_path):
  result = _evaluate(digits_dir, str(tmp_path), tmp_path, '--num_clones=0')
  assert result.returncode == 2
  errors = [l for l in result.stdout.splitlines() if l.startswith('error:')]
  assert errors[0] == 'error: --num_clones must be >= 1, got 0'
  assert not (tmp_path / 'eval').exists()
