"""Old path of `clusters.cluster`; warns (see old_paths)."""

import old_paths

old_paths.old_module(globals(), 'clusters.cluster')
