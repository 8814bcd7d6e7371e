"""The models of the supervisor's `contract.py`: `msgspec.Struct` classes from JSON Schemas.

Each model's schema, with its `$defs`, becomes classes (or aliases for other kinds)
that accept the same data, named once across the graph and ordered so that each
comes after what it refers to. It only returns text and must not name the states,
events or contexts of the contract: `contract` does, around these blocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from stateous.compiler.python_source import Names, identifier, python_literal
from stateous.model.graph_file import GraphFile

#: Builtins that annotations use; a field with one of these names would hide it.
_BUILTINS = {"int", "float", "str", "bool", "bytes", "list", "dict", "tuple", "None"}
#: String formats that msgspec and pydantic emit, and the type that reads each.
_FORMATS = {
    "date-time": "datetime",
    "date": "date",
    "time": "time",
    "duration": "timedelta",
    "uuid": "UUID",
    "decimal": "Decimal",
}
_STR_LIKE = {"str", "bytes", *_FORMATS.values()}
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
#: JSON Schema bounds, as `msgspec.Meta` names them.
_BOUNDS = {
    "minimum": "ge",
    "maximum": "le",
    "exclusiveMinimum": "gt",
    "exclusiveMaximum": "lt",
    "multipleOf": "multiple_of",
    "pattern": "pattern",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_length",
    "maxItems": "max_length",
    "minProperties": "min_length",
    "maxProperties": "max_length",
}
_REF = re.compile(r"#/(?:\$defs|definitions)/(.+)\Z")


@dataclass(frozen=True)
class Kind:
    """A rendered type: its text, what msgspec counts it as in a union, and whether its
    Python values are the JSON values themselves (then a default can be written as is)."""

    text: str
    group: str
    plain: bool = True
    literals: tuple[Any, ...] = ()


@dataclass
class Model:
    """One class (or alias) of the contract, with the refs of the schema it came from."""

    name: str
    schema: dict[str, Any]
    refs: dict[str, str]
    tag: tuple[str, Any] | None = None


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in schema.items() if key not in ("$defs", "definitions")}


def _same(left: dict[str, Any], right: dict[str, Any]) -> bool:
    encode = msgspec.json.encode
    return encode(left, order="sorted") == encode(right, order="sorted")


def _literal_ok(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


class Types:
    """Every model of a graph, named once, and the text of each model's type."""

    def __init__(self, graph: GraphFile, names: Names) -> None:
        self.models: dict[str, Model] = {}
        self.by_model: dict[str, str] = {}
        self.used: set[str] = set()
        for model, schema in graph.schemas.items():
            self._add_schema(model, schema, names)
        self._tag_members()

    def _add_schema(self, model: str, schema: dict[str, Any], names: Names) -> None:
        local = schema.get("$defs") or schema.get("definitions") or {}
        refs: dict[str, str] = {}
        for key, body in local.items():
            refs[key] = self._place(identifier(key), _body(body), refs, names)
        root = _body(schema)
        target = _REF.match(str(root.get("$ref", "")))
        if target and target[1] in refs and set(root) <= {"$ref", "title", "description"}:
            self.by_model[model] = refs[target[1]]
        else:
            self.by_model[model] = self._place(identifier(model), root, refs, names)

    def _place(self, wanted: str, body: dict[str, Any], refs: dict[str, str], names: Names) -> str:
        """Name a class, reusing the one of the same name and body from another schema."""
        candidate, count = wanted, 1
        while candidate in self.models:
            if _same(self.models[candidate].schema, body):
                return candidate
            count += 1
            candidate = f"{wanted}_{count}"
        name = names.claim(wanted)
        self.models[name] = Model(name, body, refs)
        return name

    def _tag_members(self) -> None:
        """Tag the Structs of a discriminated union, so that msgspec can tell them apart."""
        tags: dict[str, set[tuple[str, Any]]] = {}
        for model in self.models.values():
            for found in _discriminators(model.schema):
                key = found["propertyName"]
                for value, ref in found.get("mapping", {}).items():
                    target = _REF.match(ref)
                    name = model.refs.get(target[1]) if target else None
                    if name is not None:
                        tags.setdefault(name, set()).add((key, value))
        for name, pairs in tags.items():
            model = self.models[name]
            if len(pairs) != 1 or model.schema.get("type") != "object":
                continue
            ((key, value),) = pairs
            if self.literals(model.schema.get("properties", {}).get(key, {})) == (value,):
                model.tag = (key, value)

    def literals(self, schema: dict[str, Any]) -> tuple[Any, ...]:
        """The values of an `enum` or `const`, or () when the schema is not one."""
        if "const" in schema:
            return (schema["const"],)
        return tuple(schema.get("enum", ()))

    # rendering types

    def kind(self, schema: Any, refs: dict[str, str]) -> Kind:
        """The Python type of a JSON Schema, inside the schema whose `$defs` are `refs`."""
        if not isinstance(schema, dict):
            return self.any()
        if "$ref" in schema:
            return self._ref(schema["$ref"], refs)
        values = self.literals(schema)
        if values:
            return self._literal(values)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.union([self.kind(item, refs) for item in schema[key]])
        if "allOf" in schema:
            members = schema["allOf"]
            return self.kind(members[0], refs) if len(members) == 1 else self.any()
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.union([self.kind({**schema, "type": item}, refs) for item in kind])
        return self._bounded(self._typed(kind, schema, refs), schema)

    def _ref(self, ref: str, refs: dict[str, str]) -> Kind:
        target = _REF.match(ref)
        name = refs.get(target[1]) if target else None
        if name is None:
            return self.any()
        model = self.models[name]
        if model.schema.get("type") == "object" and "properties" in model.schema:
            return Kind(name, "object", plain=False)
        inner = self.kind(model.schema, model.refs)
        return Kind(name, inner.group, inner.plain, inner.literals)

    def _literal(self, values: tuple[Any, ...]) -> Kind:
        """`Literal[...]` (and `None`) when msgspec takes the values so, else their types."""
        if all(_literal_ok(value) for value in values):
            shown = ", ".join(python_literal(value) for value in values if value is not None)
            parts = [f"{self.use('Literal')}[{shown}]"] if shown else []
            parts += ["None"] if None in values else []
            return Kind(" | ".join(parts), "literal", literals=values)
        names = {"str": str, "bool": bool, "int": int, "float": float, "None": type(None)}
        found = [name for name, kind in names.items() if any(type(v) is kind for v in values)]
        return self.union([Kind(name, name) for name in found]) if found else self.any()

    def _typed(self, kind: Any, schema: dict[str, Any], refs: dict[str, str]) -> Kind:
        if kind == "string":
            if schema.get("contentEncoding") == "base64":
                return Kind("bytes", "bytes", plain=False)
            special = _FORMATS.get(schema.get("format", ""))
            return Kind(self.use(special), special, plain=False) if special else Kind("str", "str")
        if kind in _SCALARS:
            return Kind(_SCALARS[kind], _SCALARS[kind])
        if kind == "array":
            if "prefixItems" in schema:
                items = [self.kind(item, refs).text for item in schema["prefixItems"]]
                return Kind(f"tuple[{', '.join(items) or '()'}]", "array", plain=False)
            item = self.kind(schema.get("items", {}), refs)
            return Kind(f"list[{item.text}]", "array", item.plain)
        if kind == "object":
            extra = schema.get("additionalProperties", True)
            value = self.kind(extra, refs) if isinstance(extra, dict) else self.any()
            return Kind(f"dict[str, {value.text}]", "object", value.plain)
        return self.any()

    def _bounded(self, kind: Kind, schema: dict[str, Any]) -> Kind:
        """Wrap a type in `Annotated[..., msgspec.Meta(...)]` for its bounds."""
        if "prefixItems" in schema:
            return kind
        bounds = {meta: schema[key] for key, meta in _BOUNDS.items() if key in schema}
        if not bounds:
            return kind
        shown = ", ".join(f"{key}={python_literal(value)}" for key, value in bounds.items())
        text = f"{self.use('Annotated')}[{kind.text}, msgspec.Meta({shown})]"
        return Kind(text, kind.group, kind.plain, kind.literals)

    def union(self, kinds: list[Kind]) -> Kind:
        """A union that msgspec can decode; a mix it cannot tell apart widens to a wider type."""
        if not kinds or any(kind.group == "any" for kind in kinds):
            return self.any()
        unique = list({kind.text: kind for kind in kinds}.values())
        if len(unique) == 1:
            return unique[0]
        strings = {kind.group for kind in unique if kind.group in _STR_LIKE}
        if len(strings) > 1:
            unique = [kind for kind in unique if kind.group not in _STR_LIKE]
            unique.insert(0, Kind("str", "str"))
        objects = [kind for kind in unique if kind.group == "object"]
        arrays = [kind for kind in unique if kind.group == "array"]
        if len(arrays) > 1 or (len(objects) > 1 and not self._tagged(objects)):
            return self.any()
        nones = [kind for kind in unique if kind.text == "None"]
        rest = [kind for kind in unique if kind.text != "None"]
        parts = rest + nones[:1]
        return Kind(
            " | ".join(kind.text for kind in parts),
            "union",
            all(kind.plain for kind in parts),
        )

    def _tagged(self, kinds: list[Kind]) -> bool:
        models = [self.models.get(kind.text) for kind in kinds]
        fields = {model.tag[0] if model and model.tag else None for model in models}
        return None not in fields and len(fields) == 1

    def any(self) -> Kind:
        """`Any`: a schema that msgspec cannot express exactly accepts every value."""
        return Kind(self.use("Any"), "any")

    def use(self, name: str) -> str:
        """Note that the contract imports `name`, and return it."""
        self.used.add(name)
        return name


def _discriminators(schema: Any) -> list[dict[str, Any]]:
    """Every `discriminator` object anywhere in a schema."""
    if isinstance(schema, list):
        return [found for item in schema for found in _discriminators(item)]
    if not isinstance(schema, dict):
        return []
    found = [schema["discriminator"]] if isinstance(schema.get("discriminator"), dict) else []
    return found + [item for value in schema.values() for item in _discriminators(value)]


def _refs_of(schema: Any) -> list[str]:
    """The `$ref` targets in a schema, in order."""
    if isinstance(schema, list):
        return [ref for item in schema for ref in _refs_of(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
    return own + [ref for value in schema.values() for ref in _refs_of(value)]


def _order(types: Types) -> list[Model]:
    """The models with what each refers to first; a cycle is broken where it is met."""
    placed: dict[str, Model] = {}
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in placed or name in visiting:
            return
        visiting.add(name)
        model = types.models[name]
        for ref in _refs_of(model.schema):
            target = _REF.match(ref)
            if target and target[1] in model.refs:
                visit(model.refs[target[1]])
        visiting.discard(name)
        placed[name] = model

    for name in types.models:
        visit(name)
    return list(placed.values())


def _default(value: Any, kind: Kind) -> tuple[str, str]:
    """A default as `msgspec.field` takes it: `default` or `default_factory`, and its text."""
    scalar = isinstance(value, str | int | float | bool)
    empty = (value == [] and kind.text.startswith("list[")) or (
        value == {} and kind.text.startswith("dict[")
    )
    if value is None or (kind.plain and scalar) or empty:
        return "default", python_literal(value)
    return "default_factory", f"lambda: msgspec.convert({python_literal(value)}, {kind.text})"


def _struct(model: Model, types: Types, taken: set[str]) -> list[str]:
    """The lines of one Struct class."""
    schema = model.schema
    required = set(schema.get("required", []))
    names = Names(taken)
    fields: list[str] = []
    options: list[str] = []
    optional_seen = keyword_only = False
    for key, property_schema in schema.get("properties", {}).items():
        if model.tag and key == model.tag[0]:
            continue
        kind = types.kind(property_schema, model.refs)
        name = names.claim(identifier(key))
        options_of_field = [f"name={python_literal(key)}"] if name != key else []
        if key not in required:
            if "default" in property_schema:
                how, default = _default(property_schema["default"], kind)
            else:
                kind = Kind(f"{kind.text} | msgspec.UnsetType", kind.group)
                how, default = "default", "msgspec.UNSET"
            options_of_field.insert(0, f"{how}={default}")
            optional_seen = True
        elif optional_seen:
            keyword_only = True
        line = f"    {name}: {kind.text}"
        if options_of_field and (options_of_field[0].startswith("default=") and name == key):
            line += f" = {default}"
        elif options_of_field:
            line += f" = msgspec.field({', '.join(options_of_field)})"
        fields.append(line)
    if keyword_only:
        options.append("kw_only=True")
    if schema.get("additionalProperties") is False:
        options.append("forbid_unknown_fields=True")
    if model.tag:
        options.append(
            f"tag_field={python_literal(model.tag[0])}, tag={python_literal(model.tag[1])}"
        )
    bases = ", ".join(["msgspec.Struct", *options])
    return [f"class {model.name}({bases}):", *(fields or ["    pass"])]


def model_blocks(types: Types, module_names: set[str]) -> list[list[str]]:
    """The blocks of the models: Struct classes, and aliases for the other kinds.

    No field takes a name of `module_names`, of a builtin or of a model: it would hide it.
    """
    taken = module_names | _BUILTINS | set(types.models)
    blocks = []
    for model in _order(types):
        if model.schema.get("type") == "object" and "properties" in model.schema:
            blocks.append(_struct(model, types, taken))
        else:
            blocks.append([f"{model.name} = {types.kind(model.schema, model.refs).text}"])
    return blocks
