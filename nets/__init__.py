"""Slim network definitions and their factory; imports tf2_compat."""
