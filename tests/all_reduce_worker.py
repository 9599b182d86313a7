"""One all-reduce replica of tests/test_all_reduce.py's model, as a process.

  python tests/all_reduce_worker.py OUT_DIR STEPS   (TF_CONFIG set)

Trains the replica's half of the batch on 2 CPU clones, starting from its
own seed (task index + 1: the broadcast must replace it by the chief's
weights), and writes OUT_DIR/worker<i>.npz: `losses`, and the weights at
the start (`start/<name>`) and at the end (`end/<name>`).
"""

import os
import sys

import numpy as np

from clusters import cluster
from clusters import servers
from deployment import model_deploy
from tf2_compat.slim_compat import tf
from tests import test_all_reduce


def main(out_dir, steps):
  task = cluster.from_tf_config(os.environ['TF_CONFIG'])
  config = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, replica_id=task.task_index,
      num_replicas=task.num_workers, collective_timeout_secs=60)
  server = servers.start_server(task, model_deploy.session_config(config))
  x, y = test_all_reduce.data()
  run = test_all_reduce.train(
      config, test_all_reduce.replica_batches(x, y, task.task_index, 2),
      steps, master=server.target, seed=task.task_index + 1,
      session_kwargs=dict(device_filters=task.device_filters))
  arrays = {'losses': np.array(run.losses)}
  arrays.update({'start/' + k: v for k, v in run.start.items()})
  arrays.update({'end/' + k: v for k, v in run.end.items()})
  np.savez(os.path.join(out_dir, 'worker%d.npz' % task.task_index), **arrays)


if __name__ == '__main__':
  tf.disable_eager_execution()
  main(sys.argv[1], int(sys.argv[2]))
