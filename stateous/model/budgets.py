"""Spend and budgets as numbers by unit: what a routine spent (`usd=0.12, tokens=3400`), what
a tree of tokens may spend, what a state reserves before it runs.

A unit is any short name (`usd`, `tokens`, `gpu_seconds`); an amount is a number, 0 or more.
Each check answers one sentence naming the field, or None, so that `flow.py`, the graph
file, a request and the supervisor refuse bad input in the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `token show` reads amounts without loading msgspec
    from stateous.model.graph_file import GraphFile

#: A unit's name: a letter, then letters, digits and underscores, 32 at most.
UNIT = re.compile(r"[a-z][a-z0-9_]{0,31}")
#: The share of a budget spent at which the ledger warns, unless the workflow says.
BUDGET_WARN = 0.8


def amounts_problem(field: str, amounts: object, *, positive: bool = False) -> str | None:
    """Why `amounts` is not a mapping of unit names to numbers (above 0 with `positive`,
    else 0 or more), or None."""
    if not isinstance(amounts, Mapping):
        return f"{field} takes units and numbers, as {{'usd': 0.5}}; not {amounts!r}"
    for unit, amount in amounts.items():
        if not isinstance(unit, str) or UNIT.fullmatch(unit) is None:
            return f"{field}: {unit!r} is not a unit name (a lower-case word, as 'usd')"
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            return f"{field}: {unit} is {amount!r}, not a number"
        if not math.isfinite(amount) or amount < 0 or (positive and amount == 0):
            least = "above 0" if positive else "0 or more"
            return f"{field}: {unit} is {amount!r}; it must be a number {least}"
    return None


def warn_problem(field: str, warn: object) -> str | None:
    """Why `warn` is not a share of a budget (above 0, at most 1), or None."""
    if isinstance(warn, bool) or not isinstance(warn, (int, float)) or not 0 < warn <= 1:
        return f"{field} is {warn!r}; it must be a share above 0 and at most 1, as 0.8"
    return None


def reserve_problem(
    field: str, reserve: Mapping[str, float], budget: Mapping[str, float]
) -> str | None:
    """Why a state's reservation cannot fit a budget: a unit the budget does not limit, or
    more than the budget; None when it fits."""
    for unit, amount in reserve.items():
        if unit not in budget:
            return f"{field}: the budget has no unit {unit!r} (it has {', '.join(sorted(budget))})"
        if amount > budget[unit]:
            return f"{field}: {unit} {amount:g} is more than the budget's {budget[unit]:g}"
    return None


def added(total: Mapping[str, float], more: Mapping[str, Any]) -> dict[str, float]:
    """`total` with `more` added to it, unit by unit."""
    out = dict(total)
    for unit, amount in more.items():
        out[unit] = out.get(unit, 0) + float(amount)
    return out


def summed(parts: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """All of `parts` added up, unit by unit."""
    total: dict[str, float] = {}
    for part in parts:
        total = added(total, part)
    return total


def amounts_text(amounts: Mapping[str, float]) -> str:
    """Amounts as a line shows them: `usd=0.42 tokens=3400`."""
    return " ".join(f"{unit}={amount:g}" for unit, amount in sorted(amounts.items())) or "nothing"


def budget_problems(
    budget: object, warn: object, reserves: Iterable[tuple[str, object]]
) -> Iterator[str]:
    """The mistakes of a workflow's budget, its warning share, and each state's reservation
    (`(field, reserve)`), each a sentence naming its field."""
    if budget is not None and (problem := amounts_problem("budget", budget, positive=True)):
        yield problem
    if warn is not None and (problem := warn_problem("budget_warn", warn)):
        yield problem
    limits = budget if isinstance(budget, Mapping) else {}
    for field, reserve in reserves:
        problem = amounts_problem(field, reserve)
        if problem is None and limits and isinstance(reserve, Mapping):
            problem = reserve_problem(field, reserve, limits)
        if problem is not None:
            yield problem


def graph_reserves(document: GraphFile) -> list[tuple[str, dict[str, float]]]:
    """Each reservation of a graph file's states, with the field that holds it."""
    return [
        (
            f"{'' if name == document.workflow else f'workflows.{name}.'}states.{state}.reserve",
            spec.reserve,
        )
        for name in (document.workflow, *document.workflows)
        for state, spec in document.workflow_spec(name).states.items()
        if spec.reserve is not None
    ]
