"""ps/worker clusters: task, servers, launcher, replica sessions; imports tf2_compat, deployment.

  * `cluster`: which cluster a process belongs to and which task it is.
  * `servers`: a task's server, its port checked first.
  * `addresses`: a task's 'host:port', checked, split and probed over TCP.
  * `peers`: whether the other tasks answer: waited for, visibly, at the
    start; the gone ones named after a failure.
  * `launch`: `python -m clusters.launch` runs a cluster on this machine:
    its command line; `local_cluster`, the tasks' processes; `restarts`,
    what a failed task leads to; `machine`, what the machine can hold;
    `process_tree`, that nothing the tasks start outlives the launcher;
    `task_output`, the output relayed, whatever becomes of it;
    `task_watch`, the tasks that make no progress;
    `script_contract`, what it reads of the training script (its
    progress line, two flags), imported by both.
  * `slurm`: the task of a srun job step, through TensorFlow's
    SlurmClusterResolver, its variables checked by `srun_step`; a ps task
    that ends with the workers.
  * `replica_session`: a replica's training session, the cluster check
    and the hook that logs the placement report.
"""
