"""Old path of `deployment.cpu_gradients`; warns (see old_paths)."""

import old_paths

old_paths.old_module(globals(), 'deployment.cpu_gradients')
