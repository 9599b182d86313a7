"""Where benchmarks keep what they measured: benchmarks/results/<name>.md.

Every result file starts with the machine it was measured on, so a figure
quoted in docs/ can be traced to the run that produced it:

  from results import machine_context, write_result   # next to the script
  lines = ['| clones | s/step |', '|---:|---:|', '| 1 | 0.1002 |']
  path = write_result('clone_overhead', 'Clone overhead', lines,
                      argv=['--inter_op', '0,1'])
"""

import datetime
from importlib import metadata
import os
import platform
import sys

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'results')


def _cpu_model():
  try:
    with open('/proc/cpuinfo') as cpuinfo:
      for line in cpuinfo:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or 'unknown CPU'


def _vector_extensions():
  """The CPU's AVX flags: TensorFlow turns oneDNN's kernels on by default
  only where AVX-512 or AMX-class features are (TF_ENABLE_ONEDNN_OPTS
  decides otherwise), which changes its speed several times over."""
  try:
    with open('/proc/cpuinfo') as cpuinfo:
      for line in cpuinfo:
        if line.startswith('flags'):
          return ' '.join(sorted(
              flag for flag in line.split(':', 1)[1].split()
              if flag.startswith(('avx', 'amx')))) or 'no AVX'
  except OSError:
    pass
  return 'unknown'


def _version(distribution):
  try:
    return metadata.version(distribution)
  except metadata.PackageNotFoundError:
    return 'not installed'


def machine_context():
  """Markdown list items describing this machine and the packages."""
  return [
      '- date (UTC): %s' % datetime.datetime.now(
          datetime.timezone.utc).strftime('%Y-%m-%d %H:%M'),
      '- CPU: %s, %d cores usable (os.cpu_count() = %d)' % (
          _cpu_model(), len(os.sched_getaffinity(0)), os.cpu_count()),
      '- CPU vector extensions: %s; TF_ENABLE_ONEDNN_OPTS=%s' % (
          _vector_extensions(),
          os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')),
      '- TensorFlow %s, tf-slim %s, NumPy %s, Python %s' % (
          _version('tensorflow'), _version('tf-slim'), _version('numpy'),
          platform.python_version()),
  ]


def write_result(name, title, lines, argv=None, command=None,
                 directory=None):
  """Writes <directory>/<name>.md (benchmarks/results/ by default).

  Args:
    name: the benchmark, benchmarks/<name>.py; its result is <name>.md.
    title: the heading of the file.
    lines: the Markdown body (tables, notes), one string per line.
    argv: the benchmark's arguments (default: this process's), quoted in
      the command that reproduces the result.
    command: that command in full, when it is not `benchmarks/<name>.py`.
    directory: where to write instead of benchmarks/results/ (tests use a
      temporary folder).

  Returns:
    The path of the file written.
  """
  directory = directory or RESULTS_DIR
  os.makedirs(directory, exist_ok=True)
  if command is None:
    argv = sys.argv[1:] if argv is None else argv
    command = ' '.join(['.venv/bin/python benchmarks/%s.py' % name]
                       + list(argv))
  text = ['# %s' % title, '', 'Command: `%s`' % command, '',
          '## Machine', ''] + machine_context() + [''] + list(lines)
  path = os.path.join(directory, name + '.md')
  with open(path, 'w') as f:
    f.write('\n'.join(text).rstrip('\n') + '\n')
  return path


def publish(name, title, lines, argv=None, directory=None, command=None):
  """Prints `lines`, then writes them as write_result does; returns the path.

  The last step of a benchmark's main(): the table on the terminal and in
  <directory>/<name>.md, and where the file went.
  """
  print('\n' + '\n'.join(lines))
  path = write_result(name, title, lines, argv=argv, directory=directory,
                      command=command)
  print('written to %s' % path)
  return path
