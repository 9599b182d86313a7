"""Moved to `tf2_compat.slim_compat`; this old path stays for existing imports."""

from tf2_compat.slim_compat import *  # pylint: disable=wildcard-import,unused-wildcard-import
