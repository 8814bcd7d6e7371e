"""Check token contexts and event payloads against the JSON Schemas of their models.

The schemas are the ones msgspec and pydantic v2 emit; each is compiled once into
nested closures, which check a value and return a copy of it with defaults filled.
It never mutates its input, never imports a third-party validator, and never
walks the schema again once compiled; unknown keywords are ignored.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["Invalid", "Validator", "compile_schema"]

Validator = Callable[[Any, str], Any]
_Check = Callable[[Any], Any]

_MISSING = object()
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING = ("minLength", "maxLength", "pattern")
_ARRAY = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")
_OBJECT = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
)
_KINDS: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}
_ORDER = ("boolean", "integer", "number", "string", "array", "object", "null")
_NAMES = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


class Invalid(ValueError):
    """A value that does not fit its schema; `path` names the field: 'context.items[2].name'."""

    path: str
    reason: str

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class _Fail(Exception):
    """Carry a failure up the closures; each container adds its key on the way out."""

    def __init__(self, parts: list[str | int], reason: str) -> None:
        super().__init__(reason)
        self.parts = parts
        self.reason = reason


def compile_schema(schema: Mapping[str, Any]) -> Validator:
    """Compile a JSON Schema into a function that checks a value and fills its defaults."""
    check = _Compiler(schema).compile(schema)

    def validate(value: Any, root: str) -> Any:
        try:
            return check(value)
        except _Fail as ex:
            raise Invalid(_render(root, ex.parts), ex.reason) from None

    return validate


def _render(root: str, parts: list[str | int]) -> str:
    """Write the path of a failure, outermost first."""
    text = [root]
    for part in reversed(parts):
        if isinstance(part, int):
            text.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            text.append(f".{part}")
        else:
            text.append(f"[{json.dumps(part)}]")
    return "".join(text)


def _show(value: Any) -> str:
    """Return a short repr of a value for a message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: Any) -> str | None:
    """Return the JSON type of a value, or None when it has none."""
    kind = _KINDS.get(type(value))
    if kind is not None:
        return kind
    for cls, name in _KINDS.items():
        if isinstance(value, cls):
            return name
    return None


def _fits(value: Any, kinds: frozenset[str] | None) -> bool:
    """Tell whether a value's JSON type is among the kinds a schema can accept."""
    if kinds is None:
        return True
    kind = _kind(value)
    if kind == "integer" or (kind == "number" and value.is_integer()):
        return "integer" in kinds or "number" in kinds
    return kind in kinds


def _names(kinds: Iterable[str]) -> str:
    """Join JSON type names into 'an integer, a string or null'."""
    words = [_NAMES[kind] for kind in _ORDER if kind in set(kinds)]
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _freeze(value: Any) -> Any:
    """Return a hashable key equal for JSON-equal values (1 == 1.0, but True != 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("list", tuple(_freeze(item) for item in value))
    if isinstance(value, dict):
        return ("dict", frozenset((key, _freeze(item)) for key, item in value.items()))
    return value


def _one_of_values(values: list[Any]) -> str:
    """Name allowed values: "'a'" or "one of 'a', 'b'"."""
    if len(values) == 1:
        return _show(values[0])
    shown = ", ".join(_show(value) for value in values[:10])
    return f"one of {shown}{', ...' if len(values) > 10 else ''}"


def _clone(value: Any) -> Any:
    """Deep-copy a JSON value; a tuple becomes a list, as it would in JSON."""
    if isinstance(value, list | tuple):
        return [_clone(item) for item in value]
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    if isinstance(value, str | int | float | type(None)):
        return value
    return copy.deepcopy(value)


def _accept(value: Any) -> Any:
    return value


def _reject(value: Any) -> Any:
    raise _Fail([], "is not allowed")


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _characters(count: int) -> str:
    return f"{count} character" if count == 1 else f"{count} characters"


def _chain(steps: list[_Check]) -> _Check:
    """Run checks one after the other, each on the value the last one returned."""
    if len(steps) == 2:
        first, second = steps

        def both(value: Any) -> Any:
            return second(first(value))

        return both

    def chained(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return chained


class _Compiler:
    """Turn the schemas of one document into closures, one per `$ref` at most."""

    def __init__(self, root: Mapping[str, Any] | bool) -> None:
        self.root = root
        self.refs: dict[str, _Check] = {}
        self.pending: dict[str, list[_Check | None]] = {}

    # -- references ---------------------------------------------------------

    def resolve(self, ref: str) -> Any:
        """Return the schema a `$ref` points at, inside this document."""
        if not ref.startswith("#"):
            raise ValueError(f"cannot resolve $ref {ref!r}: only refs inside the schema work")
        node: Any = self.root
        for raw in ref[1:].split("/")[1:]:
            key = raw.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(key)] if isinstance(node, list) else node[key]
            except (KeyError, IndexError, ValueError, TypeError):
                if self.names_root(ref):
                    return self.root
                raise ValueError(f"cannot resolve $ref {ref!r}") from None
        return node

    def names_root(self, ref: str) -> bool:
        """Tell whether a dangling ref names the root model by its title.

        A recursive msgspec root lifted out of its components still points at
        '#/$defs/Name' while '$defs' no longer holds it; that ref means the root.
        """
        prefix, _, name = ref.rpartition("/")
        return (
            prefix in ("#/$defs", "#/definitions")
            and isinstance(self.root, Mapping)
            and self.root.get("title") == name
        )

    def ref(self, ref: str) -> _Check:
        """Compile a `$ref` once; a ref met again while compiling gets a forwarder."""
        if ref in self.refs:
            return self.refs[ref]
        if ref in self.pending:
            waiting = self.pending[ref]

            def forward(value: Any) -> Any:
                return waiting[0](value)  # type: ignore[misc]

            return forward
        cell: list[_Check | None] = [None]
        self.pending[ref] = cell
        try:
            check = self.compile(self.resolve(ref))
        finally:
            del self.pending[ref]
        cell[0] = check
        self.refs[ref] = check
        return check

    def kinds(self, schema: Any, seen: frozenset[str] = frozenset()) -> frozenset[str] | None:
        """Return the JSON type families a schema can accept, or None for any."""
        if schema is True or schema == {}:
            return None
        if schema is False:
            return frozenset()
        found: frozenset[str] | None = None

        def narrow(more: frozenset[str] | None) -> None:
            nonlocal found
            if more is not None:
                found = more if found is None else found & more

        if "$ref" in schema and schema["$ref"] not in seen:
            narrow(self.kinds(self.resolve(schema["$ref"]), seen | {schema["$ref"]}))
        declared = schema.get("type")
        if declared is not None:
            narrow(frozenset([declared] if isinstance(declared, str) else declared))
        if "const" in schema:
            narrow(frozenset({_kind(schema["const"]) or "object"}))
        if isinstance(schema.get("enum"), list):
            narrow(frozenset(_kind(value) or "object" for value in schema["enum"]))
        for word in ("anyOf", "oneOf"):
            if isinstance(schema.get(word), list):
                branches = [self.kinds(branch, seen) for branch in schema[word]]
                if all(branch is not None for branch in branches):
                    narrow(frozenset().union(*branches))  # type: ignore[arg-type]
        for branch in schema.get("allOf", ()):
            narrow(self.kinds(branch, seen))
        return found

    # -- schemas ------------------------------------------------------------

    def compile(self, schema: Any) -> _Check:
        """Compile one schema into a check that returns the value with defaults filled."""
        if schema is True:
            return _accept
        if schema is False:
            return _reject
        if not isinstance(schema, Mapping):
            raise ValueError(f"a schema must be an object or a boolean, got {_show(schema)}")
        steps: list[_Check] = []
        if "const" in schema:
            steps.append(self.const(schema["const"]))
        if isinstance(schema.get("enum"), list):
            steps.append(self.enum(schema["enum"]))
        if isinstance(schema.get("$ref"), str):
            steps.append(self.ref(schema["$ref"]))
        typed = self.typed(schema)
        if typed is not None:
            steps.append(typed)
        for branch in schema.get("allOf", ()):
            steps.append(self.compile(branch))
        for word in ("anyOf", "oneOf"):
            if isinstance(schema.get(word), list):
                steps.append(self.union(schema[word], schema.get("discriminator")))
        if "not" in schema:
            steps.append(self.negate(schema["not"]))
        if not steps:
            return _accept
        return steps[0] if len(steps) == 1 else _chain(steps)

    def const(self, expected: Any) -> _Check:
        key = _freeze(expected)

        def check(value: Any) -> Any:
            if _freeze(value) != key:
                raise _Fail([], f"expected {_show(expected)}, got {_show(value)}")
            return value

        return check

    def enum(self, values: list[Any]) -> _Check:
        keys = {_freeze(value) for value in values}
        strings = {value for value in values if isinstance(value, str)}
        allowed = _one_of_values(values)

        def check(value: Any) -> Any:
            if type(value) is str:
                if value in strings:
                    return value
            elif _freeze(value) in keys:
                return value
            raise _Fail([], f"expected {allowed}, got {_show(value)}")

        return check

    def negate(self, schema: Any) -> _Check:
        inner = self.compile(schema)

        def check(value: Any) -> Any:
            try:
                inner(value)
            except _Fail:
                return value
            raise _Fail([], "must not match the excluded shape")

        return check

    def union(self, schemas: list[Any], discriminator: Any) -> _Check:
        """Compile anyOf/oneOf: the discriminator picks the branch, or the first match wins."""
        branches = [self.compile(branch) for branch in schemas]
        if isinstance(discriminator, Mapping) and isinstance(
            discriminator.get("propertyName"), str
        ):
            tagged = self.tagged(schemas, discriminator)
            if tagged is not None:
                return tagged
        kinds = [self.kinds(branch) for branch in schemas]
        known = all(kind is not None for kind in kinds)
        expected = _names(frozenset().union(*kinds)) if known else ""  # type: ignore[arg-type]

        def check(value: Any) -> Any:
            failures: list[_Fail] = []
            for branch in branches:
                try:
                    return branch(value)
                except _Fail as ex:
                    failures.append(ex)
            fitting = [index for index, kind in enumerate(kinds) if _fits(value, kind)]
            if len(fitting) == 1:
                raise failures[fitting[0]]
            if not fitting and known:
                raise _Fail([], f"expected {expected}, got {_show(value)}")
            raise _Fail([], "matches none of the allowed shapes")

        return check

    def tagged(self, schemas: list[Any], discriminator: Mapping[str, Any]) -> _Check | None:
        """Compile a discriminated union, or return None when its tags cannot be found."""
        field = discriminator["propertyName"]
        choices: dict[str, _Check] = {}
        mapping = discriminator.get("mapping")
        if isinstance(mapping, Mapping) and mapping:
            for tag, ref in mapping.items():
                choices[str(tag)] = self.ref(ref)
        else:
            for schema in schemas:
                target = schema
                while isinstance(target, Mapping) and isinstance(target.get("$ref"), str):
                    target = self.resolve(target["$ref"])
                prop = target.get("properties", {}).get(field, {})
                tags = [prop["const"]] if "const" in prop else prop.get("enum", [])
                if not tags:
                    return None
                branch = self.compile(schema)
                for tag in tags:
                    choices[str(tag)] = branch
        allowed = _one_of_values(list(choices))

        def check(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _Fail([], f"expected an object, got {_show(value)}")
            tag = value.get(field, _MISSING)
            if tag is _MISSING:
                raise _Fail([field], "is required")
            key = tag if isinstance(tag, str) else str(tag) if type(tag) is int else None
            branch = choices.get(key) if key is not None else None
            if branch is None:
                raise _Fail([field], f"expected {allowed}, got {_show(tag)}")
            return branch(value)

        return check

    # -- types --------------------------------------------------------------

    def typed(self, schema: Mapping[str, Any]) -> _Check | None:
        """Compile `type` with the keywords of each type; without `type`, they apply by kind."""
        declared = schema.get("type")
        if declared is None:
            table: dict[str, _Check] = {}
            if any(word in schema for word in _NUMERIC):
                table["integer"] = table["number"] = self.number(schema, integer=False)
            if any(word in schema for word in _STRING):
                table["string"] = self.string(schema)
            if any(word in schema for word in _ARRAY):
                table["array"] = self.array(schema)
            if any(word in schema for word in _OBJECT):
                table["object"] = self.object(schema)
            if not table:
                return None

            def by_kind(value: Any) -> Any:
                check = table.get(_kind(value))  # type: ignore[arg-type]
                return value if check is None else check(value)

            return by_kind
        names = [declared] if isinstance(declared, str) else list(declared)
        checks = {name: self.one_type(schema, name) for name in names}
        if len(checks) == 1:
            return next(iter(checks.values()))
        table = dict(checks)
        if "integer" in table and "number" not in table:
            table["number"] = table["integer"]
        if "number" in table:
            table["integer"] = table["number"]
        expected = _names(names)

        def any_type(value: Any) -> Any:
            check = table.get(_kind(value))  # type: ignore[arg-type]
            if check is None:
                raise _Fail([], f"expected {expected}, got {_show(value)}")
            return check(value)

        return any_type

    def one_type(self, schema: Mapping[str, Any], name: str) -> _Check:
        if name == "integer":
            return self.number(schema, integer=True)
        if name == "number":
            return self.number(schema, integer=False)
        if name == "string":
            return self.string(schema)
        if name == "array":
            return self.array(schema)
        if name == "object":
            return self.object(schema)
        if name == "boolean":

            def boolean(value: Any) -> Any:
                if value is True or value is False:
                    return value
                raise _Fail([], f"expected a boolean, got {_show(value)}")

            return boolean
        if name == "null":

            def null(value: Any) -> Any:
                if value is None:
                    return value
                raise _Fail([], f"expected null, got {_show(value)}")

            return null
        return _accept

    def number(self, schema: Mapping[str, Any], *, integer: bool) -> _Check:
        limits = self.limits(schema)
        expected = "an integer" if integer else "a number"

        def check(value: Any) -> Any:
            if type(value) is not int and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or (integer and isinstance(value, float) and not value.is_integer())
            ):
                raise _Fail([], f"expected {expected}, got {_show(value)}")
            for limit in limits:
                limit(value)
            return value

        return check

    def limits(self, schema: Mapping[str, Any]) -> list[Callable[[Any], None]]:
        """Compile the numeric bounds of a schema."""
        limits: list[Callable[[Any], None]] = []

        def bound(word: str, passes: Callable[[Any, Any], bool], phrase: str) -> None:
            edge = schema.get(word)
            if isinstance(edge, int | float) and not isinstance(edge, bool):

                def limit(value: Any) -> None:
                    if not passes(value, edge):
                        raise _Fail([], f"must be {phrase} {_show(edge)}, got {_show(value)}")

                limits.append(limit)

        bound("minimum", lambda value, edge: value >= edge, "at least")
        bound("maximum", lambda value, edge: value <= edge, "at most")
        bound("exclusiveMinimum", lambda value, edge: value > edge, "greater than")
        bound("exclusiveMaximum", lambda value, edge: value < edge, "less than")
        bound("multipleOf", _is_multiple, "a multiple of")
        return limits

    def string(self, schema: Mapping[str, Any]) -> _Check:
        shortest = schema.get("minLength")
        longest = schema.get("maxLength")
        pattern = schema.get("pattern")
        regex = re.compile(pattern) if isinstance(pattern, str) else None
        plain = shortest is None and longest is None and regex is None

        def check(value: Any) -> Any:
            if not isinstance(value, str):
                raise _Fail([], f"expected a string, got {_show(value)}")
            if plain:
                return value
            if shortest is not None and len(value) < shortest:
                reason = f"must be at least {_characters(shortest)} long, got {_show(value)}"
                raise _Fail([], reason)
            if longest is not None and len(value) > longest:
                reason = f"must be at most {_characters(longest)} long, got {_show(value)}"
                raise _Fail([], reason)
            if regex is not None and regex.search(value) is None:
                raise _Fail([], f"must match {pattern!r}, got {_show(value)}")
            return value

        return check

    def array(self, schema: Mapping[str, Any]) -> _Check:
        fewest = schema.get("minItems")
        most = schema.get("maxItems")
        unique = schema.get("uniqueItems") is True
        rest = schema.get("items")
        if isinstance(rest, list):  # the older tuple form: items as a list, then additionalItems
            prefix = [self.compile(item) for item in rest]
            rest = schema.get("additionalItems")
        else:
            prefix = [self.compile(item) for item in schema.get("prefixItems", ())]
        rest_check = None if rest is None or rest is True or rest is False else self.compile(rest)
        closed = rest is False

        def each(value: list[Any]) -> list[Any]:
            if not prefix:
                if rest_check is None:
                    if closed and value:
                        raise _Fail([0], "is not allowed (the array must be empty)")
                    return list(value)
                done: list[Any] = []
                try:
                    for item in value:
                        done.append(rest_check(item))
                except _Fail as ex:
                    ex.parts.append(len(done))
                    raise
                return done
            out = []
            for index, item in enumerate(value):
                check = prefix[index] if index < len(prefix) else rest_check
                if check is None:
                    if closed:
                        reason = f"is not allowed (the array has at most {_items(len(prefix))})"
                        raise _Fail([index], reason)
                    out.append(item)
                    continue
                try:
                    out.append(check(item))
                except _Fail as ex:
                    ex.parts.append(index)
                    raise
            return out

        def check(value: Any) -> Any:
            if not isinstance(value, list):
                raise _Fail([], f"expected an array, got {_show(value)}")
            count = len(value)
            if fewest is not None and count < fewest:
                raise _Fail([], f"must have at least {_items(fewest)}, got {count}")
            if most is not None and count > most:
                raise _Fail([], f"must have at most {_items(most)}, got {count}")
            if unique:
                seen: set[Any] = set()
                for item in value:
                    key = _freeze(item)
                    if key in seen:
                        raise _Fail([], f"must not repeat items, got {_show(item)} twice")
                    seen.add(key)
            return each(value)

        return check

    def object(self, schema: Mapping[str, Any]) -> _Check:
        required = [name for name in schema.get("required", ()) if isinstance(name, str)]
        properties: Mapping[str, Any] = schema.get("properties", {})
        fields = tuple(
            (
                name,
                self.compile(sub),
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
            (re.compile(pattern), self.compile(sub))
            for pattern, sub in schema.get("patternProperties", {}).items()
        ]
        extra = schema.get("additionalProperties", True)
        closed = extra is False
        extra_check = None if extra is True or extra is False else self.compile(extra)
        fewest = schema.get("minProperties")
        most = schema.get("maxProperties")

        def extras(value: dict[Any, Any], out: dict[Any, Any]) -> None:
            for key, item in value.items():
                if not isinstance(key, str):
                    raise _Fail([], f"expected an object with string keys, got key {_show(key)}")
                matched = False
                for regex, sub in patterns:
                    if regex.search(key):
                        matched = True
                        try:
                            out[key] = sub(out.get(key, item))
                        except _Fail as ex:
                            ex.parts.append(key)
                            raise
                if matched or key in known:
                    continue
                if closed:
                    raise _Fail([key], "is not allowed (the model has no such field)")
                if extra_check is None:
                    out[key] = item
                    continue
                try:
                    out[key] = extra_check(item)
                except _Fail as ex:
                    ex.parts.append(key)
                    raise

        def check(value: Any) -> Any:
            if not isinstance(value, dict):
                raise _Fail([], f"expected an object, got {_show(value)}")
            out = {}
            present = 0
            for name, sub, needed, has_default, default, mutable in fields:
                item = value.get(name, _MISSING)
                if item is not _MISSING:
                    present += 1
                    try:
                        out[name] = sub(item)
                    except _Fail as ex:
                        ex.parts.append(name)
                        raise
                elif needed:
                    raise _Fail([name], "is required")
                elif has_default:
                    out[name] = _clone(default) if mutable else default
            for name in unlisted:
                if name not in value:
                    raise _Fail([name], "is required")
            if present != len(value) or patterns:
                extras(value, out)
            count = len(value)
            if fewest is not None and count < fewest:
                raise _Fail([], f"must have at least {fewest} fields, got {count}")
            if most is not None and count > most:
                raise _Fail([], f"must have at most {most} fields, got {count}")
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
