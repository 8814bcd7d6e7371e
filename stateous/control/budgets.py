"""Budgets per token tree: what a tree may spend, what its claimed tasks reserved of it, and
what its routines spent.

A budget is kept under the top token of its tree (`budgets`); each child spends from it.
A claim of a task whose tree has a budget is granted only when the state's reservation
fits what is left (the limit, less what the tree spent and what its other claimed tasks
reserved) and the tree's spend has not reached a limit (a reservation that can never fit,
since no other task holds any, counts as reaching it; then only the top token's own
tasks that reserve nothing run: where its graph routed `over_budget`); a task that does
not fit leaves
its queue's index (`tasks.waits_for`) until the tree's budget frees up, so a claim never
passes over it again. The attempt's end settles its reservation. Until a database holds
its first budget, a claim does not look for one: a workflow without budgets pays nothing.
Everything runs inside the caller's transaction; what becomes of a tree whose spend
reached its budget is `spending.reach`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from stateous.control.store import BudgetRow, TaskRow, TokenRow, Tx
from stateous.control.versions import Graphs
from stateous.model.budgets import added, summed
from stateous.model.vocabulary import Kind

#: What becomes of a tree whose spend reached its budget, by its top token's id, in a change
#: (`stateous.control.spending.reach`).
Reach = Callable[[Tx, str], None]


def waits(budget: str) -> str:
    """What a task that waits for its tree's budget keeps in `tasks.waits_for`."""
    return f"the budget of {budget}"


def fits(budget: BudgetRow, held: list[dict[str, float]], reserve: Mapping[str, float]) -> bool:
    """Whether `reserve` fits what is left of `budget`, less what is `held` already."""
    if budget.over:
        return False
    taken = added(summed(held), budget.spent)
    return all(
        taken.get(unit, 0) + amount <= budget.limits[unit]
        for unit, amount in reserve.items()
        if unit in budget.limits
    )


def reached(budget: BudgetRow) -> bool:
    """Whether the tree's spend reached one of its limits."""
    return any(budget.spent.get(unit, 0) >= limit for unit, limit in budget.limits.items())


def owed(tx: Tx, top: str) -> bool:
    """Whether the tree of `top` has not met `over_budget` since its budget was set or
    changed: a spend that reached it while its top token was paused waits for its resume."""
    last = tx.last_entry(top, (Kind.OVER_BUDGET, Kind.BUDGET_SET, Kind.BUDGET_RAISED))
    return last is None or last.kind != Kind.OVER_BUDGET


class Budgets:
    """The budgets of token trees, as claims, reports and starts meet them."""

    def __init__(self, graphs: Graphs, reach: Reach | None = None) -> None:
        self.graphs = graphs
        self.reach = reach
        #: Whether the database holds a budget (None: not read yet); once true, it stays.
        self._live: bool | None = None

    def live(self, tx: Tx) -> bool:
        """Whether any token holds a budget: read once, then kept, and set by `open`."""
        if self._live is None:
            self._live = tx.any_budget()
        return self._live

    def open(self, tx: Tx, token: str, limits: dict[str, float], warn: float) -> None:
        """Give a new top token its tree's budget."""
        tx.put_budget(BudgetRow(token, dict(limits), warn))
        tx.record(token, Kind.BUDGET_SET, {"budget": limits, "warn": warn})
        self._live = True

    def of(self, tx: Tx, token: TokenRow) -> BudgetRow | None:
        """The budget of the token's tree, held by it or the nearest of its ancestors."""
        row: TokenRow | None = token
        while row is not None:
            budget = tx.budget(row.token)
            if budget is not None or row.parent is None:
                return budget
            row = tx.token(row.parent)
        return None

    def reservation(self, tx: Tx, token: TokenRow) -> dict[str, float]:
        """What the task of the token's state reserves of its tree's budget."""
        graph = self.graphs.of(tx, token.checksum)
        return graph.flows[token.workflow or graph.name].state(token.state).reserve or {}

    def admits(self, tx: Tx, task: TaskRow) -> bool:
        """Whether a claim may take this queued task: its tree has no budget, or its
        reservation fits what is left (then kept). A task that does not fit leaves its
        queue until its tree's budget frees up."""
        if not self.live(tx):
            return True
        token = tx.token(task.token)
        budget = None if token is None else self.of(tx, token)
        if token is None or budget is None:
            return True
        reserve = self.reservation(tx, token)
        if budget.over and not reserve and token.token == budget.token:
            return True
        held = tx.reserved(budget.token) if reserve else []
        if fits(budget, held, reserve):
            if reserve:
                tx.reserve(task.id, budget.token, reserve)
            return True
        tx.wait_for(task.id, waits(budget.token))
        if not budget.over and not held and self.reach is not None:
            # Nothing is held that could free the budget: what is left is spent for good.
            budget.over = True
            tx.put_budget(budget)
            self.reach(tx, budget.token)
        return False

    def resumed(self, tx: Tx, token: str) -> None:
        """At the resume of a top token whose tree reached its budget meanwhile, `reach`:
        it could not act on the tree while it was paused, and its tasks wait for the budget."""
        if not self.live(tx) or self.reach is None:
            return
        budget = tx.budget(token)
        if budget is not None and budget.over and owed(tx, token):
            self.reach(tx, token)

    def settle(self, tx: Tx, task: int) -> None:
        """Let go of what the task's attempt reserved, and put back in their queues the
        tasks that waited for its tree's budget, unless its spend reached a limit."""
        if not self.live(tx):
            return
        kept = tx.unreserve(task)
        budget = None if kept is None else tx.budget(kept)
        if budget is not None and not budget.over and tx.let_in_budget(waits(budget.token)):
            tx.let_in()

    def spend(
        self,
        tx: Tx,
        task: TaskRow,
        token: TokenRow,
        amounts: dict[str, Any],
        key: str | None = None,
    ) -> str | None:
        """Keep what an attempt spent: a ledger row on its token (with the spend's `key`),
        and its tree's total, with a row on the top token when the spend crosses the warning
        share of a limit; answer the top token when the spend has just reached a limit."""
        data = {"task": task.id, "attempt": task.attempt, "spent": amounts}
        tx.record(token.token, Kind.SPENT, data, key)
        budget = self.of(tx, token)
        if budget is None:
            return None
        budget.spent = added(budget.spent, amounts)
        for unit, limit in sorted(budget.limits.items()):
            if unit not in budget.warned and budget.spent.get(unit, 0) >= limit * budget.warn:
                budget.warned.append(unit)
                tx.record(
                    budget.token,
                    Kind.BUDGET_WARNED,
                    {"unit": unit, "spent": budget.spent[unit], "limit": limit},
                )
        newly = not budget.over and reached(budget)
        if newly:
            budget.over = True
        tx.put_budget(budget)
        return budget.token if newly else None
