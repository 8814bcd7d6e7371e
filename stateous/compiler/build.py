"""Turn a checked workflow tree into the graph file document.

The order of everything follows the order of declaration in `flow.py`, so the
same flow always gives the same bytes.
"""

from __future__ import annotations

from stateous.compiler.resource_rules import resource_specs
from stateous.compiler.schedule_rules import schedule_specs
from stateous.compiler.schemas import Models
from stateous.model.budgets import BUDGET_WARN
from stateous.model.graph_file import (
    FORMAT,
    EventSpec,
    GraphFile,
    StateSpec,
    TransitionSpec,
    WorkflowSpec,
)
from stateous.model.workflow import State, Workflow


def emits(workflow: Workflow, state: State) -> list[str]:
    """List the declared events that leave `state`, in the order they were declared."""
    leaving = {t.event_name for t in workflow.transitions if t.source_name == state.name}
    return [name for name in workflow.events if name in leaving]


def _state_spec(workflow: Workflow, state: State) -> StateSpec:
    if state.is_parallel:
        return StateSpec(
            timeout=state.timeout,
            parallel=[child.name for child in state.parallel],
            join=state.join,
            inputs=list(state.inputs),
        )
    return StateSpec(
        timeout=state.timeout,
        retries=state.retries,
        retry_delay=state.retry_delay,
        retry_delay_max=state.retry_delay_max,
        stop_on_repeat=state.stop_on_repeat,
        emits=emits(workflow, state),
        uses=dict(state.uses) or None,
        needs=state.needs or None,
        prefers=state.prefers or None,
        prefer_for=state.prefer_for,
        reserve=state.reserve or None,
    )


def workflow_spec(workflow: Workflow, models: Models) -> WorkflowSpec:
    """Describe one workflow: its states, events and transitions."""
    return WorkflowSpec(
        context=models.add(workflow.context),
        states={name: _state_spec(workflow, state) for name, state in workflow.states.items()},
        events={
            name: EventSpec(payload=models.add(event.payload))
            for name, event in workflow.events.items()
        },
        transitions=[
            TransitionSpec(
                source=transition.source_name,
                target=transition.target_name,
                on=transition.event_name,
                when=transition.when,
                otherwise=transition.otherwise,
            )
            for transition in workflow.transitions
        ],
        fairness=workflow.fairness,
    )


def build_graph(tree: list[Workflow], models: Models) -> GraphFile:
    """Build the graph file of the top workflow `tree[0]` and its child workflows."""
    top = workflow_spec(tree[0], models)
    return GraphFile(
        stateous=FORMAT,
        workflow=tree[0].name,
        context=top.context,
        states=top.states,
        events=top.events,
        transitions=top.transitions,
        workflows={child.name: workflow_spec(child, models) for child in tree[1:]},
        schemas=dict(models.schemas),
        schedules=schedule_specs(tree[0]),
        resources=resource_specs(tree),
        fairness=top.fairness,
        budget=tree[0].budget or None,
        budget_warn=None if tree[0].budget_warn == BUDGET_WARN else tree[0].budget_warn,
    )
