"""The Python client of the control plane's HTTP API.

It speaks only HTTP, with the standard library, and imports nothing but the model.
"""

from stateous.client.client import Client
from stateous.client.http import ClientError, NotFound, Refused, Unreachable

__all__ = ["Client", "ClientError", "NotFound", "Refused", "Unreachable"]
