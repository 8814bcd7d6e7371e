"""Fields of a model's JSON Schema: find the field a guard reads, and what it can hold.

The schemas come from msgspec or pydantic, with "$ref" pointing into the root
schema's "$defs". The lookup must stay sound for the overlap proof: where a path
may read null at run time (through a nullable union, or a key of a free-form
mapping that may be absent), the result admits null. It never invents a field
that the schema does not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_KINDS = frozenset(("null", "boolean", "integer", "number", "string", "array", "object"))
_NULL: Mapping[str, Any] = {"type": "null"}
_MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Domain:
    """The values a field can hold: some JSON kinds, or exactly the `choices`.

    "integer" is ints only; "number" is ints and floats. `minimum` bounds the
    numbers from below (counts of events are never negative).
    """

    kinds: frozenset[str]
    choices: tuple[Any, ...] | None = None
    minimum: int | None = None

    @classmethod
    def anything(cls) -> Domain:
        """Admit every JSON value, for a field whose schema says nothing."""
        return cls(_KINDS)

    @classmethod
    def counter(cls, minimum: int) -> Domain:
        """Admit the integers from `minimum` up, as count('event') yields."""
        return cls(frozenset(("integer",)), minimum=minimum)

    @classmethod
    def of(cls, choices: Sequence[Any]) -> Domain:
        """Admit exactly these values, as an enum or a const does."""
        return cls(frozenset(_kind(value) for value in choices), tuple(choices))

    def union(self, other: Domain) -> Domain:
        """Admit what either admits; an enum keeps its choices if the other side is finite."""
        if self.choices is not None or other.choices is not None:
            left, right = self._finite(), other._finite()
            if left.choices is not None and right.choices is not None:
                return Domain.of([*left.choices, *right.choices])
        minimum = None
        if self.minimum is not None and other.minimum is not None:
            minimum = min(self.minimum, other.minimum)
        return Domain(self.kinds | other.kinds, minimum=minimum)

    def _finite(self) -> Domain:
        """Spell null and booleans as choices, so that they merge with an enum."""
        if self.choices is None and self.kinds <= {"null", "boolean"}:
            values = ([None] if "null" in self.kinds else []) + (
                [True, False] if "boolean" in self.kinds else []
            )
            return Domain.of(values)
        return self


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def field_schema(schema: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any] | None:
    """Find the sub-schema of the field at `path`, or None when the model lacks it.

    Through an "anyOf"/"oneOf", the field exists when some branch has it; the
    result is then the union of the branches that have it, plus null when
    another branch (null, or one without the field) would read as null.
    """
    return _walk(schema, tuple(path), schema)


def _walk(
    node: Mapping[str, Any], path: tuple[str, ...], root: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    resolved = _resolve(node, root)
    if resolved is None or not path:
        return resolved
    union = resolved.get("anyOf", resolved.get("oneOf"))
    if isinstance(union, list):
        found = [sub for branch in union if (sub := _walk(branch, path, root)) is not None]
        if not found:
            return None
        if len(found) < len(union):
            found.append(_NULL)
        return found[0] if len(found) == 1 else {"anyOf": found}
    key, rest = path[0], path[1:]
    properties = resolved.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return _walk(properties[key], rest, root)
    extra = resolved.get("additionalProperties", properties is None)
    if extra is False or not _is_object(resolved):
        return None
    value = {"anyOf": [extra, _NULL]} if isinstance(extra, Mapping) else {}
    return _walk(value, rest, root)


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    if kind is None:
        return not ({"enum", "const"} & node.keys())
    return kind == "object" or (isinstance(kind, list) and "object" in kind)


def _resolve(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Follow "$ref" pointers (like "#/$defs/Name") from the root; None if one dangles."""
    for _ in range(_MAX_DEPTH):
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        if not ref.startswith("#"):
            return None
        target: Any = root
        for part in ref[1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return None
            target = target[part]
        if not isinstance(target, Mapping):
            return None
        node = target
    return None


def domain_of(field: Mapping[str, Any], root: Mapping[str, Any]) -> Domain:
    """Derive the values a field can hold from its schema, never fewer than it can."""
    return _domain(field, root, 0)


def _domain(node: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Domain:
    resolved = _resolve(node, root)
    if resolved is None or depth > _MAX_DEPTH:
        return Domain.anything()
    if "const" in resolved:
        return Domain.of([resolved["const"]])
    if isinstance(resolved.get("enum"), list):
        return Domain.of(resolved["enum"])
    union = resolved.get("anyOf", resolved.get("oneOf"))
    if isinstance(union, list) and union:
        domains = [_domain(branch, root, depth + 1) for branch in union]
        result = domains[0]
        for domain in domains[1:]:
            result = result.union(domain)
        return result
    kind = resolved.get("type")
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not _KINDS.issuperset(kinds):
        return Domain.anything()
    return Domain(frozenset(kinds))
