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
    CountRef,
    CtxRef,
    Guard,
    GuardSyntaxError,
    PayloadRef,
    parse,
)
from stateous.model.names import BUILTIN_EVENTS, START_NAME
from stateous.model.workflow import Transition, Workflow

#: What the event `joined` carries: one entry per child that ended.
JOINED_PAYLOAD = {
    "type": "object",
    "properties": {"branches": {"type": "array", "items": {"type": "object"}}},
    "required": ["branches"],
}


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
        self.payload = self._payload_schema(models)

    def _payload_schema(self, models: Models) -> dict[str, Any] | None:
        if self.event == "joined":
            return JOINED_PAYLOAD
        declared = self.workflow.events.get(self.event or "")
        if declared is None or declared.payload is None:
            return None
        return models.schemas.get(declared.payload.__name__)

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
        if guard.uses_branches and self.event != "joined":
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

    def _check_field(
        self, text: str, ref: CtxRef | PayloadRef, schema: dict[str, Any] | None, owner: str
    ) -> Iterator[str]:
        if schema is None:
            yield f"{self.label}: the guard {text} reads {ref.label}, but {owner} has no model"
        elif field_schema(schema, ref.path) is None:
            yield f"{self.label}: the guard {text} reads {ref.label}, which {owner} does not have"

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
