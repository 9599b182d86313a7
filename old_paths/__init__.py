"""Import paths from before the split into packages, for existing users; imports tf2_compat, deployment, clusters.

Nothing in this project imports these paths; each use warns with a
DeprecationWarning that names the new one. They are:

  * the modules that left `deployment`: `deployment.slim_compat`,
    `run_slim`, `contrib_stubs` and `quiet` (now in `tf2_compat`),
    `deployment.cluster` and `deployment.launch` (now in `clusters`), with
    their `python -m` commands, and `deployment.matmul_gradient` (now
    `deployment.cpu_gradients`). They are the files of `old_paths/deployment/`,
    found under their old names because `deployment/__init__.py` adds that
    folder to the package's search path.
  * names that left a module that is still there (`MOVED_NAMES`), such as
    `clusters.cluster.start_server`: the module's `__getattr__` hands them
    to `moved_name`, so that only an old name loads this package.
"""

import importlib
import warnings

# Old module -> {name that left it: the module it lives in now}.
MOVED_NAMES = {
    'clusters.cluster': {
        'start_server': 'clusters.servers',
        'check_port': 'clusters.servers',
        'serve_until_stopped': 'clusters.servers',
        'PortUnavailable': 'clusters.servers',
        'unreachable_workers': 'clusters.peers',
        'placement_report': 'deployment.device_placement',
        'placement_by_device': 'deployment.device_placement',
        'DeviceLoad': 'deployment.device_placement',
    },
    'clusters.launch': {
        'HOST': 'clusters.machine',
        'check_memory': 'clusters.machine',
        'free_ports': 'clusters.machine',
        'make_room_for_files': 'clusters.machine',
        'mem_available_mib': 'clusters.machine',
        'exit_status': 'clusters.local_cluster',
        'tf_config': 'clusters.local_cluster',
        # Still imported by the launcher for its own use, no longer
        # exported.
        'LocalCluster': 'clusters.local_cluster',
        'TASK_MEMORY_MIB': 'clusters.machine',
    },
}


def warn(old, new, stacklevel=3):
  """Warns that `old` is an old path of `new`; the default `stacklevel`
  names the caller's caller (an old module's own file)."""
  warnings.warn('%s is an old import path; import %s instead (it will go in '
                'a later release)' % (old, new), DeprecationWarning,
                stacklevel=stacklevel)


def moved_name(module_name, name):
  """`name` of the old module `module_name`, from its new home, with a
  DeprecationWarning.

  Raises:
    AttributeError: `name` never left `module_name`.
  """
  new = MOVED_NAMES.get(module_name, {}).get(name)
  if new is None:
    raise AttributeError('module %r has no attribute %r' % (module_name,
                                                            name))
  warn('%s.%s' % (module_name, name), '%s.%s' % (new, name), stacklevel=4)
  return getattr(importlib.import_module(new), name)


def old_module(namespace, new_module_name):
  """Fills `namespace`, an old module's globals, with the public names of
  the module that replaced it (and those that left that one since), and
  warns; returns the new module."""
  new = importlib.import_module(new_module_name)
  names = getattr(new, '__all__', None) or [
      name for name in vars(new) if not name.startswith('_')]
  namespace.update({name: getattr(new, name) for name in names})
  moved = MOVED_NAMES.get(new_module_name, {})
  namespace.update({name: getattr(importlib.import_module(home), name)
                    for name, home in moved.items()})
  namespace['__all__'] = sorted(set(names) | set(moved))
  # Run as `python -m`, the module is __main__; its spec keeps the old name.
  warn(namespace['__spec__'].name, new_module_name)
  return new
