"""Check token contexts and event payloads against the JSON Schemas of their models.

The schemas are the ones msgspec and pydantic v2 emit; each is compiled once into
nested closures, which check a value and return a copy of it with defaults filled.
This module follows `$ref`s and compiles the keywords that combine schemas (const,
enum, allOf, anyOf, oneOf, not, a list of types); `validation_types` holds the
check of each single JSON type. It never mutates its input, never imports a
third-party validator, and never walks the schema again once compiled; unknown
keywords are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stateous.control.validation_types import (
    MISSING,
    Check,
    Fail,
    accept,
    freeze,
    show,
    type_check,
)

__all__ = ["Invalid", "Validator", "compile_schema"]

Validator = Callable[[Any, str], Any]

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


def compile_schema(schema: Mapping[str, Any]) -> Validator:
    """Compile a JSON Schema into a function that checks a value and fills its defaults."""
    check = _Compiler(schema).compile(schema)

    def validate(value: Any, root: str) -> Any:
        try:
            return check(value)
        except Fail as ex:
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


def _one_of_values(values: list[Any]) -> str:
    """Name allowed values: "'a'" or "one of 'a', 'b'"."""
    if len(values) == 1:
        return show(values[0])
    shown = ", ".join(show(value) for value in values[:10])
    return f"one of {shown}{', ...' if len(values) > 10 else ''}"


def _reject(value: Any) -> Any:
    raise Fail([], "is not allowed")


def _chain(steps: list[Check]) -> Check:
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
        self.refs: dict[str, Check] = {}
        self.pending: dict[str, list[Check | None]] = {}

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

    def ref(self, ref: str) -> Check:
        """Compile a `$ref` once; a ref met again while compiling gets a forwarder."""
        if ref in self.refs:
            return self.refs[ref]
        if ref in self.pending:
            waiting = self.pending[ref]

            def forward(value: Any) -> Any:
                return waiting[0](value)  # type: ignore[misc]

            return forward
        cell: list[Check | None] = [None]
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

    def compile(self, schema: Any) -> Check:
        """Compile one schema into a check that returns the value with defaults filled."""
        if schema is True:
            return accept
        if schema is False:
            return _reject
        if not isinstance(schema, Mapping):
            raise ValueError(f"a schema must be an object or a boolean, got {show(schema)}")
        steps: list[Check] = []
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
            return accept
        return steps[0] if len(steps) == 1 else _chain(steps)

    def const(self, expected: Any) -> Check:
        key = freeze(expected)

        def check(value: Any) -> Any:
            if freeze(value) != key:
                raise Fail([], f"expected {show(expected)}, got {show(value)}")
            return value

        return check

    def enum(self, values: list[Any]) -> Check:
        keys = {freeze(value) for value in values}
        strings = {value for value in values if isinstance(value, str)}
        allowed = _one_of_values(values)

        def check(value: Any) -> Any:
            if type(value) is str:
                if value in strings:
                    return value
            elif freeze(value) in keys:
                return value
            raise Fail([], f"expected {allowed}, got {show(value)}")

        return check

    def negate(self, schema: Any) -> Check:
        inner = self.compile(schema)

        def check(value: Any) -> Any:
            try:
                inner(value)
            except Fail:
                return value
            raise Fail([], "must not match the excluded shape")

        return check

    def union(self, schemas: list[Any], discriminator: Any) -> Check:
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
            failures: list[Fail] = []
            for branch in branches:
                try:
                    return branch(value)
                except Fail as ex:
                    failures.append(ex)
            fitting = [index for index, kind in enumerate(kinds) if _fits(value, kind)]
            if len(fitting) == 1:
                raise failures[fitting[0]]
            if not fitting and known:
                raise Fail([], f"expected {expected}, got {show(value)}")
            raise Fail([], "matches none of the allowed shapes")

        return check

    def tagged(self, schemas: list[Any], discriminator: Mapping[str, Any]) -> Check | None:
        """Compile a discriminated union, or return None when its tags cannot be found."""
        field = discriminator["propertyName"]
        choices: dict[str, Check] = {}
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
                raise Fail([], f"expected an object, got {show(value)}")
            tag = value.get(field, MISSING)
            if tag is MISSING:
                raise Fail([field], "is required")
            key = tag if isinstance(tag, str) else str(tag) if type(tag) is int else None
            branch = choices.get(key) if key is not None else None
            if branch is None:
                raise Fail([field], f"expected {allowed}, got {show(tag)}")
            return branch(value)

        return check

    # -- types --------------------------------------------------------------

    def typed(self, schema: Mapping[str, Any]) -> Check | None:
        """Compile `type` with the keywords of each type; without `type`, they apply by kind."""
        declared = schema.get("type")
        if declared is None:
            table: dict[str, Check] = {}
            if any(word in schema for word in _NUMERIC):
                table["integer"] = table["number"] = self.one_type(schema, "number")
            if any(word in schema for word in _STRING):
                table["string"] = self.one_type(schema, "string")
            if any(word in schema for word in _ARRAY):
                table["array"] = self.one_type(schema, "array")
            if any(word in schema for word in _OBJECT):
                table["object"] = self.one_type(schema, "object")
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
                raise Fail([], f"expected {expected}, got {show(value)}")
            return check(value)

        return any_type

    def one_type(self, schema: Mapping[str, Any], name: str) -> Check:
        """The check of one JSON type, with its sub-schemas compiled in this document."""
        return type_check(schema, name, self.compile)
