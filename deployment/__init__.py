"""Slim models over clones and replicas: the public API and its graph mechanics; imports tf2_compat.

  * `model_deploy` (with `deployment_config`): upstream Slim's API.
  * The graph mechanics it builds on: `device_placement`, `clone_losses`,
    `gradients`, `cpu_gradients`, `accumulation`, `apply_when`,
    `update`, `precision`, `collectives`, `sync_batch_norm`,
    `variable_averages`, `argument_checks`.

The modules that moved to `tf2_compat` and `clusters` keep their old paths
here (`deployment.slim_compat`, `deployment.launch`, ...) as files of
old_paths/deployment/, which warn; this package only adds that folder to
its search path, and imports none of them.
"""

import os

__path__.append(os.path.join(  # pylint: disable=undefined-variable
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'old_paths',
    'deployment'))
