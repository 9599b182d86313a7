"""The README and the pages of docs/ are true as printed.

Their Python blocks run; their links, the files and tests they name, the
make targets and the flags of their shell commands exist; and the
README opens with the two commands of the Makefile. A Python block that is a
fragment (it calls names the page does not define) is preceded by the line
`<!-- fragment -->` and is only compiled.
"""

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
PAGES = [README] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
FRAGMENT_MARK = '<!-- fragment -->'


def _read(path):
  with open(path) as f:
    return f.read()


def _page_id(path):
  return os.path.relpath(path, ROOT)


def _python_blocks():
  """(page, index, is_fragment, source) for every ```python block."""
  blocks = []
  for page in PAGES:
    for index, match in enumerate(re.finditer(
        r'(?:^([^\n]*)\n)?```python\n(.*?)```', _read(page), re.M | re.S)):
      is_fragment = (match.group(1) or '').strip() == FRAGMENT_MARK
      blocks.append((_page_id(page), index, is_fragment, match.group(2)))
  return blocks


def _block(page_id, heading):
  """The first Python block after `heading` on a page."""
  text = _read(os.path.join(ROOT, page_id))
  section = text[text.index(heading):]
  return re.search(r'```python\n(.*?)```', section, re.S).group(1)


PYTHON_BLOCKS = _python_blocks()


@pytest.mark.parametrize(
    'page_id,index,is_fragment,source',
    [b for b in PYTHON_BLOCKS if b[2]],
    ids=['%s-%d' % (b[0], b[1]) for b in PYTHON_BLOCKS if b[2]])
def test_fragment_compiles(page_id, index, is_fragment, source):
  del index, is_fragment
  compile(source, page_id, 'exec')


@pytest.mark.parametrize(
    'page_id,index,is_fragment,source',
    [b for b in PYTHON_BLOCKS if not b[2]],
    ids=['%s-%d' % (b[0], b[1]) for b in PYTHON_BLOCKS if not b[2]])
def test_python_block_runs(page_id, index, is_fragment, source):
  del index, is_fragment
  exec(compile(source, page_id, 'exec'), {})  # pylint: disable=exec-used


def test_custom_training_loop_example_trains(capsys):
  namespace = {}
  exec(_block('docs/api.md', '## A custom training loop on `deploy()`'),  # pylint: disable=exec-used
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


def test_readme_opens_with_make_test_and_make_run():
  first_block = re.search(r'```sh\n(.*?)```', _read(README), re.S).group(1)
  commands = [line.split('#')[0].strip() for line in first_block.splitlines()]
  assert commands == ['make test', 'make run']


def _anchors(text):
  """GitHub's anchors of a page's headings."""
  anchors = set()
  for heading in re.findall(r'^#+ (.*)$', text, re.M):
    slug = re.sub(r'[^\w\- ]', '', heading.lower()).replace(' ', '-')
    anchors.add(slug)
  return anchors


def _links():
  links = []
  for page in PAGES:
    text = re.sub(r'```.*?```', '', _read(page), flags=re.S)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
      if not re.match(r'[a-z]+://', target):
        links.append((_page_id(page), target))
  return links


@pytest.mark.parametrize('page_id,target', _links())
def test_relative_link_points_to_an_existing_file(page_id, target):
  path, _, anchor = target.partition('#')
  path = os.path.normpath(os.path.join(
      ROOT, os.path.dirname(page_id), path)) if path else os.path.join(
          ROOT, page_id)
  assert os.path.exists(path), '%s links to missing %s' % (page_id, target)
  if anchor and path.endswith('.md'):
    assert anchor in _anchors(_read(path)), (
        '%s links to %s, which has no heading for #%s' % (page_id, target,
                                                          anchor))


_PROJECT_FOLDERS = ('tests', 'benchmarks', 'tf2_compat', 'deployment',
                    'clusters', 'training', 'nets', 'datasets',
                    'preprocessing', 'exporting', 'docs')


def _named_files():
  """Project paths a page names in backticks, with an optional ::test."""
  named = set()
  for page in PAGES:
    for path, test in re.findall(
        r'`((?:%s)/[\w/.\-]+\.(?:py|md))(?:::(\w+))?`'
        % '|'.join(_PROJECT_FOLDERS), _read(page)):
      named.add((_page_id(page), path, test))
  return sorted(named)


@pytest.mark.parametrize('page_id,path,test', _named_files())
def test_named_file_and_test_exist(page_id, path, test):
  full = os.path.join(ROOT, path)
  assert os.path.isfile(full), '%s names missing %s' % (page_id, path)
  if test:
    assert re.search(r'def %s\(' % test, _read(full)), (
        '%s names %s::%s, which is not there' % (page_id, path, test))


def test_make_targets_named_on_the_pages_exist():
  makefile = _read(os.path.join(ROOT, 'Makefile'))
  targets = set(re.findall(r'^([\w-]+):', makefile, re.M))
  named = set()
  for page in PAGES:
    named.update(re.findall(r'`make ([\w-]+)`', _read(page)))
    for block in re.findall(r'```sh\n(.*?)```', _read(page), re.S):
      named.update(re.findall(r'^make ([\w-]+)', block, re.M))
  assert named - targets == set()


def test_testing_page_lists_every_test_file():
  listed = set(re.findall(r'`(tests/(?:system/)?test_\w+\.py)`',
                          _read(os.path.join(ROOT, 'docs', 'testing.md'))))
  on_disk = {os.path.relpath(path, ROOT)
             for folder in ('tests', 'tests/system')
             for path in glob.glob(os.path.join(ROOT, folder, 'test_*.py'))}
  assert on_disk - listed == set()


# The scripts a page's shell blocks run, and the modules defining their flags.
_SCRIPT_FLAG_MODULES = {
    'train_image_classifier.py': ['training/flags.py',
                                  'training/common_flags.py'],
    'eval_image_classifier.py': ['eval_image_classifier.py',
                                 'training/common_flags.py'],
    'download_and_convert_data.py': ['download_and_convert_data.py'],
    'export_inference_graph.py': ['exporting/flags.py',
                                  'training/common_flags.py'],
}


def _defined_flags(script):
  names = set()
  for module in _SCRIPT_FLAG_MODULES[script]:
    names.update(re.findall(r"DEFINE_(\w+)\(\s*'(\w+)'",
                            _read(os.path.join(ROOT, module))))
  booleans = {name for kind, name in names if kind in ('bool', 'boolean')}
  return ({name for _, name in names} | {'no' + name for name in booleans}
          | {'flagfile'})


def _script_commands():
  """(page, script, flag) for every flag of a script run in a shell block."""
  commands = []
  for page in PAGES:
    for block in re.findall(r'```sh\n(.*?)```', _read(page), re.S):
      for command in block.replace('\\\n', ' ').splitlines():
        for script in _SCRIPT_FLAG_MODULES:
          # This project's script, not a user's of the same name elsewhere.
          run = re.search(r'(?<![\w/])%s(.*)' % re.escape(script), command)
          if run:
            for flag in re.findall(r'--(\w+)', run.group(1)):
              commands.append((_page_id(page), script, flag))
  return sorted(set(commands))


@pytest.mark.parametrize('page_id,script,flag', _script_commands())
def test_flags_of_the_shell_commands_exist(page_id, script, flag):
  assert flag in _defined_flags(script), (
      '%s runs %s --%s, which the script does not define' % (page_id, script,
                                                            flag))
