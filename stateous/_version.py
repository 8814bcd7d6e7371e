"""The version of Stateous, in a module of its own that every part may import."""

__version__ = "0.1.0"
