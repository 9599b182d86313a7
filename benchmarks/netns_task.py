"""Runs one task of a clusters.launch.LocalCluster on its host of a
netns.Network.

LocalCluster starts `python netns_task.py SCRIPT ARGS...` for every task,
with a TF_CONFIG that names ports on 127.0.0.1. This script puts the hosts'
addresses in their place, from the environment variable SLIM_NETNS_HOSTS,

  {"ps": [["slimnet-7-1-h0", "10.99.0.1:2222"]],
   "worker": [["slimnet-7-1-h1", "10.99.0.2:2222"], ...]}

(for each task of each job, its namespace and address), and replaces
itself with `ip netns exec NAMESPACE python SCRIPT ARGS...`. The task keeps
this process's id, so the launcher's signals and its wait reach it.
"""

import json
import os
import sys

HOSTS_VARIABLE = 'SLIM_NETNS_HOSTS'


def hosts_value(network, num_ps, port=2222):
  """SLIM_NETNS_HOSTS for a cluster whose ps tasks are the network's first
  `num_ps` hosts and whose workers are the others."""
  placed = [[namespace, '%s:%d' % (address, port)]
            for namespace, address in zip(network.hosts, network.addresses)]
  return json.dumps({'ps': placed[:num_ps], 'worker': placed[num_ps:]})


def task_command(tf_config, hosts, argv, python=sys.executable):
  """(the task's TF_CONFIG on its host, the command that runs it there).

  Args:
    tf_config: the TF_CONFIG that LocalCluster gave the task (JSON).
    hosts: SLIM_NETNS_HOSTS (JSON).
    argv: the task's script and its arguments.
    python: the interpreter that runs the script.
  """
  task = json.loads(tf_config)['task']
  placed = json.loads(hosts)
  cluster = {job: [address for _, address in tasks]
             for job, tasks in placed.items()}
  namespace = placed[task['type']][task['index']][0]
  return (json.dumps({'cluster': cluster, 'task': task}),
          ['ip', 'netns', 'exec', namespace, python] + list(argv))


def main():
  tf_config, command = task_command(os.environ['TF_CONFIG'],
                                    os.environ[HOSTS_VARIABLE], sys.argv[1:])
  os.environ['TF_CONFIG'] = tf_config
  sys.stdout.flush()
  os.execvp(command[0], command)


if __name__ == '__main__':
  main()
