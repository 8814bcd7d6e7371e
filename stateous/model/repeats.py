"""`stop_on_repeat`: when retrying a task is no use, because it fails the same way on the
same input.

The rule of a state's option, shared by `flow.py` and a served graph file, and the digest
of a token's context as it was when an attempt failed: two failures count as a repeat only
when their fingerprints (`stateous.model.fingerprints`) and these digests agree, so that a
context changed between attempts (by a routine or an operator) starts the count again.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

#: The fewest repeats that may end a task's retries: one failure is no repeat.
FEWEST_REPEATS = 2


def repeat_problem(retries: int, stop_on_repeat: object) -> str | None:
    """Say what is wrong with a state's `stop_on_repeat`, or None."""
    if stop_on_repeat is None:
        return None
    if (
        not isinstance(stop_on_repeat, int)
        or isinstance(stop_on_repeat, bool)
        or stop_on_repeat < FEWEST_REPEATS
    ):
        return f"stop_on_repeat={stop_on_repeat!r} must be a whole number, {FEWEST_REPEATS} or more"
    if not retries:
        return "stop_on_repeat= needs retries= of 1 or more: it ends the retries early"
    return None


def context_digest(context: dict[str, Any]) -> str:
    """A short id of the context: 16 hex digits, equal for equal contexts whatever the order
    of their keys."""
    canonical = msgspec.json.encode(context, order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:16]
