"""Runs the project's scripts as subprocesses, bounded in time."""

import os
import re
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script_env():
  env = dict(os.environ)
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'
  # A TF_CONFIG left in the caller's shell would make every run a cluster task.
  env.pop('TF_CONFIG', None)
  env['PYTHONPATH'] = REPO + os.pathsep + env.get('PYTHONPATH', '')
  return env


def run_script(script, *args, timeout=180):
  """Runs `python script args...` from the repository; returns the result.

  The output (stdout and stderr together) is in `.stdout`.
  """
  command = [sys.executable, os.path.join(REPO, script)] + list(args)
  return subprocess.run(command, cwd=REPO, env=script_env(),
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, timeout=timeout, check=False)


def start_script(script, *args):
  """Starts a script in its own process group; stop it with `kill_group`."""
  command = [sys.executable, os.path.join(REPO, script)] + list(args)
  return subprocess.Popen(command, cwd=REPO, env=script_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True)


def kill_group(process, sig=signal.SIGKILL):
  try:
    os.killpg(process.pid, sig)
  except ProcessLookupError:
    pass
  process.wait(timeout=30)


def process_alive(pid):
  """Whether `pid` runs (a zombie, dead but not reaped, does not count)."""
  try:
    with open('/proc/%d/status' % pid) as status:
      return not re.search(r'^State:\s+Z', status.read(), re.M)
  except FileNotFoundError:
    return False


def digits_accuracy(digits_dir, train_dir, *args):
  """The digits test-split accuracy (%) of train_dir's latest checkpoint,
  from eval_image_classifier.py with `args` added."""
  result = run_script('eval_image_classifier.py', '--dataset_name=digits',
                      '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
                      '--checkpoint_path=%s' % train_dir,
                      '--eval_dir=%s' % os.path.join(train_dir, 'eval'),
                      *args)
  assert result.returncode == 0, result.stdout[-3000:]
  return float(re.search(r'digits test: accuracy ([\d.]+)% on 360 examples',
                         result.stdout).group(1))
