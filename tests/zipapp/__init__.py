"""Tests of dist/stateous.pyz, run by each installed target CPython in isolated mode."""
