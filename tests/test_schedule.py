"""Global batch, epochs and learning-rate schedule arithmetic; the span of
the drop-path schedule."""

import dataclasses
import functools
import logging

from absl.testing import flagsaver
import numpy as np
import pytest

from deployment import model_deploy
from deployment import update
from nets import nets_factory
from tf2_compat.slim_compat import tf
import train_image_classifier
from training import optimizers
from training import run_config
from training import schedule
from training.flags import FLAGS


def _plan(batch_size, num_clones, num_samples, num_epochs_per_decay,
          sync_replicas=False, replicas_to_aggregate=1, warmup_epochs=0.0,
          accumulation_steps=1, deployment=None,
          learning_rate_decay_type='exponential'):
  """The plan of a run with these parts, as training.run_config makes it."""
  return schedule.plan_for(
      batch_size, num_samples,
      deployment or model_deploy.DeploymentConfig(num_clones=num_clones,
                                                  clone_on_cpu=True),
      update.UpdateOptions(accumulation_steps=accumulation_steps),
      optimizers.OptimizerConfig(
          num_epochs_per_decay=num_epochs_per_decay,
          warmup_epochs=warmup_epochs, sync_replicas=sync_replicas,
          replicas_to_aggregate=replicas_to_aggregate,
          learning_rate_decay_type=learning_rate_decay_type))


@pytest.mark.parametrize(
    'batch_size,num_clones,sync,replicas,global_batch', [
        (32, 1, False, 1, 32),
        (32, 4, False, 1, 128),
        (32, 4, False, 8, 128),  # async: each worker step is a global step
        (32, 4, True, 8, 1024),
        (16, 2, True, 3, 96),
    ])
def test_global_batch(batch_size, num_clones, sync, replicas, global_batch):
  plan = _plan(batch_size, num_clones, 10000, 2.0, sync_replicas=sync,
               replicas_to_aggregate=replicas)
  assert plan.global_batch_size == global_batch


def test_decay_steps_count_epochs_whatever_the_clones():
  # 1,281,167 ImageNet images, 2 epochs per decay, 32 per clone.
  one = _plan(32, 1, 1281167, 2.0)
  four = _plan(32, 4, 1281167, 2.0)
  assert one.steps_per_epoch == pytest.approx(40036.46875)
  assert one.decay_steps == 80072
  assert four.decay_steps == 20018  # upstream kept 80072: 8 epochs
  # Either way a decay happens every 2 x 1,281,167 examples.
  assert four.decay_steps * four.global_batch_size == pytest.approx(
      2 * 1281167, rel=1e-4)


def test_sync_replicas_divide_decay_steps():
  plan = _plan(32, 2, 50000, 1.0, sync_replicas=True,
               replicas_to_aggregate=4)
  assert plan.global_batch_size == 256
  assert plan.steps_per_epoch == pytest.approx(195.3125)
  assert plan.decay_steps == 195


def test_accumulation_steps_come_from_the_update_options():
  plan = _plan(8, 2, 1437, 2.0, accumulation_steps=4)
  assert (plan.accumulation_steps, plan.global_batch_size) == (4, 64)
  assert plan.describe()[0] == (
      'global batch per step: 8 per clone x 2 clones x 4 micro-steps = 64 '
      'examples')


@pytest.mark.parametrize('num_ps_tasks,workers_per_step', [(0, 3), (1, 1)])
def test_all_reduce_workers_each_take_a_batch(num_ps_tasks, workers_per_step):
  # Without ps tasks the 3 workers all-reduce: a global step takes a batch
  # on each. With a ps task they train asynchronously.
  deployment = model_deploy.DeploymentConfig(
      num_clones=2, clone_on_cpu=True, replica_id=1, num_replicas=3,
      num_ps_tasks=num_ps_tasks)
  plan = _plan(16, 2, 1437, 2.0, deployment=deployment)
  assert plan.all_reduce_workers == workers_per_step
  assert plan.global_batch_size == 32 * workers_per_step


def test_tiny_dataset_still_decays_after_at_least_one_step():
  plan = _plan(64, 2, 10, 0.5)
  assert plan.decay_steps == 1


def test_describe_shows_how_numbers_follow_from_flags():
  plan = _plan(32, 2, 1437, 2.0, sync_replicas=True,
               replicas_to_aggregate=2, warmup_epochs=1)
  assert plan.describe() == [
      'global batch per step: 32 per clone x 2 clones x 2 replicas to '
      'aggregate = 128 examples',
      'steps per epoch: 1437 examples / 128 = 11.23',
      'decay steps: 11.23 steps per epoch x 2 epochs = 22',
      'warmup steps: 11.23 x 1 epochs = 11',
  ]


def test_describe_shows_no_decay_steps_when_the_rate_is_fixed():
  plan = _plan(32, 2, 1437, 2.0, warmup_epochs=1,
               learning_rate_decay_type='fixed')
  assert plan.describe() == [
      'global batch per step: 32 per clone x 2 clones = 64 examples',
      'steps per epoch: 1437 examples / 64 = 22.45',
      'warmup steps: 22.45 x 1 epochs = 22',
  ]


def test_unknown_decay_type_lists_known_ones():
  plan = _plan(5, 2, 100, 2.0)
  with pytest.raises(ValueError, match="decay_type must be one of "
                     "exponential, fixed, polynomial, got 'cosine'"):
    schedule.learning_rate(plan, tf.constant(0), 'cosine', 0.1)


def _rates(decay_type, steps, warmup_epochs=0.0, **kwargs):
  # 100 examples, global batch 10: 10 steps per epoch, decay every 20 steps.
  plan = _plan(5, 2, 100, 2.0, warmup_epochs=warmup_epochs)
  with tf.Graph().as_default():
    step = tf.placeholder(tf.int64, [])
    rate = schedule.learning_rate(plan, step, decay_type, 0.1, **kwargs)
    with tf.Session() as sess:
      return [sess.run(rate, {step: s}) for s in steps]


def test_exponential_decay_is_staircase_per_decay_steps():
  np.testing.assert_allclose(
      _rates('exponential', [0, 19, 20, 45], decay_factor=0.5),
      [0.1, 0.1, 0.05, 0.025], rtol=1e-6)


def test_polynomial_decay_reaches_end_rate():
  np.testing.assert_allclose(
      _rates('polynomial', [0, 10, 20, 30], end=0.02),
      [0.1, 0.06, 0.02, 0.02], rtol=1e-6)


def test_fixed_rate():
  np.testing.assert_allclose(_rates('fixed', [0, 1000]), [0.1, 0.1])


def test_warmup_rises_linearly_then_follows_the_schedule():
  # 1 warmup epoch = 10 steps.
  np.testing.assert_allclose(
      _rates('fixed', [0, 5, 10, 15], warmup_epochs=1.0),
      [0.0, 0.05, 0.1, 0.1], rtol=1e-6)


@pytest.mark.parametrize('name, max_number_of_steps, kwargs, line', [
    ('nasnet_large', 40000, {'total_training_steps': 40000},
     'drop path: keep probability scheduled over 40000 steps '
     '(--max_number_of_steps)'),
    ('nasnet_cifar', None, {},
     'drop path: keep probability scheduled over 937500 steps, the default '
     'of nasnet_cifar (no --max_number_of_steps)'),
    # No drop path in the mobile NASNet's training, none in LeNet.
    ('nasnet_mobile', 40000, {}, None),
    ('lenet', 40000, {}, None),
])
def test_drop_path_is_scheduled_over_the_run_s_steps(
    name, max_number_of_steps, kwargs, line):
  network_fn = nets_factory.get_network_fn(name, 10, is_training=True)
  assert schedule.drop_path_span(network_fn, max_number_of_steps) == (
      kwargs, line)


def test_the_training_script_gives_the_network_the_run_s_last_step(
    digits_dir, tmp_path, caplog):
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % digits_dir, '--model_name=lenet',
           '--clone_on_cpu', '--max_number_of_steps=300',
           '--train_dir=%s' % tmp_path])
    config = run_config.from_flags(run_config.FlagSnapshot.of(FLAGS), {})
  lenet_fn = config.model.network_fn
  calls = []

  @functools.wraps(lenet_fn)
  def network_fn(images, **kwargs):  # LeNet, as if it dropped paths.
    calls.append(kwargs)
    return lenet_fn(images)

  network_fn.total_training_steps = 250000
  config = dataclasses.replace(
      config, model=config.model._replace(network_fn=network_fn))
  with tf.Graph().as_default(), caplog.at_level(logging.INFO):
    train_image_classifier.build_training_graph(config)
  assert calls == [{'total_training_steps': 300}]
  assert ('drop path: keep probability scheduled over 300 steps '
          '(--max_number_of_steps)') in caplog.messages
