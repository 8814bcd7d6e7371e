"""The statements of budgets: the budget a token holds for its tree, and what each claimed
task reserved of it.

A row of `budgets` is the budget of a tree of tokens, kept under its top token: its
limits and what the tree has spent, by unit. A row of `budget_reservations` is what a claimed
task reserved until its attempt ends. Nothing here decides what fits:
`stateous.control.budgets` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stateous.control.store.columns import decode, json_text
from stateous.control.store.statements import Statements

BUDGET_COLUMNS = "token, limits, warn, spent, warned, over"


@dataclass(slots=True)
class BudgetRow:
    """The budget of a tree, kept under its top token: its `limits` and what it `spent`,
    by unit; the share of a limit that warns; the units warned of; whether a limit is
    reached."""

    token: str
    limits: dict[str, float]
    warn: float
    spent: dict[str, float] = field(default_factory=dict)
    warned: list[str] = field(default_factory=list)
    over: bool = False


def _budget(row: tuple[Any, ...]) -> BudgetRow:
    token, limits, warn, spent, warned, over = row
    return BudgetRow(token, decode(limits), float(warn), decode(spent), decode(warned), bool(over))


class BudgetSql(Statements):
    """The verbs of budgets."""

    def any_budget(self) -> bool:
        """Whether any token holds a budget: without one, a claim never looks for one."""
        return self.one("SELECT 1 FROM budgets LIMIT 1", ()) is not None

    def budget(self, token: str) -> BudgetRow | None:
        """The budget that `token` holds, locked to the end of a write."""
        row = self.one(
            f"SELECT {BUDGET_COLUMNS} FROM budgets WHERE token = ?{self.for_update}", (token,)
        )
        return None if row is None else _budget(row)

    def put_budget(self, row: BudgetRow) -> None:
        self.change(
            f"INSERT INTO budgets ({BUDGET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (token) DO UPDATE SET limits = excluded.limits, warn = excluded.warn, "
            "spent = excluded.spent, warned = excluded.warned, over = excluded.over",
            (
                row.token,
                json_text(row.limits),
                row.warn,
                json_text(row.spent),
                json_text(row.warned),
                int(row.over),
            ),
        )

    def reserved(self, budget: str) -> list[dict[str, float]]:
        """What each claimed task of the tree of `budget` reserved."""
        rows = self.execute("SELECT amounts FROM budget_reservations WHERE budget = ?", (budget,))
        return [decode(amounts) for (amounts,) in rows]

    def reserve(self, task: int, budget: str, amounts: dict[str, float]) -> None:
        self.change(
            "INSERT INTO budget_reservations (task, budget, amounts) VALUES (?, ?, ?)",
            (task, budget, json_text(amounts)),
        )

    def unreserve(self, task: int) -> str | None:
        """Let go of what a task reserved; the budget it reserved of, if any."""
        rows = self.execute(
            "DELETE FROM budget_reservations WHERE task = ? RETURNING budget", (task,)
        )
        return str(rows[0][0]) if rows else None

    def let_in_budget(self, waits_for: str) -> int:
        """Put back in their queues the tasks that wait for this budget; how many."""
        rows = self.execute(
            "UPDATE tasks SET waits_for = NULL WHERE waits_for = ? RETURNING id", (waits_for,)
        )
        return len(rows)
