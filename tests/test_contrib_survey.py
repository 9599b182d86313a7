"""The survey of tf.contrib names in docs/migration.md: what each name of
surveys/contrib/survey.csv gives a program under the contrib stubs, and
the share of the call sites that reach working code."""

import csv
import functools
import importlib.util
import os
import re
import types

from tests.script_runner import REPO
from tf2_compat import contrib_stubs

SURVEY = os.path.join(REPO, 'surveys', 'contrib', 'survey.csv')
COUNT = os.path.join(REPO, 'surveys', 'contrib', 'count.py')
MIGRATION = os.path.join(REPO, 'docs', 'migration.md')
TARGET_SHARE = 0.95


def _survey():
  with open(SURVEY) as survey:
    return [(row['name'], int(row['call_sites']))
            for row in csv.DictReader(survey)]


def _value(name):
  value = contrib_stubs.install()  # Another test may have uninstalled it.
  for attribute in name.split('.')[2:]:
    value = getattr(value, attribute)
  return value


def what_runs(name):
  """How docs/migration.md says what `name` is now."""
  homeless = contrib_stubs.HOMELESS.get(name[len('tf.contrib.'):])
  if homeless:
    return 'rewritten: `%s`' % homeless.replace(':', '.')
  value = _value(name)
  if isinstance(value, contrib_stubs.Removed):
    return 'removed: a one-line error naming the replacement'
  if isinstance(value, types.ModuleType):
    return '`%s`' % value.__name__
  if isinstance(value, functools.partial):  # layers.linear
    return '`%s.%s` with %s' % (
        value.func.__module__, value.func.__qualname__,
        ', '.join('%s=%r' % item for item in sorted(value.keywords.items())))
  if not hasattr(value, '__qualname__'):  # A constant: data.AUTOTUNE.
    return '`%r`' % (value,)
  return '`%s.%s`' % (value.__module__, value.__qualname__)


def test_the_survey_rows_say_what_each_name_gives():
  with open(MIGRATION) as page:
    rows = re.findall(r'^\| `(tf\.contrib\.[\w.]+)` \| (\d+) \| (.*) \|$',
                      page.read(), re.M)
  assert rows == [(name, str(sites), what_runs(name))
                  for name, sites in _survey()]


# The programs a Slim user is likely to bring (docs/migration.md): at least
# TARGET_SHARE of their call sites reach working code.
SLIM_PROGRAMS = frozenset([
    'slim', 'object_detection', 'deeplab', 'attention_ocr', 'delf',
    'lstm_object_detection', 'SSD-Tensorflow', 'MobileNet', 'EAST',
    'deeplab_v3', 'tensorflow-densenet', 'youtube-8m'])


def _working_and_total(programs=None):
  """The call sites that reach working code, and all of them, in
  `programs` (every program of the survey if None)."""
  working = total = 0
  with open(SURVEY) as survey:
    for row in csv.DictReader(survey):
      works = not isinstance(_value(row['name']), contrib_stubs.Removed)
      for program_sites in row['where'].split('; '):
        program, sites = program_sites.rsplit(':', 1)
        if programs is None or program in programs:
          total += int(sites)
          working += int(sites) if works else 0
  return working, total


def test_at_least_95_percent_of_slim_programs_call_sites_reach_working_code():
  working, total = _working_and_total(SLIM_PROGRAMS)
  assert (working, total) == (1986, 2012)
  assert working / total >= TARGET_SHARE


def test_the_whole_research_tree_reaches_working_code_as_documented():
  # Most of the rest: tf.contrib.gan and tf.contrib.distributions, now
  # packages of their own (tensorflow-gan, TensorFlow Probability).
  assert _working_and_total() == (3201, 3435)
  assert sum(sites for _, sites in _survey()) == 3435


def _counter():
  spec = importlib.util.spec_from_file_location('survey_count', COUNT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# A TF 1.x program reaching contrib names through submodules.
SUBMODULE_PROGRAM = """\
import tensorflow as tf
from tensorflow.contrib.layers.python.layers import summaries
from tensorflow.contrib.framework.python.ops import variables as variables_lib
import tensorflow.contrib.rnn.python.ops.rnn_cell as rnn_cell

summaries.summarize_tensor(x)
weights = variables_lib.model_variable('weights')
cell = rnn_cell.LSTMCell(4)
tf.contrib.layers.summaries.summarize_activation(y)
tf.contrib.layers.summarize_activation(y)
"""


def test_a_dotted_submodule_path_is_counted_as_its_own_name(tmp_path):
  program = tmp_path / 'program.py'
  program.write_text(SUBMODULE_PROGRAM)
  assert dict(_counter().count_file(str(program))) == {
      'tf.contrib.layers.python.layers.summaries.summarize_tensor': 1,
      'tf.contrib.framework.python.ops.variables.model_variable': 1,
      'tf.contrib.rnn.python.ops.rnn_cell.LSTMCell': 1,
      'tf.contrib.layers.summaries.summarize_activation': 1,
      'tf.contrib.layers.summarize_activation': 1,
  }


def test_no_dotted_path_of_the_survey_is_removed_where_its_family_has_it():
  # tf.contrib.<family>.<module...>.<name> is what tf.contrib.<family>.<name>
  # is: TF 1.x's families re-exported their modules' names.
  dotted = [name for name, _ in _survey()
            if name.count('.') > 3 and name != 'tf.contrib.slim']
  assert len(dotted) == 57
  lost = [name for name in dotted
          if isinstance(_value(name), contrib_stubs.Removed)
          and not isinstance(_value('tf.contrib.%s.%s' % (
              name.split('.')[2], name.split('.')[-1])),
                             contrib_stubs.Removed)]
  assert lost == []
