"""A state's contract: what a routine written for it relies on.

A routine of a task state reads the workflow's context model and may emit the state's
events with their payload models. Two graph files agree on a state when those are the same
in both; a supervisor built for one may then run the state's work for tokens of the other,
and a token in that state may move from one graph to the other. A parallel state runs no
routine; what its token relies on is its `fork`: the workflow's context model, the child
workflows it starts, its join and its inputs.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from stateous.model.graph_file import GraphFile, StateSpec, WorkflowSpec


def _model(graph: GraphFile, name: str | None) -> tuple[str, Any] | None:
    """A model as its name and its JSON Schema; None for no model."""
    return None if name is None else (name, graph.schemas.get(name))


def _state(graph: GraphFile, state: str) -> tuple[WorkflowSpec, StateSpec] | None:
    """The workflow and the spec of a state by its claim name (`state`, or `workflow/state`
    in a child); None when the graph has no such state."""
    workflow, _, name = state.rpartition("/")
    try:
        spec = graph.workflow_spec(workflow or graph.workflow)
    except KeyError:
        return None
    item = spec.states.get(name)
    return None if item is None else (spec, item)


def shape(graph: GraphFile, state: str) -> tuple[Any, ...] | None:
    """The contract of `state` (its claim name: `state`, or `workflow/state` in a child):
    its context model, its events and their payload models. None when the graph has no
    task state of that name."""
    found = _state(graph, state)
    if found is None:
        return None
    spec, item = found
    if item.parallel:
        return None
    events = sorted(
        (event, _model(graph, spec.events[event].payload if event in spec.events else None))
        for event in item.emits or []
    )
    return (_model(graph, spec.context), events)


def fork(graph: GraphFile, state: str) -> tuple[Any, ...] | None:
    """What a token in the parallel `state` (named as `shape` names a state) relies on: its
    workflow's context model, the child workflows it starts, its join and its inputs. None
    when the graph has no parallel state of that name."""
    found = _state(graph, state)
    if found is None:
        return None
    spec, item = found
    if not item.parallel:
        return None
    join = item.join or "all"
    return (_model(graph, spec.context), sorted(item.parallel), join, item.inputs or [])


def same(one: GraphFile, other: GraphFile, state: str) -> bool:
    """Whether `state` is a task state of both graphs with the same contract."""
    found = shape(one, state)
    return found is not None and found == shape(other, state)


def digest(graph: GraphFile, state: str) -> str | None:
    """The contract of `state` with its name, as a short stable hash: equal digests mean the
    same state with the same contract, whichever graph file each came from."""
    found = shape(graph, state)
    if found is None:
        return None
    canonical = msgspec.json.encode([state, found], order="sorted")
    return hashlib.sha256(canonical).hexdigest()[:32]
