"""The check of each JSON type for `validation`, and the failure that every check raises.

Booleans and null; numbers with their bounds; strings with their lengths and
pattern; arrays with their items, length and uniqueness; objects with their
fields, defaults, extra keys and size. Each check returns a copy of the value with
defaults filled and never mutates its input. It must not follow `$ref`s or combine
schemas (const, enum, allOf, anyOf, oneOf, not): `validation` does that, and hands
in the function that compiles each sub-schema.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], Any]
#: Compiles a sub-schema (an item's, a field's) into its check.
Compile = Callable[[Any], Check]

#: What a missing field reads as, so that a field holding null is told apart.
MISSING = object()


class Fail(Exception):
    """Carry a failure up the closures; each container adds its key on the way out."""

    def __init__(self, parts: list[str | int], reason: str) -> None:
        super().__init__(reason)
        self.parts = parts
        self.reason = reason


def show(value: Any) -> str:
    """Return a short repr of a value for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def freeze(value: Any) -> Any:
    """Return a hashable key equal for JSON-equal values (1 == 1.0, but True != 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("list", tuple(freeze(item) for item in value))
    if isinstance(value, dict):
        return ("dict", frozenset((key, freeze(item)) for key, item in value.items()))
    return value


def _clone(value: Any) -> Any:
    """Deep-copy a JSON value; a tuple becomes a list, as it would in JSON."""
    if isinstance(value, list | tuple):
        return [_clone(item) for item in value]
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    if isinstance(value, str | int | float | type(None)):
        return value
    return copy.deepcopy(value)


def accept(value: Any) -> Any:
    """The check of a schema that takes every value: `true`, `{}`, or an unknown type."""
    return value


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _characters(count: int) -> str:
    return f"{count} character" if count == 1 else f"{count} characters"


def type_check(schema: Mapping[str, Any], name: str, compile_sub: Compile) -> Check:
    """The check of one JSON type with its keywords; an unknown type name accepts every value."""
    if name == "integer":
        return _number(schema, integer=True)
    if name == "number":
        return _number(schema, integer=False)
    if name == "string":
        return _string(schema)
    if name == "array":
        return _array(schema, compile_sub)
    if name == "object":
        return _object(schema, compile_sub)
    if name == "boolean":

        def boolean(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise Fail([], f"expected a boolean, got {show(value)}")

        return boolean
    if name == "null":

        def null(value: Any) -> Any:
            if value is None:
                return value
            raise Fail([], f"expected null, got {show(value)}")

        return null
    return accept


def _number(schema: Mapping[str, Any], *, integer: bool) -> Check:
    """An integer or a number (1.0 counts as an integer, true as neither), within its bounds."""
    limits = _limits(schema)
    expected = "an integer" if integer else "a number"

    def check(value: Any) -> Any:
        if type(value) is not int and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (integer and isinstance(value, float) and not value.is_integer())
        ):
            raise Fail([], f"expected {expected}, got {show(value)}")
        for limit in limits:
            limit(value)
        return value

    return check


def _limits(schema: Mapping[str, Any]) -> list[Callable[[Any], None]]:
    """Compile the numeric bounds of a schema."""
    limits: list[Callable[[Any], None]] = []

    def bound(word: str, passes: Callable[[Any, Any], bool], phrase: str) -> None:
        edge = schema.get(word)
        if isinstance(edge, int | float) and not isinstance(edge, bool):

            def limit(value: Any) -> None:
                if not passes(value, edge):
                    raise Fail([], f"must be {phrase} {show(edge)}, got {show(value)}")

            limits.append(limit)

    bound("minimum", lambda value, edge: value >= edge, "at least")
    bound("maximum", lambda value, edge: value <= edge, "at most")
    bound("exclusiveMinimum", lambda value, edge: value > edge, "greater than")
    bound("exclusiveMaximum", lambda value, edge: value < edge, "less than")
    bound("multipleOf", _is_multiple, "a multiple of")
    return limits


def _string(schema: Mapping[str, Any]) -> Check:
    """A string, within its lengths, matching its pattern anywhere."""
    shortest = schema.get("minLength")
    longest = schema.get("maxLength")
    pattern = schema.get("pattern")
    regex = re.compile(pattern) if isinstance(pattern, str) else None
    plain = shortest is None and longest is None and regex is None

    def check(value: Any) -> Any:
        if not isinstance(value, str):
            raise Fail([], f"expected a string, got {show(value)}")
        if plain:
            return value
        if shortest is not None and len(value) < shortest:
            reason = f"must be at least {_characters(shortest)} long, got {show(value)}"
            raise Fail([], reason)
        if longest is not None and len(value) > longest:
            reason = f"must be at most {_characters(longest)} long, got {show(value)}"
            raise Fail([], reason)
        if regex is not None and regex.search(value) is None:
            raise Fail([], f"must match {pattern!r}, got {show(value)}")
        return value

    return check


def _array(schema: Mapping[str, Any], compile_sub: Compile) -> Check:
    """An array: its length and uniqueness, then each item by position or by `items`."""
    fewest = schema.get("minItems")
    most = schema.get("maxItems")
    unique = schema.get("uniqueItems") is True
    rest = schema.get("items")
    if isinstance(rest, list):  # the older tuple form: items as a list, then additionalItems
        prefix = [compile_sub(item) for item in rest]
        rest = schema.get("additionalItems")
    else:
        prefix = [compile_sub(item) for item in schema.get("prefixItems", ())]
    rest_check = None if rest is None or rest is True or rest is False else compile_sub(rest)
    closed = rest is False

    def each(value: list[Any]) -> list[Any]:
        if not prefix:
            if rest_check is None:
                if closed and value:
                    raise Fail([0], "is not allowed (the array must be empty)")
                return list(value)
            done: list[Any] = []
            try:
                for item in value:
                    done.append(rest_check(item))
            except Fail as ex:
                ex.parts.append(len(done))
                raise
            return done
        out = []
        for index, item in enumerate(value):
            check = prefix[index] if index < len(prefix) else rest_check
            if check is None:
                if closed:
                    reason = f"is not allowed (the array has at most {_items(len(prefix))})"
                    raise Fail([index], reason)
                out.append(item)
                continue
            try:
                out.append(check(item))
            except Fail as ex:
                ex.parts.append(index)
                raise
        return out

    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise Fail([], f"expected an array, got {show(value)}")
        count = len(value)
        if fewest is not None and count < fewest:
            raise Fail([], f"must have at least {_items(fewest)}, got {count}")
        if most is not None and count > most:
            raise Fail([], f"must have at most {_items(most)}, got {count}")
        if unique:
            seen: set[Any] = set()
            for item in value:
                key = freeze(item)
                if key in seen:
                    raise Fail([], f"must not repeat items, got {show(item)} twice")
                seen.add(key)
        return each(value)

    return check


def _object(schema: Mapping[str, Any], compile_sub: Compile) -> Check:
    """An object: its fields with their defaults, then the keys it does not list, then its size."""
    required = [name for name in schema.get("required", ()) if isinstance(name, str)]
    properties: Mapping[str, Any] = schema.get("properties", {})
    fields = tuple(
        (
            name,
            compile_sub(sub),
            name in required,
            isinstance(sub, Mapping) and "default" in sub,
            sub.get("default") if isinstance(sub, Mapping) else None,
            isinstance(sub, Mapping) and isinstance(sub.get("default"), list | tuple | dict),
        )
        for name, sub in properties.items()
    )
    known = frozenset(properties)
    unlisted = [name for name in required if name not in known]
    patterns = [
        (re.compile(pattern), compile_sub(sub))
        for pattern, sub in schema.get("patternProperties", {}).items()
    ]
    extra = schema.get("additionalProperties", True)
    closed = extra is False
    extra_check = None if extra is True or extra is False else compile_sub(extra)
    fewest = schema.get("minProperties")
    most = schema.get("maxProperties")

    def extras(value: dict[Any, Any], out: dict[Any, Any]) -> None:
        for key, item in value.items():
            if not isinstance(key, str):
                raise Fail([], f"expected an object with string keys, got key {show(key)}")
            matched = False
            for regex, sub in patterns:
                if regex.search(key):
                    matched = True
                    try:
                        out[key] = sub(out.get(key, item))
                    except Fail as ex:
                        ex.parts.append(key)
                        raise
            if matched or key in known:
                continue
            if closed:
                raise Fail([key], "is not allowed (the model has no such field)")
            if extra_check is None:
                out[key] = item
                continue
            try:
                out[key] = extra_check(item)
            except Fail as ex:
                ex.parts.append(key)
                raise

    def check(value: Any) -> Any:
        if not isinstance(value, dict):
            raise Fail([], f"expected an object, got {show(value)}")
        out = {}
        present = 0
        for name, sub, needed, has_default, default, mutable in fields:
            item = value.get(name, MISSING)
            if item is not MISSING:
                present += 1
                try:
                    out[name] = sub(item)
                except Fail as ex:
                    ex.parts.append(name)
                    raise
            elif needed:
                raise Fail([name], "is required")
            elif has_default:
                out[name] = _clone(default) if mutable else default
        for name in unlisted:
            if name not in value:
                raise Fail([name], "is required")
        if present != len(value) or patterns:
            extras(value, out)
        count = len(value)
        if fewest is not None and count < fewest:
            raise Fail([], f"must have at least {fewest} fields, got {count}")
        if most is not None and count > most:
            raise Fail([], f"must have at most {most} fields, got {count}")
        return out

    return check


def _is_multiple(value: int | float, step: int | float) -> bool:
    """Tell whether a number is a whole multiple of a step, allowing float rounding."""
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    if not math.isfinite(value) or step == 0:
        return False
    quotient = value / step
    return abs(quotient - round(quotient)) <= 1e-9 * max(1.0, abs(quotient))
