"""The supervisor's `contract.py`, written from a graph file.

It turns each model's JSON Schema back into `msgspec.Struct` classes that accept
the same data, and lists the workflow's events and states as `Occurrence` and
`StateRef` classes, with one nested class per child workflow. It only returns
text: it imports no user code and writes no file. The same graph always gives the
same text.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from stateous.model.graph_file import GraphFile, checksum

#: Longer lines get wrapped where that is easy, and excused where it is not.
LINE_LIMIT = 88

#: What each name the contract imports comes from; no model may take one of them.
_IMPORTS = {
    "Annotated": "typing",
    "Any": "typing",
    "Literal": "typing",
    "date": "datetime",
    "datetime": "datetime",
    "time": "datetime",
    "timedelta": "datetime",
    "Decimal": "decimal",
    "UUID": "uuid",
    "Context": "stateous",
    "Occurrence": "stateous",
    "StateRef": "stateous",
}
#: Module-level names besides the imports that the contract defines or uses.
_RESERVED = {"msgspec", "events", "states", "annotations", "__workflow__", "__checksum__"}
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


def identifier(name: str) -> str:
    """A valid Python name for a workflow, state or event name: `ship-it` is `ship_it`."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = f"_{text}"
    return f"{text}_" if keyword.iskeyword(text) else text


def pascal(name: str) -> str:
    """`design-review` as a class name: `DesignReview`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[\W_]+", name) if part)


class Names:
    """Hands out distinct names: the wanted one, else `<wanted>_2`, `<wanted>_3`..."""

    def __init__(self, taken: set[str] | frozenset[str] = frozenset()) -> None:
        self.taken = set(taken)

    def claim(self, wanted: str) -> str:
        name, count = wanted, 1
        while name in self.taken:
            count += 1
            name = f"{wanted}_{count}"
        self.taken.add(name)
        return name


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
        for name, found in tags.items():
            model = self.models[name]
            if len(found) != 1 or model.schema.get("type") != "object":
                continue
            ((key, value),) = found
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
            shown = ", ".join(_python(value) for value in values if value is not None)
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
        shown = ", ".join(f"{key}={_python(value)}" for key, value in bounds.items())
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


def _python(value: Any) -> str:
    """A JSON value as Python source, with double-quoted strings."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return f"[{', '.join(_python(item) for item in value)}]"
    if isinstance(value, dict):
        return f"{{{', '.join(f'{_python(k)}: {_python(v)}' for k, v in value.items())}}}"
    return repr(value)


def _default(value: Any, kind: Kind) -> tuple[str, str]:
    """A default as `msgspec.field` takes it: `default` or `default_factory`, and its text."""
    scalar = isinstance(value, str | int | float | bool)
    empty = (value == [] and kind.text.startswith("list[")) or (
        value == {} and kind.text.startswith("dict[")
    )
    if value is None or (kind.plain and scalar) or empty:
        return "default", _python(value)
    return "default_factory", f"lambda: msgspec.convert({_python(value)}, {kind.text})"


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
        options_of_field = [f"name={_python(key)}"] if name != key else []
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
        options.append(f"tag_field={_python(model.tag[0])}, tag={_python(model.tag[1])}")
    bases = ", ".join(["msgspec.Struct", *options])
    return [f"class {model.name}({bases}):", *(fields or ["    pass"])]


def _models(types: Types, taken: set[str]) -> list[list[str]]:
    """The blocks of the models: Struct classes, and aliases for the other kinds."""
    blocks = []
    for model in _order(types):
        if model.schema.get("type") == "object" and "properties" in model.schema:
            blocks.append(_struct(model, types, taken))
        else:
            blocks.append([f"{model.name} = {types.kind(model.schema, model.refs).text}"])
    return blocks


@dataclass(frozen=True)
class Scope:
    """The Python names of one workflow's states and events in the contract."""

    workflow: str
    attribute: str | None  # the nested class under `events` and `states`; None at the top
    states: dict[str, str]
    events: dict[str, str]
    context: str

    def state_path(self, state: str) -> str:
        """`states.coding`, or `states.design_review.triage` for a child's state."""
        return ".".join(filter(None, ["states", self.attribute, self.states[state]]))

    def event_path(self, event: str) -> str:
        return ".".join(filter(None, ["events", self.attribute, self.events[event]]))

    def claim_name(self, state: str, top: str) -> str:
        """The name a claim gives the state: `coding`, or `design-review/triage`."""
        return state if self.workflow == top else f"{self.workflow}/{state}"


@dataclass
class Contract:
    """The text of contract.py, and the names in it that stubs need."""

    text: str
    scopes: list[Scope]
    graph: GraphFile

    def task_states(self) -> list[tuple[Scope, str]]:
        """Every state that has work for a routine, in graph order; parallel states have none."""
        found = []
        for scope in self.scopes:
            spec = self.graph.workflow_spec(scope.workflow)
            found.extend((scope, state) for state, item in spec.states.items() if not item.parallel)
        return found


def _context_aliases(
    graph: GraphFile, types: Types, names: Names
) -> tuple[dict[str, str], list[str]]:
    """Name the context type of each workflow, e.g. `TicketContext`; one per context model.

    A workflow without a context model gets `<Workflow>Context`, a plain dict.
    """
    by_workflow: dict[str, str] = {}
    by_model: dict[str, str] = {}
    aliases = []
    for workflow in [graph.workflow, *graph.workflows]:
        model = graph.workflow_spec(workflow).context
        if model is not None and model in by_model:
            by_workflow[workflow] = by_model[model]
            continue
        base = model if model is not None else pascal(workflow)
        alias = names.claim(f"{base}Context")
        inner = types.by_model[model] if model is not None else f"dict[str, {types.use('Any')}]"
        aliases.append(f"{alias} = Context[{inner}]")
        by_workflow[workflow] = alias
        if model is not None:
            by_model[model] = alias
    return by_workflow, aliases


def _scopes(graph: GraphFile, contexts: dict[str, str], module: set[str]) -> list[Scope]:
    """Name the states and events of each workflow, and the nested class of each child.

    A name never hides a module-level name that the class bodies use, and a child's
    class never takes the name of a top state or event.
    """
    top_events, top_states = Names(module), Names(module | {"events"})
    scopes = []
    for workflow in [graph.workflow, *graph.workflows]:
        spec = graph.workflow_spec(workflow)
        child = workflow != graph.workflow
        events = Names(module) if child else top_events
        states = Names(module | {"events"}) if child else top_states
        scopes.append(
            Scope(
                workflow=workflow,
                attribute=None,
                states={
                    state: states.claim(identifier(state))
                    for state, item in spec.states.items()
                    if not item.parallel
                },
                events={event: events.claim(identifier(event)) for event in spec.events},
                context=contexts[workflow],
            )
        )
    for index, scope in enumerate(scopes[1:], start=1):
        attribute = Names(top_events.taken | top_states.taken).claim(identifier(scope.workflow))
        top_events.taken.add(attribute)
        top_states.taken.add(attribute)
        scopes[index] = replace(scope, attribute=attribute)
    return scopes


def _event_lines(scope: Scope, graph: GraphFile, types: Types, indent: str) -> list[str]:
    lines = []
    for event, spec in graph.workflow_spec(scope.workflow).events.items():
        payload = types.by_model.get(spec.payload or "", "None")
        lines += [
            "",
            f"{indent}class {scope.events[event]}(Occurrence[{payload}]):",
            f"{indent}    name = {_python(event)}",
        ]
    return lines[1:]


def _state_lines(scope: Scope, graph: GraphFile, indent: str) -> list[str]:
    lines = []
    spec = graph.workflow_spec(scope.workflow)
    for state, name in scope.states.items():
        emitted = [scope.event_path(event) for event in spec.states[state].emits or []]
        claim = _python(scope.claim_name(state, graph.workflow))
        emits = f"({', '.join(emitted)}{',' if len(emitted) == 1 else ''})"
        line = f"{indent}{name} = StateRef({claim}, emits={emits})"
        if len(line) <= LINE_LIMIT:
            lines.append(line)
            continue
        inner = indent + "    "
        lines += [f"{indent}{name} = StateRef(", f"{inner}{claim},"]
        if len(f"{inner}emits={emits},") <= LINE_LIMIT:
            lines.append(f"{inner}emits={emits},")
        else:
            lines += [f"{inner}emits=(", *(f"{inner}    {item}," for item in emitted), f"{inner}),"]
        lines.append(f"{indent})")
    return lines


def _class(name: str, body: list[str], indent: str = "") -> list[str]:
    """A class, with `pass` for an empty body."""
    return [f"{indent}class {name}:", *(body or [f"{indent}    pass"])]


def _imports(used: set[str], with_msgspec: bool) -> list[str]:
    modules: dict[str, list[str]] = {}
    for name in sorted(used, key=lambda item: (item.lower(), item)):
        modules.setdefault(_IMPORTS[name], []).append(name)
    standard = [f"from {module} import {', '.join(names)}" for module, names in modules.items()]
    standard = sorted(line for line in standard if not line.startswith("from stateous"))
    return [
        "from __future__ import annotations",
        "",
        *standard,
        *([""] if standard else []),
        *(["import msgspec"] if with_msgspec else []),
        "from stateous import Context, Occurrence, StateRef",
    ]


def contract(graph: GraphFile) -> Contract:
    """Write the contract of a graph: its models, context types, events and states."""
    names = Names(set(_IMPORTS) | _RESERVED)
    types = Types(graph, names)
    taken = set(_IMPORTS) | _RESERVED | _BUILTINS | set(types.models)
    blocks = _models(types, taken)
    contexts, aliases = _context_aliases(graph, types, names)
    scopes = _scopes(graph, contexts, set(names.taken))
    event_body = _event_lines(scopes[0], graph, types, "    ")
    state_body = _state_lines(scopes[0], graph, "    ")
    for scope in scopes[1:]:
        nested_events = _event_lines(scope, graph, types, "        ")
        event_body += ["", *_class(str(scope.attribute), nested_events, "    ")]
        nested_states = _state_lines(scope, graph, "        ")
        state_body += ["", *_class(str(scope.attribute), nested_states, "    ")]
    body = [
        f"__workflow__ = {_python(graph.workflow)}",
        f"__checksum__ = {_python(checksum(graph))}",
        *[line for block in blocks for line in ["", "", *block]],
        "",
        "",
        *aliases,
        "",
        "",
        *_class("events", event_body),
        "",
        "",
        *_class("states", state_body),
    ]
    header = [f"# GENERATED from the `{graph.workflow}` workflow — do not edit."]
    with_msgspec = any("msgspec." in line for line in body)
    lines = [*_imports(types.used | {"Context", "Occurrence", "StateRef"}, with_msgspec), "", *body]
    if any(len(line) > LINE_LIMIT for line in lines):
        header.append("# ruff: noqa: E501")
    text = "\n".join([*header, *lines]) + "\n"
    return Contract(text, scopes, graph)
