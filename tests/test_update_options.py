"""update.UpdateOptions: checked once, on creation; read-only afterwards."""

import dataclasses

import numpy as np
import pytest

from deployment import model_deploy
from deployment import update
from deployment.deployment_config import uses_all_reduce
from tf2_compat.slim_compat import tf


@pytest.mark.parametrize('kwargs,message', [
    (dict(accumulation_steps=0),
     'accumulation_steps must be an integer >= 1, got 0'),
    (dict(accumulation_steps=True),
     'accumulation_steps must be an integer >= 1, got True'),
    (dict(clip_gradient_norm=0.0), 'clip_gradient_norm must be > 0'),
    (dict(all_reduce_buffer_bytes=0),
     'all_reduce_buffer_bytes must be an integer >= 1, got 0'),
    (dict(replica_averaging_steps=0), r'replica_averaging_steps must be an '
     r'integer >= 1 \(or None\), got 0'),
])
def test_bad_option_is_named_on_creation(kwargs, message):
  with pytest.raises(ValueError, match=message):
    update.UpdateOptions(**kwargs)


def test_options_are_read_only():
  options = update.UpdateOptions(accumulation_steps=2)
  with pytest.raises(dataclasses.FrozenInstanceError):
    options.accumulation_steps = 3


def test_options_hold_only_the_update():
  assert [field.name for field in dataclasses.fields(update.UpdateOptions)
          ] == ['accumulation_steps', 'clip_gradient_norm', 'loss_scale',
                'all_reduce_buffer_bytes', 'replica_averaging_steps',
                'gradient_compression']


def test_replica_averaging_needs_all_reduce_replicas():
  options = update.UpdateOptions(replica_averaging_steps=2)
  options.check_deployment(model_deploy.DeploymentConfig(num_replicas=2))
  with pytest.raises(ValueError, match='replica_averaging_steps=2 needs '
                     'all-reduce replicas'):
    options.check_deployment(model_deploy.DeploymentConfig())


@pytest.mark.parametrize('num_replicas,num_ps_tasks,expected', [
    (1, 0, False), (2, 0, True), (2, 1, False), (1, 1, False)])
def test_several_replicas_without_ps_all_reduce(num_replicas, num_ps_tasks,
                                                expected):
  assert uses_all_reduce(num_replicas, num_ps_tasks) == expected
  config = model_deploy.DeploymentConfig(num_replicas=num_replicas,
                                         num_ps_tasks=num_ps_tasks)
  assert config.all_reduce_replicas == expected


@pytest.mark.parametrize('config', [
    model_deploy.DeploymentConfig(),
    model_deploy.DeploymentConfig(num_clones=3, clone_on_cpu=True,
                                  separate_cpu_devices=True),
    model_deploy.DeploymentConfig(num_replicas=2, replica_id=1),
])
def test_session_config_function_is_the_configs_method(config):
  assert model_deploy.session_config(config, allow_soft_placement=True) == (
      config.session_config(allow_soft_placement=True))
  assert isinstance(config.session_config(), tf.ConfigProto)


# A bound beyond float32 is inf in the graph: every weight went NaN after
# one step, without a word, before UpdateOptions refused it.
@pytest.mark.parametrize('kwargs,error,message', [
    (dict(clip_gradient_norm=float('inf')), ValueError,
     r"clip_gradient_norm must be > 0 and at most 3.402823e\+38, float32's "
     r'largest \(or None: no clipping\), got inf'),
    (dict(clip_gradient_norm=1e39), ValueError, r'got 1e\+39'),
    (dict(clip_gradient_norm=float('nan')), ValueError, 'got nan'),
    (dict(clip_gradient_norm='5'), TypeError,
     r"clip_gradient_norm must be a number \(or None: no clipping\), got "
     r"the str '5'"),
    (dict(clip_gradient_norm=True), TypeError, 'got the bool True'),
    (dict(loss_scale=2.0), TypeError,
     r'loss_scale must be a deployment.precision.LossScale .*, got the '
     r'float 2.0'),
    (dict(gradient_compression=16), ValueError,
     "gradient_compression must be one of 'none', 'fp16', 'bf16', got 16"),
])
def test_a_value_of_the_wrong_kind_or_beyond_float32_is_named(kwargs, error,
                                                               message):
  with pytest.raises(error, match=message):
    update.UpdateOptions(**kwargs)


def test_the_largest_float32_clipping_norm_is_taken():
  norm = float(np.finfo(np.float32).max)
  assert update.UpdateOptions(clip_gradient_norm=norm).clip_gradient_norm == (
      norm)
  assert update.UpdateOptions(clip_gradient_norm=5).clip_gradient_norm == 5
