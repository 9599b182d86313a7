"""eval_image_classifier.py under srun with --slurm: task 0 evaluates.

`srun python eval_image_classifier.py --slurm ...` in an allocation of
several tasks starts the script once per task; without --slurm every copy
would evaluate and write the same summaries to --eval_dir.
"""

from clusters import slurm
from training.errors import UsageError


def this_task_evaluates(use_slurm):
  """Whether this process evaluates.

  Always without --slurm; with it, only task 0 of the srun step (the
  others print one line saying so, and the script exits 0).

  Raises:
    UsageError: --slurm outside a srun step.
  """
  if not use_slurm:
    return True
  try:
    rank, num_tasks = slurm.step_size()
  except ValueError as e:
    raise UsageError(str(e)) from None
  if rank == 0:
    return True
  print('srun task %d of %d: only task 0 evaluates (--slurm); nothing to do '
        'here' % (rank, num_tasks))
  return False
