"""Old path of `clusters.launch`, `python -m` included; warns (see old_paths)."""

import sys

import old_paths

_NEW = old_paths.old_module(globals(), 'clusters.launch')

if __name__ == '__main__':
  sys.exit(_NEW.main())
