"""Moved to `tf2_compat.quiet`; this old path stays for existing imports."""

from tf2_compat.quiet import *  # pylint: disable=wildcard-import,unused-wildcard-import
