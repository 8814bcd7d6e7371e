"""The rules for the transitions of one state on one event: guards, fallbacks, overlaps.

A group is either one plain transition, or guarded transitions with at most one
fallback (`otherwise=True`). Each guard must parse, must read only fields that
its models have, and no two guards of a group may be true together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stateous.compiler.fields import Domain, domain_of, field_schema
from stateous.compiler.overlap import Overlap, Unprovable, check_pair
from stateous.compiler.schemas import Models
from stateous.model.guards import (
    BranchRef,
    CountRef,
    CtxRef,
    Guard,
    GuardSyntaxError,
    PayloadRef,
    parse,
)
from stateous.model.names import BUILTIN_EVENTS, END_NAME, JOINED_EVENT, START_NAME
from stateous.model.workflow import Transition, Workflow

#: What the event `joined` carries: one entry per child that ended.
JOINED_PAYLOAD = {
    "type": "object",
    "properties": {"branches": {"type": "array", "items": {"type": "object"}}},
    "required": ["branches"],
}


def payload_schema(workflow: Workflow, event: str | None, models: Models) -> dict[str, Any] | None:
    """The JSON Schema of what `event` carries in `workflow`; None when it has no model."""
    if event == JOINED_EVENT:
        return JOINED_PAYLOAD
    declared = workflow.events.get(event or "")
    if declared is None or declared.payload is None:
        return None
    return models.schemas.get(declared.payload.__name__)


#: What a branch's field holds: the payload of the events that end its child (`result`),
#: or of those that bring it into a state (`payload`); with the words that name them.
_BRANCH_SOURCES = {
    "result": (True, "ends the children", "end the children"),
    "payload": (False, "brings a child into a state", "bring a child into a state"),
}


def child_events(
    workflow: Workflow, state: str, models: Models, *, ending: bool
) -> list[tuple[str, Any]]:
    """The events of the children of the parallel `state` whose transitions go to END
    (`ending`) or to a state, each named with its child, with the schema of its payload."""
    spec = workflow.states.get(state)
    found: list[tuple[str, Any]] = []
    for child in spec.parallel if spec is not None else ():
        names = [
            item.event_name
            for item in child.transitions
            if (item.target_name == END_NAME) == ending and item.event_name is not None
        ]
        for event in dict.fromkeys(names):
            found.append((f"{event!r} of {child.name!r}", payload_schema(child, event, models)))
    return found


class Group:
    """The transitions from one state on one event, with what their guards may read."""

    def __init__(
        self,
        workflow: Workflow,
        top: Workflow,
        source: str,
        event: str | None,
        transitions: list[Transition],
        models: Models,
    ) -> None:
        self.workflow = workflow
        self.source = source
        self.event = event
        self.transitions = transitions
        where = "" if workflow is top else f" of workflow {workflow.name!r}"
        self.label = f"from START{where}" if event is None else f"{event!r} from {source!r}{where}"
        self.context = models.schemas.get(workflow.context.__name__) if workflow.context else None
        self.payload = payload_schema(workflow, event, models)
        self.models = models

    def check(self) -> Iterator[str]:
        """Yield every problem of the group."""
        yield from self._check_shape()
        guards: list[Guard] = []
        for transition in self.transitions:
            if transition.when is None:
                continue
            try:
                guard = parse(transition.when)
            except GuardSyntaxError as ex:
                yield f"{self.label}: the guard {transition.when!r} has a syntax error {ex}"
                continue
            problems = list(self._check_reads(guard))
            yield from problems
            if not problems:
                guards.append(guard)
        yield from self._check_overlaps(guards)

    def _check_shape(self) -> Iterator[str]:
        guarded = [item for item in self.transitions if item.when is not None]
        fallbacks = [item for item in self.transitions if item.otherwise]
        plain = [item for item in self.transitions if item.when is None and not item.otherwise]
        if len(fallbacks) > 1:
            yield (
                f"{self.label} has {len(fallbacks)} transitions with otherwise=True; "
                "keep one fallback"
            )
        if guarded and plain:
            yield (
                f"{self.label} has guarded transitions and an unguarded one; "
                "mark the unguarded one otherwise=True"
            )
        elif not guarded and len(plain) + len(fallbacks) > 1:
            yield (
                f"{self.label} has {len(plain) + len(fallbacks)} transitions and no guard; "
                "give them guards (when=), and make at most one the fallback (otherwise=True)"
            )

    def _check_reads(self, guard: Guard) -> Iterator[str]:
        text = repr(guard.text)
        if self.source == START_NAME and (
            guard.uses_branches
            or guard.counted
            or any(isinstance(ref, PayloadRef) for ref in guard.refs)
        ):
            yield (
                f"{self.label}: the guard {text} reads more than the context; a guard from "
                "START reads only ctx['...'], since a new token has no event yet"
            )
            return
        if guard.uses_branches and self.event != JOINED_EVENT:
            yield f"{self.label}: the guard {text} uses branches, which only 'joined' has"
        for name in guard.counted:
            if name not in self.workflow.events and name not in BUILTIN_EVENTS:
                yield (
                    f"{self.label}: the guard {text} counts {name!r}, which is not an event "
                    f"of workflow {self.workflow.name!r}"
                )
        for ref in guard.refs:
            if isinstance(ref, CtxRef):
                yield from self._check_field(text, ref, self.context, "the context")
            elif isinstance(ref, PayloadRef):
                yield from self._check_field(
                    text, ref, self.payload, f"the payload of {self.event!r}"
                )
        if self.event == JOINED_EVENT:
            for branch_ref in guard.branch_refs:
                yield from self._check_branch_field(text, branch_ref)

    def _check_field(
        self, text: str, ref: CtxRef | PayloadRef, schema: dict[str, Any] | None, owner: str
    ) -> Iterator[str]:
        if schema is None:
            yield f"{self.label}: the guard {text} reads {ref.label}, but {owner} has no model"
        elif field_schema(schema, ref.path) is None:
            yield f"{self.label}: the guard {text} reads {ref.label}, which {owner} does not have"

    def _check_branch_field(self, text: str, ref: BranchRef) -> Iterator[str]:
        """A field of a branch's `result` or `payload` must be in the payload model of some
        event that can fill it, as a field of the event's own payload must."""
        source = _BRANCH_SOURCES.get(ref.path[0])
        if source is None or len(ref.path) == 1:
            return
        ending, one, many = source
        events = child_events(self.workflow, self.source, self.models, ending=ending)
        listed = f" ({', '.join(label for label, _ in events)})" if events else ""
        schemas = [schema for _, schema in events if schema is not None]
        if not schemas:
            yield (
                f"{self.label}: the guard {text} reads {ref.label}, but no event that {one} "
                f"has a payload model{listed}"
            )
        elif all(field_schema(schema, ref.path[1:]) is None for schema in schemas):
            yield (
                f"{self.label}: the guard {text} reads {ref.label}, which no payload of the "
                f"events that {many} has{listed}"
            )

    def _domain(self, ref: object) -> Domain:
        if isinstance(ref, CountRef):
            return Domain.counter(1 if ref.event == self.event else 0)
        if not isinstance(ref, CtxRef | PayloadRef):
            return Domain.anything()
        schema = (self.context if isinstance(ref, CtxRef) else self.payload) or {}
        field = field_schema(schema, ref.path)
        return Domain.anything() if field is None else domain_of(field, schema)

    def _check_overlaps(self, guards: list[Guard]) -> Iterator[str]:
        for index, first in enumerate(guards):
            for second in guards[index + 1 :]:
                verdict = check_pair(first, second, self._domain)
                pair = f"the guards {first.text!r} and {second.text!r}"
                if isinstance(verdict, Overlap):
                    yield (
                        f"{self.label}: {pair} can both be true, e.g. when "
                        f"{verdict.describe()}; make them exclusive, or make one the fallback "
                        "(otherwise=True)"
                    )
                elif isinstance(verdict, Unprovable):
                    yield (
                        f"{self.label}: compile cannot prove that {pair} are never both true "
                        f"({verdict.reason}); make one of them the fallback (otherwise=True)"
                    )
