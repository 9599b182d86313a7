"""After validation the scripts read no flag: they read their typed configs.

Two checks. The source: no `.flags` attribute is read in the scripts,
training/ and exporting/, and FLAGS only in `main()`, on every path, error
paths too.
The run: training and evaluation work from flags that raise on any read
once validated (tests/sealed_flags.py), with FLAGS unparsed.
"""

import ast
import dataclasses
import glob
import os
import re

from absl.testing import flagsaver
import pytest

import train_image_classifier
from tests import sealed_flags
from tests.script_runner import REPO
from tests.script_runner import run_script
from tf2_compat.slim_compat import tf
from training import run_config
from training.flags import FLAGS

SOURCES = sorted(
    ['train_image_classifier.py', 'eval_image_classifier.py',
     'export_inference_graph.py'] +
    [os.path.relpath(path, REPO) for package in ('training', 'exporting')
     for path in glob.glob(os.path.join(REPO, package, '*.py'))])


def raw_flag_reads(source, filename='<source>'):
  """(line, what) of each read of `.flags` anywhere, and of FLAGS outside
  a function named main."""
  tree = ast.parse(source, filename)
  inside_main = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name == 'main':
      inside_main.update(id(inner) for inner in ast.walk(node))
  reads = []
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and node.attr == 'flags'
        and isinstance(node.ctx, ast.Load)):
      reads.append((node.lineno, ast.unparse(node)))
    elif (isinstance(node, ast.Name) and node.id == 'FLAGS'
          and isinstance(node.ctx, ast.Load) and id(node) not in inside_main):
      reads.append((node.lineno, 'FLAGS outside main()'))
  return reads


@pytest.mark.parametrize('path', SOURCES)
def test_no_flag_is_read_after_validation(path):
  with open(os.path.join(REPO, path)) as source:
    assert raw_flag_reads(source.read(), path) == []


@pytest.mark.parametrize('source,reads', [
    ('def train(config):\n  return config.flags.batch_size\n',
     [(2, 'config.flags')]),
    ('def build(config):\n  f = config.flags\n', [(2, 'config.flags')]),
    ('def build(config):\n  return FLAGS.learning_rate\n',
     [(2, 'FLAGS outside main()')]),
    ('FLAGS = flags.FLAGS\n\ndef main(argv):\n  run(from_flags(FLAGS))\n', []),
])
def test_the_source_check_finds_a_raw_read(source, reads):
  assert raw_flag_reads(source) == reads


def _parts(config):
  """Every value of a config's fields, its dataclass parts' included."""
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    yield value
    if dataclasses.is_dataclass(value):
      yield from _parts(value)


def test_training_reads_no_flag_after_validation(digits_dir, tmp_path):
  train_dir = str(tmp_path / 'train')
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
           '--num_clones=2', '--clone_on_cpu', '--batch_size=8',
           '--optimizer=momentum', '--accumulation_steps=2',
           '--moving_average_decay=0.9', '--trainable_scopes=LeNet',
           '--max_number_of_steps=2', '--log_every_n_steps=1',
           '--train_dir=%s' % train_dir])
    snapshot = sealed_flags.SealedSnapshot.of(FLAGS)
    FLAGS.unparse_flags()  # A read of FLAGS raises from here on.
    config = run_config.from_flags(snapshot, environ={})
    snapshot.seal()
    train_image_classifier.run(config)
  assert not any(isinstance(part, run_config.FlagSnapshot)
                 for part in _parts(config))
  assert tf.train.latest_checkpoint(train_dir) == os.path.join(
      train_dir, 'model.ckpt-2')

  result = run_script(
      'tests/sealed_flags.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--dataset_split_name=test',
      '--model_name=lenet', '--num_clones=2', '--clone_on_cpu',
      '--batch_size=20', '--max_num_batches=2', '--moving_average_decay=0.9',
      '--checkpoint_path=%s' % train_dir,
      '--eval_dir=%s' % os.path.join(train_dir, 'eval'))
  assert result.returncode == 0, result.stdout[-3000:]
  assert re.search(r'digits test: accuracy [\d.]+% on 40 examples '
                   r'\(checkpoint step 2\)', result.stdout), result.stdout
