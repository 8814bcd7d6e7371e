"""Starter files that `stateous init` writes, read with importlib.resources."""
