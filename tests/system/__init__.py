"""Tests that need root and system services: run by `make test-system`."""
