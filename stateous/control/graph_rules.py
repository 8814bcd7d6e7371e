"""What a graph file must hold before it is served, checked whole at start.

The compiler writes graph files that follow these rules, but a file can be edited
by hand. A mistake found here stops `serve` with one sentence that names the field
(`states.review.timeout: ...`), before the database opens, instead of a 500 for
the first token that meets it. Schemas are checked where they are compiled, in
`graph.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from stateous.model.backoff import backoff_problem
from stateous.model.budgets import budget_problems, graph_reserves
from stateous.model.durations import parse_duration
from stateous.model.graph_file import GraphFile, StateSpec, WorkflowSpec
from stateous.model.guards import GuardSyntaxError, parse
from stateous.model.keys import key_path
from stateous.model.names import BUILTIN_EVENTS, END_NAME, START_NAME, name_problem
from stateous.model.repeats import repeat_problem
from stateous.model.resources import resource_problems, use_problem
from stateous.model.schedule import problems as schedule_problems

JOINS = ("all", "any")


def problems(document: GraphFile) -> Iterator[str]:
    """Every mistake of the graph file, each as `field: sentence`."""
    if (problem := name_problem(document.workflow)) is not None:
        yield f"workflow: {problem}"
    for name in document.workflows:
        if (problem := name_problem(name)) is not None:
            yield f"workflows.{name}: {problem}"
    for name in (document.workflow, *document.workflows):
        prefix = "" if name == document.workflow else f"workflows.{name}."
        yield from _workflow(document, name, document.workflow_spec(name), prefix)
    for name, schedule in document.schedules.items():
        for problem in schedule_problems(
            name, schedule.cron, schedule.tz, schedule.overlap, schedule.catch_up
        ):
            yield f"schedules.{name}.{problem}"
    yield from _resources(document)
    yield from budget_problems(document.budget, document.budget_warn, graph_reserves(document))


def _resources(document: GraphFile) -> Iterator[str]:
    """The resources' declarations, and each state's uses of them."""
    for name, resource in document.resources.items():
        for found in resource_problems(name, resource.slots, resource.rate, resource.breaker):
            yield f"resources.{name}.{found}"
    slots = {name: resource.slots for name, resource in document.resources.items()}
    for name in (document.workflow, *document.workflows):
        prefix = "" if name == document.workflow else f"workflows.{name}."
        for state, spec in document.workflow_spec(name).states.items():
            for used, use in (spec.uses or {}).items():
                wrong = use_problem(used, use, slots)
                if wrong is not None:
                    yield f"{prefix}states.{state}.uses: {wrong}"


def _workflow(document: GraphFile, name: str, spec: WorkflowSpec, prefix: str) -> Iterator[str]:
    if spec.context is not None and spec.context not in document.schemas:
        yield f"{prefix}context: the graph file has no schema {spec.context!r}"
    for event, event_spec in spec.events.items():
        where = f"{prefix}events.{event}"
        if (problem := name_problem(event)) is not None:
            yield f"{where}: {problem}"
        elif event in BUILTIN_EVENTS:
            yield f"{where}: {event!r} is an event of Stateous itself; it cannot be declared"
        if event_spec.payload is not None and event_spec.payload not in document.schemas:
            yield f"{where}.payload: the graph file has no schema {event_spec.payload!r}"
    if spec.fairness is not None:
        try:
            key_path(spec.fairness)
        except GuardSyntaxError as ex:
            yield f"{prefix}fairness: {spec.fairness!r} is no key expression: {ex}"
    for state, state_spec in spec.states.items():
        yield from _state(document, name, spec, state, state_spec, f"{prefix}states.{state}")
    for index, transition in enumerate(spec.transitions):
        where = f"{prefix}transitions[{index}]"
        if transition.source == END_NAME:
            yield f"{where}.from: no transition leaves END"
        elif transition.source != START_NAME and transition.source not in spec.states:
            yield f"{where}.from: workflow {name!r} has no state {transition.source!r}"
        if transition.target == START_NAME:
            yield f"{where}.to: no transition enters START"
        elif transition.target != END_NAME and transition.target not in spec.states:
            yield f"{where}.to: workflow {name!r} has no state {transition.target!r}"
        yield from _event_of(name, spec, transition.source, transition.on, f"{where}.on")
        if transition.when is not None:
            try:
                parse(transition.when)
            except GuardSyntaxError as ex:
                yield f"{where}.when: the guard {transition.when!r} does not parse: {ex}"


def _event_of(
    name: str, spec: WorkflowSpec, source: str, event: str | None, where: str
) -> Iterator[str]:
    """The event of a transition: none out of START, a declared or built-in one elsewhere."""
    if source == START_NAME:
        if event is not None:
            yield f"{where}: a transition from START takes no event"
    elif event is None:
        yield f"{where}: a transition from {source!r} needs an event"
    elif event not in spec.events and event not in BUILTIN_EVENTS:
        yield f"{where}: workflow {name!r} has no event {event!r}"


def _state(
    document: GraphFile,
    name: str,
    spec: WorkflowSpec,
    state: str,
    state_spec: StateSpec,
    where: str,
) -> Iterator[str]:
    if (problem := name_problem(state)) is not None:
        yield f"{where}: {problem}"
    if state_spec.timeout is not None:
        try:
            parse_duration(state_spec.timeout)
        except ValueError as ex:
            yield f"{where}.timeout: {ex}"
    if state_spec.retries < 0:
        yield f"{where}.retries: {state_spec.retries} is not a whole number, 0 or more"
    problem = backoff_problem(
        state_spec.retries, state_spec.retry_delay, state_spec.retry_delay_max
    )
    if problem is not None:
        yield f"{where}: {problem}"
    if (problem := repeat_problem(state_spec.retries, state_spec.stop_on_repeat)) is not None:
        yield f"{where}.stop_on_repeat: {problem}"
    for index, event in enumerate(state_spec.emits or []):
        if event not in spec.events:
            yield f"{where}.emits[{index}]: workflow {name!r} has no event {event!r}"
    if state_spec.parallel is None:
        return
    for index, child in enumerate(state_spec.parallel):
        if child not in document.workflows:
            yield f"{where}.parallel[{index}]: the graph file has no workflow {child!r}"
    join: Any = state_spec.join
    if join is not None and join not in JOINS:
        yield f"{where}.join: {join!r} is not a join; it is 'all' or 'any'"
