"""Old path of `tf2_compat.quiet`; warns (see old_paths)."""

import old_paths

old_paths.old_module(globals(), 'tf2_compat.quiet')
