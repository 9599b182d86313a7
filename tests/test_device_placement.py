"""deployment.device_placement's placement report: what each ps task holds."""

from deployment import device_placement
from deployment import model_deploy
from tf2_compat.slim_compat import tf


def _model_on_ps(strategy, sizes):
  """Variables of the given float sizes, built through create_clones."""
  config = model_deploy.DeploymentConfig(num_ps_tasks=2, ps_strategy=strategy)

  def model_fn():
    for i, size in enumerate(sizes):
      tf.get_variable('v%d' % i, [size])

  model_deploy.create_clones(config, model_fn)
  return tf.global_variables()


def test_placement_report_round_robin(graph):
  del graph
  variables = _model_on_ps('round_robin', [100, 1, 100, 1, 100])
  assert device_placement.placement_report(variables) == [
      'ps task 0: 3 variables, 1200 bytes (0.0 MiB)',
      'ps task 1: 2 variables, 8 bytes (0.0 MiB)',
  ]


def test_placement_report_by_size_balances_bytes(graph):
  del graph
  variables = _model_on_ps('by_size', [100, 1, 100, 1, 100])
  loads = device_placement.placement_by_device(variables)
  # Each variable goes to the task holding fewer bytes, ties to task 0:
  # v0 (400 bytes) -> 0, v1 (4) -> 1, v2 (400) -> 1, v3 (4) -> 0,
  # v4 (400) -> 0. Round robin would give task 0 1200 bytes and task 1 8.
  assert [(load.task, load.num_variables, load.num_bytes)
          for load in loads] == [(0, 3, 804), (1, 2, 404)]


def test_placement_report_lists_empty_ps_tasks_and_local_variables(graph):
  del graph
  with tf.device('/job:ps/task:1/device:CPU:0'):
    tf.get_variable('on_ps', [256], dtype=tf.float64)
  tf.get_variable('local', [3])
  assert device_placement.placement_report(
      tf.global_variables(), num_ps_tasks=3) == [
          'ps task 0: 0 variables, 0 bytes (0.0 MiB)',
          'ps task 1: 1 variables, 2048 bytes (0.0 MiB)',
          'ps task 2: 0 variables, 0 bytes (0.0 MiB)',
          'device (none): 1 variables, 12 bytes (0.0 MiB)',
      ]


def test_placement_groups_device_spellings_of_one_ps_task(graph):
  del graph
  for i, device in enumerate(['/job:ps/task:0', '/job:ps/task:0/cpu:0',
                              '/job:ps/replica:0/task:0/device:CPU:0']):
    with tf.device(device):
      tf.get_variable('v%d' % i, [2])
  assert device_placement.placement_by_device(tf.global_variables()) == [
      device_placement.DeviceLoad('/job:ps/task:0', 'ps', 0, 3, 24)]


def test_other_devices_come_after_the_ps_tasks_by_name(graph):
  del graph
  for name, device in [('b', '/job:worker/task:1'), ('p', '/job:ps/task:2'),
                       ('a', '/job:worker/task:0')]:
    with tf.device(device):
      tf.get_variable(name, [1], dtype=tf.int64)
  assert [(load.device, load.task) for load in
          device_placement.placement_by_device(tf.global_variables())] == [
              ('/job:ps/task:2', 2), ('/job:worker/task:0', None),
              ('/job:worker/task:1', None)]
