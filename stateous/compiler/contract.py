"""The supervisor's `contract.py`, written from a graph file.

It lists the workflow's events and states as `Occurrence` and `StateRef` classes,
with one nested class per child workflow, names each workflow's context type, and
puts the models that `contract_models` writes from the schemas before them. It
only returns text: it imports no user code and writes no file. The same graph
always gives the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from stateous.compiler.contract_models import Types, model_blocks
from stateous.compiler.python_source import LINE_LIMIT, Names, identifier, pascal, python_literal
from stateous.model.graph_file import GraphFile, checksum

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
        found: list[tuple[Scope, str]] = []
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
            f"{indent}    name = {python_literal(event)}",
        ]
    return lines[1:]


def _state_lines(scope: Scope, graph: GraphFile, indent: str) -> list[str]:
    lines = []
    spec = graph.workflow_spec(scope.workflow)
    for state, name in scope.states.items():
        emitted = [scope.event_path(event) for event in spec.states[state].emits or []]
        claim = python_literal(scope.claim_name(state, graph.workflow))
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
    blocks = model_blocks(types, set(_IMPORTS) | _RESERVED)
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
        f"__workflow__ = {python_literal(graph.workflow)}",
        f"__checksum__ = {python_literal(checksum(graph))}",
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
