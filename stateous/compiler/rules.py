"""The rules that a whole workflow must follow, beyond what a single call can see.

Each check appends one sentence per problem, naming the workflow, state or event
and saying how to fix it; nothing stops at the first problem, so one compile run
shows everything that is wrong.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from stateous.compiler.schemas import Models
from stateous.model.names import BUILTIN_EVENTS, END_NAME, START_NAME
from stateous.model.workflow import Transition, Workflow

#: A top token id may have this many characters, and every child id must still fit.
TOP_ID = 64
ID_LIMIT = 128
#: The digits kept free for a visit number in a child id.
VISIT_DIGITS = 4


def _where(workflow: Workflow, top: Workflow) -> str:
    return "" if workflow is top else f" of workflow {workflow.name!r}"


def groups(workflow: Workflow) -> dict[tuple[str, str | None], list[Transition]]:
    """Group the transitions by source state and event, in declaration order."""
    grouped: dict[tuple[str, str | None], list[Transition]] = defaultdict(list)
    for transition in workflow.transitions:
        grouped[transition.source_name, transition.event_name].append(transition)
    return grouped


def check_names(tree: list[Workflow]) -> Iterator[str]:
    """Each workflow of the tree has a name of its own."""
    seen: dict[str, Workflow] = {}
    for workflow in tree:
        if workflow.name in seen and seen[workflow.name] is not workflow:
            yield f"two different workflows are named {workflow.name!r}; rename one"
        seen.setdefault(workflow.name, workflow)


def check_ends(workflow: Workflow, top: Workflow) -> Iterator[str]:
    """Each transition names states and events that the workflow has."""
    where = _where(workflow, top)
    names = {START_NAME, END_NAME, *workflow.states}
    for transition in workflow.transitions:
        for end in (transition.source_name, transition.target_name):
            if end not in names:
                yield (
                    f"a transition names state {end!r}, which workflow {workflow.name!r} "
                    "does not declare; declare it with flow.state(...)"
                )
        event = transition.event_name
        if event is not None and event not in workflow.events and event not in BUILTIN_EVENTS:
            yield (
                f"the transition from {transition.source_name!r} on {event!r}{where} names an "
                "event that is not declared; declare it with flow.event(...)"
            )


def check_paths(workflow: Workflow, top: Workflow) -> Iterator[str]:
    """A token can start, can end, and can reach every state."""
    where = _where(workflow, top)
    targets: dict[str, set[str]] = defaultdict(set)
    for transition in workflow.transitions:
        targets[transition.source_name].add(transition.target_name)
    if START_NAME not in targets:
        yield (
            f"workflow {workflow.name!r} has no transition from START; "
            "add flow.transition(START, <state>)"
        )
    if not any(END_NAME in ends for ends in targets.values()):
        yield (
            f"workflow {workflow.name!r} has no transition into END; "
            "add one, so that a token can complete"
        )
    reached, pending = {START_NAME}, [START_NAME]
    while pending:
        for target in targets.get(pending.pop(), set()) - reached:
            reached.add(target)
            pending.append(target)
    for name in workflow.states:
        if name not in reached:
            yield f"state {name!r}{where} cannot be reached from START; add a transition into it"
        elif name not in targets:
            yield (
                f"state {name!r}{where} has no transition out of it; "
                "a token there could never move on"
            )


def check_builtin_events(workflow: Workflow, top: Workflow) -> Iterator[str]:
    """`joined` belongs to parallel states, `error` to states with a task."""
    where = _where(workflow, top)
    events_from: dict[str, set[str | None]] = defaultdict(set)
    for transition in workflow.transitions:
        events_from[transition.source_name].add(transition.event_name)
    for name, state in workflow.states.items():
        events = events_from[name]
        if state.is_parallel:
            if "joined" not in events:
                yield (
                    f"parallel state {name!r}{where} has no transition on 'joined'; "
                    "add one, for when its children are done"
                )
            if "error" in events:
                yield (
                    f"parallel state {name!r}{where} has a transition on 'error', but it has "
                    "no task that could fail; remove it"
                )
        elif "joined" in events:
            yield (
                f"state {name!r}{where} has a transition on 'joined', but only a parallel "
                "state is joined; remove it"
            )


def check_parallel(workflow: Workflow, top: Workflow, models: Models) -> Iterator[str]:
    """The inputs of a parallel state give every field that its children require."""
    where = _where(workflow, top)
    context = models.schemas.get(workflow.context.__name__) if workflow.context else None
    parent_fields = set((context or {}).get("properties", {}))
    for name, state in workflow.states.items():
        if not state.is_parallel:
            continue
        for key in state.inputs:
            if key not in parent_fields:
                yield (
                    f"parallel state {name!r}{where}: inputs= names {key!r}, which the context "
                    f"of workflow {workflow.name!r} does not have"
                )
        for child in state.parallel:
            schema = models.schemas.get(child.context.__name__) if child.context else None
            for field in (schema or {}).get("required", []):
                if field not in state.inputs:
                    yield (
                        f"parallel state {name!r}{where}: the context of workflow "
                        f"{child.name!r} requires {field!r}; add it to inputs="
                    )


def check_nesting(top: Workflow) -> Iterator[str]:
    """No workflow runs itself, and every child id fits when the top id has 64 characters."""

    def walk(workflow: Workflow, length: int, path: tuple[str, ...]) -> Iterator[str]:
        for name, state in workflow.states.items():
            for child in state.parallel:
                if child.name in path:
                    yield (
                        f"workflow {child.name!r} runs itself through parallel state {name!r}; "
                        "a workflow cannot contain itself"
                    )
                    continue
                grown = length + len(f".{name}.") + VISIT_DIGITS + len(f".{child.name}")
                if grown > ID_LIMIT:
                    yield (
                        f"parallel state {name!r} of workflow {workflow.name!r}: a child id "
                        f"for {child.name!r} would have {grown} characters with a top id of "
                        f"{TOP_ID}, more than {ID_LIMIT}; shorten the names of the states or "
                        "workflows"
                    )
                    continue
                yield from walk(child, grown, (*path, child.name))

    yield from walk(top, TOP_ID, (top.name,))
