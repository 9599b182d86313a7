"""Moved to `clusters.cluster`; this old path stays for existing imports."""

from clusters.cluster import *  # pylint: disable=wildcard-import,unused-wildcard-import
