"""The served workflow: the graph file, read once at start and indexed for routing.

Each workflow of the file (the top one and the child workflows of parallel
states) gets its transitions grouped by state and event with their guards
parsed, and its context and payload checks compiled from the JSON Schemas. The
engine asks this module where an event goes; it never reads the file again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateous.control import graph_rules
from stateous.control.validation import Validator, compile_schema
from stateous.model import contracts, graph_file
from stateous.model.errors import Failure
from stateous.model.graph_file import GraphFile, StateSpec, WorkflowSpec
from stateous.model.guard_eval import evaluate
from stateous.model.guards import Guard, parse
from stateous.model.keys import key_path
from stateous.model.names import BUILTIN_EVENTS


class GraphError(Failure, ValueError):
    """The graph file cannot be served."""


@dataclass(frozen=True, slots=True)
class Route:
    """One transition: where `event` takes a token from `source`, under `guard`."""

    source: str
    target: str
    event: str | None
    guard: Guard | None
    otherwise: bool


@dataclass(frozen=True, slots=True)
class Ambiguous:
    """More than one guard matched: the graph promised this cannot happen."""

    guards: tuple[str, ...]


def _accept_anything(value: Any, where: str) -> Any:
    return value


def _compiled(name: str, schema: dict[str, Any]) -> Validator:
    """Compile one schema of the graph file; a schema that cannot be is named."""
    try:
        return compile_schema(schema)
    except (ValueError, re.error) as ex:
        raise graph_file.GraphFileError(f"schemas.{name}: {ex}") from None


@dataclass(slots=True)
class Flow:
    """One workflow of the graph, indexed for the engine."""

    name: str
    spec: WorkflowSpec
    is_top: bool
    routes: dict[tuple[str, str | None], list[Route]] = field(default_factory=dict)
    context_check: Validator = _accept_anything
    payload_checks: dict[str, Validator] = field(default_factory=dict)
    #: Every workflow of the same graph file by name, this one included: where the child
    #: workflows of its parallel states are found.
    family: dict[str, Flow] = field(default_factory=dict)
    #: The path into the context of the workflow's fairness key, if it has one.
    fairness: tuple[str, ...] | None = None

    def state(self, name: str) -> StateSpec:
        return self.spec.states[name]

    def claim_name(self, state: str) -> str:
        """The name a supervisor claims a state by: `state`, or `workflow/state` in a child."""
        return state if self.is_top else f"{self.name}/{state}"

    def has_event(self, event: str) -> bool:
        return event in self.spec.events or event in BUILTIN_EVENTS

    def emits(self, state: str, event: str) -> bool:
        """Tell whether the routine of `state` may report `event`."""
        spec = self.spec.states.get(state)
        return spec is not None and event in (spec.emits or [])

    def counts_needed(self, state: str, event: str | None) -> bool:
        """Tell whether a guard of this state and event reads `count(...)`."""
        return any(
            route.guard is not None and route.guard.counted
            for route in self.routes.get((state, event), [])
        )

    def choose(
        self,
        state: str,
        event: str | None,
        *,
        ctx: Mapping[str, Any],
        payload: Any,
        counts: Mapping[str, int],
        branches: Sequence[Mapping[str, Any]] | None = None,
    ) -> Route | Ambiguous | None:
        """Pick the transition that `event` takes from `state`, or None when none applies."""
        routes = self.routes.get((state, event), [])
        matched = [
            route
            for route in routes
            if route.guard is not None
            and evaluate(route.guard, ctx=ctx, payload=payload, counts=counts, branches=branches)
        ]
        if len(matched) > 1:
            return Ambiguous(tuple(route.guard.text for route in matched if route.guard))
        if matched:
            return matched[0]
        for route in routes:
            if route.guard is None:
                return route
        return None


class Graph:
    """The graph file being served, with every workflow indexed by name."""

    def __init__(self, document: GraphFile, raw: bytes) -> None:
        self.document = document
        self.raw = raw
        self.name = document.workflow
        self.checksum = graph_file.checksum(document)
        self.structure = graph_file.structure(document)
        for problem in graph_rules.problems(document):
            raise graph_file.GraphFileError(problem)
        checks = {name: _compiled(name, schema) for name, schema in document.schemas.items()}
        self.flows: dict[str, Flow] = {}
        for name in (document.workflow, *document.workflows):
            spec = document.workflow_spec(name)
            self.flows[name] = self._index(name, spec, checks, is_top=name == document.workflow)
        for flow in self.flows.values():
            flow.family = self.flows
        self.top = self.flows[document.workflow]
        states = [state for flow in self.flows.values() for state in flow.spec.states.values()]
        #: Whether a state `needs` labels, or `prefers` one: a claim of a graph with neither
        #: looks at no state for them (`stateous.control.fleet`).
        self.needs_labels = any(state.needs for state in states)
        self.prefers_labels = any(state.prefers for state in states)
        #: The contract of each state named so far, by its claim name (`contracts.digest`).
        self._contracts: dict[str, str | None] = {}

    def contract(self, state: str) -> str | None:
        """The digest of the contract of `state` (its claim name) in this graph; None when
        the graph has no task state of that name."""
        try:
            return self._contracts[state]
        except KeyError:
            found = self._contracts[state] = contracts.digest(self.document, state)
            return found

    @classmethod
    def load(cls, path: Path | str) -> Graph:
        """Read and index a graph file; raise GraphError with one sentence."""
        try:
            raw = Path(path).read_bytes()
        except OSError as ex:
            raise GraphError(f"cannot read the graph file {path}: {ex.strerror or ex}") from None
        try:
            return cls(graph_file.load(raw), raw)
        except graph_file.GraphFileError as ex:
            raise GraphError(f"{path} cannot be served: {ex}") from None

    @staticmethod
    def _index(
        name: str, spec: WorkflowSpec, checks: dict[str, Validator], *, is_top: bool
    ) -> Flow:
        flow = Flow(name=name, spec=spec, is_top=is_top)
        if spec.fairness is not None:
            flow.fairness = key_path(spec.fairness)
        for transition in spec.transitions:
            guard = parse(transition.when) if transition.when is not None else None
            route = Route(
                transition.source,
                transition.target,
                transition.on,
                guard,
                transition.otherwise,
            )
            flow.routes.setdefault((transition.source, transition.on), []).append(route)
        if spec.context is not None:
            flow.context_check = checks.get(spec.context, _accept_anything)
        for event, event_spec in spec.events.items():
            if event_spec.payload is not None:
                flow.payload_checks[event] = checks.get(event_spec.payload, _accept_anything)
        return flow
