"""The public API of deployment.model_deploy and DeploymentConfig, by name
and signature, so that it changes only on purpose.

Upstream TF-Slim's model_deploy gave the first names and parameters of each
entry; every later parameter is new and keyword-only in practice, with a
default that keeps upstream's result. A change here is a change for every
Slim program that imports model_deploy: extend the tables deliberately.
"""

import inspect
import types

import pytest

from deployment import model_deploy

# name -> signature of the functions and classes model_deploy offers.
MODULE_API = {
    'BroadcastVariablesHook': '(config)',
    'Clone': '(outputs, scope, device)',
    'DeployedModel': '(train_op, summary_op, total_loss, clones)',
    'DeploymentConfig': (
        "(num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1, "
        "num_ps_tasks=0, worker_job_name='worker', ps_job_name='ps', "
        "ps_strategy='round_robin', separate_cpu_devices=False, "
        "devices_per_clone=1, collective_timeout_secs=60.0, "
        "cache_variable_reads=True)"),
    'GatheredLosses': '(losses, own_losses, regularization_loss, results)',
    'broadcast_variables': '(config, variables=None)',
    'create_clones': ("(config, model_fn, args=None, kwargs=None, "
                      "sync_batch_norm=False, precision='float32')"),
    'deploy': (
        "(config, model_fn, args=None, kwargs=None, optimizer=None, "
        "summarize_gradients=False, var_list=None, update_ops=None, "
        "variable_averages=None, variables_to_average=None, summaries=None, "
        "sync_batch_norm=False, precision='float32', update=None, "
        "replica_mean_variables=None, **update_fields)"),
    'optimize_clones': ('(clones, optimizer, regularization_losses=None, '
                        '**kwargs)'),
    'scalar_summary': '(tag, value)',
    'session_config': '(config, **kwargs)',
    'sync_batch_norm_group_size': '(config)',
}

# Upstream's names and their leading parameters, as upstream spelled them.
UPSTREAM_API = {
    'Clone': ['outputs', 'scope', 'device'],
    'DeployedModel': ['train_op', 'summary_op', 'total_loss', 'clones'],
    'DeploymentConfig': ['num_clones', 'clone_on_cpu', 'replica_id',
                         'num_replicas', 'num_ps_tasks', 'worker_job_name',
                         'ps_job_name'],
    'create_clones': ['config', 'model_fn', 'args', 'kwargs'],
    'optimize_clones': ['clones', 'optimizer', 'regularization_losses'],
    'deploy': ['config', 'model_fn', 'args', 'kwargs', 'optimizer',
               'summarize_gradients'],
}

# DeploymentConfig: properties, and methods with their signatures.
CONFIG_PROPERTIES = {
    'all_reduce_replicas', 'clone_on_cpu', 'clones_share_a_device',
    'collective_timeout_secs', 'devices_per_clone', 'is_chief', 'num_clones',
    'num_local_devices', 'num_ps_tasks', 'num_replicas', 'ps_device',
    'ps_strategy', 'replica_id', 'separate_cpu_devices', 'worker_device',
}
CONFIG_METHODS = {
    'caching_device': '(self)',
    'clone_device': '(self, clone_index)',
    'clone_devices': '(self, clone_index)',
    'clone_scope': '(self, clone_index)',
    'for_task': '(task, **kwargs)',  # new: the config of a cluster task
    'inputs_device': '(self)',
    'optimizer_device': '(self)',
    'session_config': '(self, **kwargs)',  # new: model_deploy.session_config
    'variables_device': '(self)',
    'variables_read_device': '(self)',
}
UPSTREAM_CONFIG = {
    'num_clones', 'clone_on_cpu', 'replica_id', 'num_replicas',
    'num_ps_tasks', 'ps_device', 'worker_device', 'caching_device',
    'clone_device', 'clone_scope', 'optimizer_device', 'inputs_device',
    'variables_device',
}


def _public_names(namespace):
  return {name for name in dir(namespace) if not name.startswith('_')}


def test_model_deploy_offers_exactly_the_listed_names():
  offered = {name for name in _public_names(model_deploy)
             if not isinstance(getattr(model_deploy, name), types.ModuleType)}
  assert offered == set(MODULE_API)


def test_model_deploy_all_lists_its_entry_points():
  assert set(model_deploy.__all__) <= set(MODULE_API)
  assert set(UPSTREAM_API) <= set(model_deploy.__all__)


@pytest.mark.parametrize('name', sorted(MODULE_API))
def test_model_deploy_signature_is_unchanged(name):
  assert str(inspect.signature(getattr(model_deploy, name))) == (
      MODULE_API[name])


@pytest.mark.parametrize('name', sorted(UPSTREAM_API))
def test_upstream_parameters_lead_in_upstream_order(name):
  parameters = list(inspect.signature(getattr(model_deploy, name)).parameters)
  assert parameters[:len(UPSTREAM_API[name])] == UPSTREAM_API[name]


def test_deployment_config_offers_exactly_the_listed_members():
  config_class = model_deploy.DeploymentConfig
  properties = {name for name in _public_names(config_class)
                if isinstance(getattr(config_class, name), property)}
  assert properties == CONFIG_PROPERTIES
  assert _public_names(config_class) - properties == set(CONFIG_METHODS)
  assert UPSTREAM_CONFIG <= _public_names(config_class)


@pytest.mark.parametrize('name', sorted(CONFIG_METHODS))
def test_deployment_config_method_signature_is_unchanged(name):
  method = getattr(model_deploy.DeploymentConfig, name)
  assert str(inspect.signature(method)) == CONFIG_METHODS[name]
