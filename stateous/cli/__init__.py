"""The `stateous` command line: the one part that may import every other part."""
