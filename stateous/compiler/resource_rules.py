"""The compiler's rules for resources: each resource a state uses is declared in the
workflow tree, once (or alike in each workflow that declares it), each key expression
reads the context, and each count fits the resource's slots; and each state's reservation
fits the top workflow's budget (a child's tasks spend its top token's)."""

from __future__ import annotations

from collections.abc import Iterator

from stateous.model.budgets import budget_problems
from stateous.model.graph_file import ResourceSpec
from stateous.model.resources import use_problem
from stateous.model.workflow import Workflow


def resource_specs(tree: list[Workflow]) -> dict[str, ResourceSpec]:
    """The resources of a workflow tree, in the order `flow.py` declared them (the first
    declaration of a name; `check_resources` refuses unlike ones)."""
    specs: dict[str, ResourceSpec] = {}
    for workflow in tree:
        for name, resource in workflow.resources.items():
            specs.setdefault(
                name,
                ResourceSpec(slots=resource.slots, rate=resource.rate, breaker=resource.breaker),
            )
    return specs


def check_reserves(tree: list[Workflow]) -> Iterator[str]:
    """The reservations of a workflow tree's states against the top workflow's budget."""
    reserves = [
        (f"state {state.name!r} of workflow {workflow.name!r}: reserve", state.reserve)
        for workflow in tree
        for state in workflow.states.values()
        if state.reserve
    ]
    yield from budget_problems(tree[0].budget or None, None, reserves)


def check_resources(tree: list[Workflow]) -> Iterator[str]:
    """The problems of the resources of a workflow tree and of the states that use them."""
    specs = resource_specs(tree)
    for workflow in tree:
        for name, resource in workflow.resources.items():
            first = specs[name]
            if (first.slots, first.rate, first.breaker) != (
                resource.slots,
                resource.rate,
                resource.breaker,
            ):
                yield (
                    f"resource {name!r} is declared twice, unlike: slots={first.slots}, "
                    f"rate={first.rate!r}, breaker={first.breaker!r} and slots={resource.slots}, "
                    f"rate={resource.rate!r}, breaker={resource.breaker!r}"
                )
    slots = {name: spec.slots for name, spec in specs.items()}
    for workflow in tree:
        for state in workflow.states.values():
            for used, use in state.uses.items():
                problem = use_problem(used, use, slots)
                if problem is not None:
                    yield f"state {state.name!r} of workflow {workflow.name!r}: {problem}"
