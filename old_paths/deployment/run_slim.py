"""Old path of `tf2_compat.run_slim`, `python -m` included; warns (see old_paths)."""

import sys

import old_paths

_NEW = old_paths.old_module(globals(), 'tf2_compat.run_slim')

if __name__ == '__main__':
  sys.exit(_NEW.main())
