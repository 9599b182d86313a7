"""ps/worker clusters: task, servers, launcher, replica sessions; imports tf2_compat, deployment.

  * `cluster`: which cluster a process belongs to, its task and server.
  * `peers`: waiting, visibly, for the tasks a worker needs.
  * `launch`: `python -m clusters.launch` runs a cluster on this machine:
    its command line; `local_cluster`, the tasks' processes; `restarts`,
    what a failed task leads to; `machine`, what the machine can hold.
  * `replica_session`: a replica's training session, the cluster check
    and the placement report.
"""
