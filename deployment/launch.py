"""Moved to `clusters.launch`; this old path stays, `python -m` included."""

import sys

from clusters.launch import *  # pylint: disable=wildcard-import,unused-wildcard-import

if __name__ == '__main__':
  sys.exit(main())
