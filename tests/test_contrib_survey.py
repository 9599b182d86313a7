"""The survey of tf.contrib names in docs/migration.md: what each name of
surveys/contrib/survey.csv gives a program under the contrib stubs, and
the share of the call sites that reach working code."""

import csv
import os
import re
import types

from tests.script_runner import REPO
from tf2_compat import contrib_stubs

SURVEY = os.path.join(REPO, 'surveys', 'contrib', 'survey.csv')
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
  return '`%s.%s`' % (value.__module__, value.__qualname__)


def test_the_survey_rows_say_what_each_name_gives():
  with open(MIGRATION) as page:
    rows = re.findall(r'^\| `(tf\.contrib\.[\w.]+)` \| (\d+) \| (.*) \|$',
                      page.read(), re.M)
  assert rows == [(name, str(sites), what_runs(name))
                  for name, sites in _survey()]


def test_at_least_95_percent_of_the_call_sites_reach_working_code():
  survey = _survey()
  working = sum(sites for name, sites in survey
                if not isinstance(_value(name), contrib_stubs.Removed))
  total = sum(sites for _, sites in survey)
  assert (working, total) == (1986, 2012)
  assert working / total >= TARGET_SHARE
