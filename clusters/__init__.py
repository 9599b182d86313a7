"""ps/worker clusters: task, servers, launcher, replica sessions; imports tf2_compat, deployment.

  * `cluster`: which cluster a process belongs to, its task and server.
  * `peers`: waiting, visibly, for the tasks a worker needs.
  * `launch`: `python -m clusters.launch` runs a cluster on this machine.
  * `slurm`: the task of a srun job step, through TensorFlow's
    SlurmClusterResolver; a ps task that ends with the workers.
  * `replica_session`: a replica's training session, the cluster check
    and the placement report.
"""
