"""The graph file: the compiled workflow as JSON, format 1.

The compiler writes it and the control plane serves it, so both read and write it
through these types. The checksum and the structure are computed here, once, from
a canonical encoding (keys sorted, no spaces), so that they do not depend on how
the file happens to be indented.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

FORMAT = 1
#: The keys of a state that tell only when its work runs: changing them keeps the structure.
TIMING = (
    "timeout",
    "retries",
    "retry_delay",
    "retry_delay_max",
    "stop_on_repeat",
    "uses",
    "reserve",
)


class StateSpec(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A state: a task state has `emits`; a parallel state has `parallel`, `join`, `inputs`."""

    timeout: str | None = None
    retries: int = 0
    #: The wait before the second attempt, doubled for each one after, up to the max.
    retry_delay: str | None = None
    retry_delay_max: str | None = None
    #: Retries end early once the same failure comes this many times in a row on the same
    #: context; absent when not set, so a graph file without it keeps its checksum.
    stop_on_repeat: int | None = None
    emits: list[str] | None = None
    parallel: list[str] | None = None
    join: str | None = None
    inputs: list[str] | None = None
    #: The resources its task holds: a key expression or a count each (`model.resources`).
    uses: dict[str, str | int] | None = None
    #: The labels a supervisor must have to claim the state's work.
    needs: dict[str, str] | None = None
    #: The one label a supervisor should have, by the key expression of its value, to be
    #: offered the state's work first, for `prefer_for` (a duration; 30s by default).
    prefers: dict[str, str] | None = None
    prefer_for: str | None = None
    #: What its task reserves of its tree's budget before it runs, by unit.
    reserve: dict[str, float] | None = None


class EventSpec(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """An event, with the name of its payload model if it has one."""

    payload: str | None = None


class TransitionSpec(
    msgspec.Struct,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    rename={"source": "from", "target": "to"},
):
    """A transition; `on` is absent only from START."""

    source: str
    target: str
    on: str | None = None
    when: str | None = None
    otherwise: bool = False


class WorkflowSpec(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A child workflow that a parallel state runs."""

    context: str | None = None
    states: dict[str, StateSpec]
    events: dict[str, EventSpec]
    transitions: list[TransitionSpec]
    #: The key expression that names a task's fairness key (`stateous.model.keys`).
    fairness: str | None = None


class ScheduleSpec(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A schedule of `flow.py`: a token of the workflow at each occurrence of `cron`."""

    cron: str
    tz: str = "UTC"
    context: dict[str, Any] = {}
    overlap: str = "skip"
    catch_up: str = "latest"


class ResourceSpec(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """A resource of `flow.py`: `slots` per key, maybe a `rate` (`N/second|minute|hour`), and
    maybe a `breaker`: the failed attempts in a row, alike, that close a key."""

    slots: int = 1
    rate: str | None = None
    breaker: int | None = None


class GraphFile(msgspec.Struct, kw_only=True, omit_defaults=True, forbid_unknown_fields=True):
    """The whole graph file: the top workflow, its child workflows, and every model's schema."""

    stateous: int
    workflow: str
    context: str | None = None
    states: dict[str, StateSpec]
    events: dict[str, EventSpec]
    transitions: list[TransitionSpec]
    workflows: dict[str, WorkflowSpec] = {}
    schemas: dict[str, dict[str, Any]]
    #: Absent from a graph file without schedules, so its checksum stays what it was.
    schedules: dict[str, ScheduleSpec] = {}
    #: The resources its states use; absent without any, as `schedules`.
    resources: dict[str, ResourceSpec] = {}
    #: The top workflow's fairness key expression; absent without one, as `schedules`.
    fairness: str | None = None
    #: What a token of the top workflow and all its children may spend, by unit, unless its
    #: start says; absent without one, as `schedules`.
    budget: dict[str, float] | None = None
    #: The share of the budget at which the ledger warns; absent at the default, 0.8.
    budget_warn: float | None = None

    def workflow_spec(self, name: str) -> WorkflowSpec:
        """Return the top workflow or a child workflow in the same shape."""
        if name == self.workflow:
            return WorkflowSpec(
                context=self.context,
                states=self.states,
                events=self.events,
                transitions=self.transitions,
                fairness=self.fairness,
            )
        return self.workflows[name]


class GraphFileError(ValueError):
    """The bytes are not a graph file of a format this version reads."""


def dump(graph: GraphFile) -> bytes:
    """Encode the graph file as indented JSON: the same graph always gives the same bytes."""
    return msgspec.json.format(msgspec.json.encode(graph), indent=2) + b"\n"


def load(data: bytes | str) -> GraphFile:
    """Decode a graph file, refusing an unknown format or a malformed document."""
    try:
        head = msgspec.json.decode(data)
    except msgspec.DecodeError as ex:
        raise GraphFileError(f"it is not JSON: {ex}") from None
    return from_document(head)


def from_document(head: Any) -> GraphFile:
    """Take a graph file already decoded from JSON, refusing an unknown format or a
    malformed document."""
    if not isinstance(head, dict) or "stateous" not in head:
        raise GraphFileError("it is not a Stateous graph file (no 'stateous' key)")
    if head["stateous"] != FORMAT:
        raise GraphFileError(
            f"its format is {head['stateous']!r}; this version of Stateous reads format {FORMAT}"
        )
    try:
        return msgspec.convert(head, GraphFile)
    except msgspec.ValidationError as ex:
        raise GraphFileError(f"it is not a valid graph file: {ex}") from None


def _digest(document: Any) -> str:
    canonical = msgspec.json.encode(document, order="sorted")
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def checksum(graph: GraphFile) -> str:
    """Hash the whole graph: any change to the file changes it."""
    return _digest(msgspec.to_builtins(graph))


def structure(graph: GraphFile) -> str:
    """Hash the graph without the states' timing (`timeout`, `retries`, `retry_delay`,
    `retry_delay_max` and `stop_on_repeat`), their `uses` and `reserve`, and without its
    schedules, resources, fairness keys and budget.

    Changing only those keeps the structure, so a database with live tokens can take the
    new file: a schedule says when tokens start, a resource when a task may run, a fairness
    key in which order tasks are claimed, never how a token moves.
    """
    document = msgspec.to_builtins(graph)
    document.pop("schedules", None)
    document.pop("resources", None)
    document.pop("budget", None)
    document.pop("budget_warn", None)
    for workflow in (document, *document.get("workflows", {}).values()):
        workflow.pop("fairness", None)
        for state in workflow["states"].values():
            for key in TIMING:
                state.pop(key, None)
    return _digest(document)
