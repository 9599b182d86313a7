"""What the cluster launcher reads of the training script it runs.

The launcher (clusters/launch.py) never imports the script; it reads two
things of it, and both sides import this module for them:

  * the progress line that training/hooks.py's ProgressLogHook writes every
    --log_every_n_steps, made by `progress_line`:

      step 120: loss = 0.4312, learning rate = 0.05, 812.3 examples/sec

    The launcher reads the global step from it (`STEP_LINE`): how many steps
    a restart loses (clusters/restarts.py) and how long a task may go
    quiet (clusters/task_watch.py).
  * two flags of the script's command line (training/flags.py defines
    them; tests/test_script_contract.py checks the names):
    `TRAIN_DIR_FLAG`, where the latest checkpoint a restart resumes from
    is, and `SYNC_REPLICAS_FLAG`, whether a restart must take every task.
"""

import re

TRAIN_DIR_FLAG = 'train_dir'
SYNC_REPLICAS_FLAG = 'sync_replicas'

# The global step of a progress line, wherever a logger's prefix put it.
STEP_LINE = re.compile(r'\bstep (\d+): loss = ')


def progress_line(step, loss, learning_rate, examples_per_sec):
  """The progress line of global step `step`, as STEP_LINE reads it."""
  return 'step %d: loss = %.4f, learning rate = %.6g, %.1f examples/sec' % (
      step, loss, learning_rate, examples_per_sec)
