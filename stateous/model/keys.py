"""Key expressions: the value of a token's context that names its fairness key.

A key expression is written in the guard language but reads one value, `ctx['team']`
or `ctx['repo']['owner']`; it is parsed once (the compiler refuses any other
expression, with its column) and read for each task queued. A value that is missing
reads as the empty key, so every task has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from stateous.model.guards import CtxRef, GuardSyntaxError, Truth, parse


def key_path(text: str) -> tuple[str, ...]:
    """The path into the context that a key expression reads; `GuardSyntaxError` when the
    text does not parse, or reads anything but one value of the context."""
    root = parse(text).root
    if isinstance(root, Truth) and isinstance(root.operand, CtxRef):
        return root.operand.path
    raise GuardSyntaxError("a key expression reads one value of the context: ctx['key']", 1)


def key_value(path: tuple[str, ...], ctx: Mapping[str, Any]) -> str:
    """The key a context gives: a string as it is, any other value as its JSON text, a
    missing one as the empty key."""
    value: Any = ctx
    for step in path:
        value = value.get(step) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()
