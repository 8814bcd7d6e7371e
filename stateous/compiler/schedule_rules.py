"""The compiler's rules for schedules: each context fits the workflow's context model, and
only the top workflow has schedules (a child workflow's tokens start from its parent)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from stateous.model.graph_file import ScheduleSpec
from stateous.model.workflow import Workflow


def context_problem(model: type | None, context: dict[str, Any]) -> str | None:
    """Say why a schedule's context does not fit the model, or None when it does."""
    try:
        msgspec.json.encode(context)
        if model is None:
            return None
        if issubclass(model, msgspec.Struct):
            msgspec.convert(context, model)
        else:
            model.model_validate(context)  # type: ignore[attr-defined]
    except (msgspec.ValidationError, msgspec.EncodeError, TypeError, ValueError) as ex:
        return str(ex).splitlines()[0]
    return None


def check_schedules(top: Workflow, tree: list[Workflow]) -> Iterator[str]:
    """The problems of the schedules of a workflow tree."""
    for child in tree[1:]:
        if child.schedules:
            yield (
                f"workflow {child.name!r} runs in a parallel state, so it cannot have schedules;"
                f" declare them on {top.name!r}"
            )
    for name, schedule in top.schedules.items():
        problem = context_problem(top.context, schedule.context)
        if problem is not None:
            yield f"schedule {name!r}: context: {problem}"


def schedule_specs(top: Workflow) -> dict[str, ScheduleSpec]:
    """The schedules of the graph file, in the order `flow.py` declared them."""
    return {
        name: ScheduleSpec(
            cron=" ".join(schedule.cron.split()),
            tz=schedule.tz,
            context=schedule.context,
            overlap=schedule.overlap,
            catch_up=schedule.catch_up,
        )
        for name, schedule in top.schedules.items()
    }
