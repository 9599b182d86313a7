"""Moved to `tf2_compat.run_slim`; this old path stays, `python -m` included."""

import sys

from tf2_compat.run_slim import *  # pylint: disable=wildcard-import,unused-wildcard-import

if __name__ == '__main__':
  sys.exit(main())
