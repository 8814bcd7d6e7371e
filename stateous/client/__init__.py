"""The Python client of the control plane's HTTP API.

It speaks only HTTP, with the standard library, and imports nothing but the model.
"""

from stateous.client.client import Client
from stateous.client.http import (
    BadSetting,
    ClientError,
    NotFound,
    NotServing,
    Refused,
    Unreachable,
    Unverified,
)

__all__ = [
    "BadSetting",
    "Client",
    "ClientError",
    "NotFound",
    "NotServing",
    "Refused",
    "Unreachable",
    "Unverified",
]
