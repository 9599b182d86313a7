"""Moved to `tf2_compat.contrib_stubs`; this old path stays for existing imports."""

from tf2_compat.contrib_stubs import *  # pylint: disable=wildcard-import,unused-wildcard-import
