"""Deciding a parsed guard: whether it holds for a token's context, payload and counts.

It walks the tree that `guards.parse` built, over JSON values, and must never raise
on data: a missing value reads as null, and a comparison of values of different
kinds is simply false. It must not read guard text or build nodes; `guards` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stateous.model.guards import (
    And,
    Branches,
    BranchRef,
    Compare,
    CountRef,
    CtxRef,
    Guard,
    Literal,
    Node,
    Not,
    Or,
    PayloadRef,
    Truth,
)


def evaluate(
    guard: Guard,
    *,
    ctx: Mapping[str, Any] | None,
    payload: Any,
    counts: Mapping[str, int],
    branches: Sequence[Mapping[str, Any]] | None = None,
) -> bool:
    """Decide whether the guard holds for this data; never raise on odd data.

    branches.all(...) over no entries is true and branches.any(...) is false, as
    with Python's all() and any().
    """
    scope = _Scope(ctx, payload, counts, branches, None)
    return scope.value(guard.root) is True


@dataclass(frozen=True, slots=True)
class _Scope:
    ctx: Any
    payload: Any
    counts: Any
    branches: Any
    entry: Any

    def value(self, node: Node) -> Any:
        match node:
            case Literal(value=value):
                return value
            case CtxRef(path=path):
                return _dig(self.ctx, path)
            case PayloadRef(path=path):
                return _dig(self.payload, path)
            case CountRef(event=event):
                return self.counts.get(event, 0) if isinstance(self.counts, Mapping) else 0
            case BranchRef(path=path):
                return _dig(self.entry, path)
            case Compare(op=op, left=left, right=right):
                return _compare(op, self.value(left), self.value(right))
            case Not(operand=operand):
                return self.value(operand) is not True
            case And(items=items):
                return all(self.value(item) is True for item in items)
            case Or(items=items):
                return any(self.value(item) is True for item in items)
            case Truth(operand=operand):
                return self.value(operand) is True
            case Branches(quantifier=quantifier, body=body):
                entries = self.branches if isinstance(self.branches, list | tuple) else ()
                results = (
                    _Scope(self.ctx, self.payload, self.counts, None, entry).value(body) is True
                    for entry in entries
                )
                return all(results) if quantifier == "all" else any(results)


def _dig(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(left: object, right: object) -> bool:
    """Compare two JSON values as JSON does: true is not 1, but 1 is 1.0."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) and _is_number(right):
        return left == right
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(map(_json_equal, left, right))
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(
            _json_equal(left[key], right[key]) for key in left
        )
    return left is None and right is None


def _compare(op: str, left: Any, right: Any) -> bool:
    if op == "==":
        return _json_equal(left, right)
    if op == "!=":
        return not _json_equal(left, right)
    if op in ("in", "not in"):
        if not isinstance(right, list | tuple):
            return False
        found = any(_json_equal(left, item) for item in right)
        return found if op == "in" else not found
    both_numbers = _is_number(left) and _is_number(right)
    if not (both_numbers or (isinstance(left, str) and isinstance(right, str))):
        return False
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)
