"""The SQL of plans: the bulk operations that act on an exact set of tokens, once each.

A plan is a row of `plans` (its action, the action's options, the filter it was made
with) and one row of `plan_tokens` per token, numbered in the order the plan lists
them. A token's row is marked (`applied_at`, its outcome, the reason of a refusal) in
the transaction that acts on it, so an apply run again skips it. Nothing here decides
which tokens a plan holds or what acting on one means: `stateous.control.plans` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.store.columns import decode, insert_rows, json_text, time_or_none
from stateous.control.store.rows import from_column
from stateous.control.store.statements import Statements

#: How many tokens of a plan one INSERT writes.
PLAN_BATCH = 200
PLAN_COLUMNS = "id, action, options, filter, made_by, made_at"
PLAN_TOKEN_COLUMNS = "n, token, outcome, reason, applied_at"


@dataclass(frozen=True, slots=True)
class PlanRow:
    """A plan: what it does, with which options, to the tokens of which filter."""

    id: str
    action: str
    options: dict[str, Any]
    filter: dict[str, str]
    made_by: str | None
    made_at: float


@dataclass(frozen=True, slots=True)
class PlanTokenRow:
    """One token of a plan, at its place `n`; `applied_at` is None until it was acted on."""

    n: int
    token: str
    outcome: str | None
    reason: str | None
    applied_at: float | None


def plan_row(row: tuple[Any, ...]) -> PlanRow:
    ident, action, options, where, made_by, made_at = row
    return PlanRow(ident, action, decode(options), decode(where), made_by, from_column(made_at))


def plan_token_row(row: tuple[Any, ...]) -> PlanTokenRow:
    n, token, outcome, reason, applied_at = row
    return PlanTokenRow(n, token, outcome, reason, time_or_none(applied_at))


class PlanSql(Statements):
    """The plan verbs of `Tx`, over the `execute` of a store's transaction."""

    def insert_plan(self, plan: PlanRow, tokens: list[str]) -> None:
        """Keep a plan and its tokens, numbered from 1 in the order given."""
        self.change(
            f"INSERT INTO plans ({PLAN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
            (
                plan.id,
                plan.action,
                json_text(plan.options),
                json_text(plan.filter),
                plan.made_by,
                self.stamp,
            ),
        )
        numbered = list(enumerate(tokens, start=1))
        for start in range(0, len(numbered), PLAN_BATCH):
            batch = numbered[start : start + PLAN_BATCH]
            self.change(
                insert_rows("INSERT INTO plan_tokens (plan, n, token)", 3, len(batch)),
                tuple(value for n, token in batch for value in (plan.id, n, token)),
            )

    def plan(self, plan: str) -> PlanRow | None:
        rows = self.execute(f"SELECT {PLAN_COLUMNS} FROM plans WHERE id = ?", (plan,))
        return plan_row(rows[0]) if rows else None

    def plan_tokens(self, plan: str) -> list[PlanTokenRow]:
        """Every token of a plan, in its order."""
        rows = self.execute(
            f"SELECT {PLAN_TOKEN_COLUMNS} FROM plan_tokens WHERE plan = ? ORDER BY n", (plan,)
        )
        return [plan_token_row(row) for row in rows]

    def plan_token(self, plan: str, n: int) -> PlanTokenRow | None:
        rows = self.execute(
            f"SELECT {PLAN_TOKEN_COLUMNS} FROM plan_tokens WHERE plan = ? AND n = ?", (plan, n)
        )
        return plan_token_row(rows[0]) if rows else None

    def mark_plan_token(self, plan: str, n: int, outcome: str, reason: str | None) -> None:
        """Mark a token of a plan acted on, with its outcome, unless it was already."""
        self.change(
            "UPDATE plan_tokens SET outcome = ?, reason = ?, applied_at = ? "
            "WHERE plan = ? AND n = ? AND applied_at IS NULL",
            (outcome, reason, self.stamp, plan, n),
        )
