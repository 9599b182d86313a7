"""Each package imports only the packages its __init__ docstring names.

The first docstring line of every package's __init__.py ends with its
rule: `...; imports tf2_compat, deployment.` or `...; imports no package
of this project.` This test reads that rule and every import statement of
the package's modules (by parsing them, not importing them).

Re-export modules that keep an old import path working may import their
new home (`deployment.cluster` imports `clusters.cluster`); no other
module breaks its package's rule.
"""

import ast
import os
import re
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('tf2_compat', 'deployment', 'clusters', 'nets', 'preprocessing',
            'datasets', 'training', 'exporting')
# Old paths kept as re-exports: module -> the one module it may import.
RE_EXPORTS = {
    'deployment.cluster': 'clusters.cluster',
    'deployment.launch': 'clusters.launch',
}
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
      if (top in PACKAGES and top not in allowed
          and RE_EXPORTS.get(module) != imported):
        wrong.append('%s imports %s' % (module, imported))
  assert not wrong


def test_imports_inside_functions_count_too(tmp_path):
  module = tmp_path / 'lenet.py'
  module.write_text('import os\nfrom deployment import model_deploy\n'
                    'def f():\n  import training.flags\n')
  assert list(imported_modules(str(module))) == [
      'os', 'deployment', 'training.flags']


def test_the_installed_packages_bring_every_package_they_import():
  with open(os.path.join(ROOT, 'pyproject.toml'), 'rb') as pyproject:
    include = tomllib.load(pyproject)['tool']['setuptools']['packages'][
        'find']['include']
  installed = {pattern.rstrip('*') for pattern in include}
  assert {'tf2_compat', 'deployment', 'clusters'} <= installed
  missing = {(package, needed) for package in installed
             for needed in allowed_imports(package) if needed not in installed}
  assert not missing
