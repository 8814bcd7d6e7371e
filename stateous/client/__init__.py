"""The Python client of the control plane's HTTP API.

It speaks only HTTP, with the standard library, and imports nothing but the model.
"""
