"""Each package imports only the packages its __init__ docstring names,
and the pages that map the packages say so.

The first docstring line of every package's __init__.py ends with its
rule: `...; imports tf2_compat, deployment.` or `...; imports no package
of this project.` This test reads that rule and every import statement of
the package's modules (by parsing them, not importing them).

The old import paths are no modules of the packages: they live in
old_paths/ (tests/test_old_import_paths.py).
"""

import ast
import os
import re
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('tf2_compat', 'deployment', 'clusters', 'nets', 'preprocessing',
            'datasets', 'training', 'exporting')
_RULE = re.compile(r'; imports (.+?)\.?$')


def allowed_imports(package):
  """The packages the first docstring line of `package` lets it import."""
  with open(os.path.join(ROOT, package, '__init__.py')) as init:
    docstring = ast.get_docstring(ast.parse(init.read()))
  match = _RULE.search(docstring.splitlines()[0])
  assert match, '%s/__init__.py: first line names no import rule' % package
  if match.group(1) == 'no package of this project':
    return set()
  return {name.strip() for name in match.group(1).split(',')}


def imported_modules(path):
  """The absolute module names that the file at `path` imports."""
  with open(path) as source:
    tree = ast.parse(source.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        yield alias.name
    elif isinstance(node, ast.ImportFrom) and node.level == 0:
      yield node.module


def modules_of(package):
  for name in sorted(os.listdir(os.path.join(ROOT, package))):
    if name.endswith('.py'):
      yield '%s.%s' % (package, name[:-3]), os.path.join(ROOT, package, name)


@pytest.mark.parametrize('package', PACKAGES)
def test_the_first_docstring_line_names_the_allowed_packages(package):
  assert allowed_imports(package) <= set(PACKAGES) - {package}


@pytest.mark.parametrize('package', PACKAGES)
def test_modules_import_only_the_packages_their_package_allows(package):
  allowed = allowed_imports(package) | {package}
  wrong = []
  for module, path in modules_of(package):
    for imported in imported_modules(path):
      top = imported.split('.')[0]
      if top in PACKAGES and top not in allowed:
        wrong.append('%s imports %s' % (module, imported))
  assert not wrong


def test_imports_inside_functions_count_too(tmp_path):
  module = tmp_path / 'lenet.py'
  module.write_text('import os\nfrom deployment import model_deploy\n'
                    'def f():\n  import training.flags\n')
  assert list(imported_modules(str(module))) == [
      'os', 'deployment', 'training.flags']


def _installed_packages():
  with open(os.path.join(ROOT, 'pyproject.toml'), 'rb') as pyproject:
    include = tomllib.load(pyproject)['tool']['setuptools']['packages'][
        'find']['include']
  return {pattern.rstrip('*') for pattern in include}


def test_the_installed_packages_bring_every_package_they_import():
  installed = _installed_packages()
  assert {'tf2_compat', 'deployment', 'clusters'} <= installed
  missing = {(package, needed) for package in installed
             for needed in allowed_imports(package) if needed not in installed}
  assert not missing


@pytest.mark.parametrize('page', ['README.md', 'docs/api.md'])
def test_the_docs_name_the_packages_pip_installs(page):
  with open(os.path.join(ROOT, page)) as text:
    # From `pip install .` to the end of its sentence, comment or block.
    said = re.search(r'pip install \.`?\s.*?installs (.*?)(?::|\.\s|\n```)',
                     text.read(), re.S)
  assert said, '%s: no sentence says what `pip install .` installs' % page
  assert set(re.findall(r'`(\w+)`', said.group(1))) == _installed_packages()


@pytest.mark.parametrize('package', ['tf2_compat', 'deployment', 'clusters'])
def test_the_package_docstring_names_every_module(package):
  with open(os.path.join(ROOT, package, '__init__.py')) as init:
    named = set(re.findall(r'`(\w+)`', ast.get_docstring(
        ast.parse(init.read()))))
  modules = {module.split('.')[1] for module, _ in modules_of(package)}
  assert modules - {'__init__'} - named == set()


def test_the_architecture_page_maps_every_package_with_its_rule():
  with open(os.path.join(ROOT, 'docs', 'architecture.md')) as page:
    rows = re.findall(r'^\| `(\w+)` \| .* \| ([\w, ]+) \|$', page.read(),
                      re.M)
  mapped = {package: (set() if rule == 'no package of this project' else
                      {name.strip() for name in rule.split(',')})
            for package, rule in rows}
  assert mapped == {package: allowed_imports(package)
                    for package in PACKAGES}
  assert [package for package, _ in rows] == list(PACKAGES)
