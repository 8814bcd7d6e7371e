"""Plans: bulk pause, resume, cancel, retry and migrate over an exact set of tokens, once each.

Making a plan reads the tokens that a filter selects, in the order of `GET /tokens`,
and keeps that list with the action: what the plan will act on is fixed then, never
computed again. Applying it acts on each token still pending in a transaction of its
own, through the engine's own step (`Engine.pause_in`, ...): the action, its ledger
rows (the first names the plan and who asked), and the token's mark in the plan are
kept together or not at all, so an apply cut short and run again acts on no token
twice. A token that no longer matches the filter's status, state or parent, or that
the action refuses, is marked refused with the reason, and the apply goes on.

A plan to migrate holds top tokens only, since each moves with its children, and keeps
the checksum it moves them to (the graph served when the plan was made, unless named).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stateous.control import checks
from stateous.control.errors import (
    EngineError,
    InvalidArgument,
    PlanMismatch,
    PlanNotFound,
    PlanTooLarge,
)
from stateous.control.graph import Graph
from stateous.control.listings import matches_nothing, token_query
from stateous.control.migration import Migrations
from stateous.control.store import PlanRow, PlanTokenRow, TokenRow, Tx, to_iso
from stateous.model.names import END_NAME, START_NAME
from stateous.model.wire import PlanToken, PlanView

if TYPE_CHECKING:
    from stateous.control.engine import Engine

#: The actions a plan can take; each is the engine's step of the same name.
ACTIONS = ("pause", "resume", "cancel", "retry", "migrate")
#: The filters of a plan: those of `GET /tokens`.
FILTERS = ("status", "state", "parent", "checksum", "since", "until")
#: The filters that each token must still match when the plan acts on it; the times
#: select the tokens once, since every move changes a token's time.
KEPT = ("status", "state", "parent", "checksum")
#: The most tokens one plan holds.
MAX_PLAN_TOKENS = 10_000
#: The outcome of a token of a plan not acted on yet, and of one acted on.
PENDING, DONE, REFUSED = "pending", "done", "refused"


def parse_where(where: str) -> dict[str, str]:
    """Read `key=value` words, separated by spaces, into filters of `GET /tokens`."""
    found: dict[str, str] = {}
    for word in where.split():
        key, equals, value = word.partition("=")
        if not equals or not value:
            raise InvalidArgument(f"where: {word!r} is not key=value")
        if key not in FILTERS:
            raise InvalidArgument(f"where: {key!r} is no filter; use {', '.join(FILTERS)}")
        if key in found:
            raise InvalidArgument(f"where: {key!r} is given twice")
        found[key] = value
    if not found:
        raise InvalidArgument("where: name at least one filter, like status=failed")
    return found


def known_state(graph: Graph, state: str) -> None:
    """A plan's `state` filter names a state of the graph: a misspelt one is refused rather
    than planned as nothing."""
    names = {START_NAME, END_NAME}.union(*(flow.spec.states for flow in graph.flows.values()))
    if state not in names:
        raise InvalidArgument(f"where: the graph has no state {state!r}")


def options_of(action: str, state: str | None, to: str | None, served: str) -> dict[str, Any]:
    """The action's options as a plan keeps them: a retry's `from`, when given; a
    migration's `to`, the `served` checksum when not given."""
    if action not in ACTIONS:
        raise InvalidArgument(f"action must be one of {', '.join(ACTIONS)}")
    if state is not None and action != "retry":
        raise InvalidArgument("from is an option of retry only")
    if to is not None and action != "migrate":
        raise InvalidArgument("to is an option of migrate only")
    if action == "migrate":
        return {"to": served if to is None else to}
    return {} if state is None else {"from": state}


def still_matches(where: dict[str, str], row: TokenRow) -> str | None:
    """Why the token no longer matches the plan's filter, or None when it does."""
    now = {
        "status": row.status,
        "state": row.state,
        "parent": row.parent or "",
        "checksum": row.checksum or "",
    }
    for key in KEPT:
        if key in where and now[key] != where[key]:
            return (
                f"token {row.token!r} no longer matches {key}={where[key]}: "
                f"its {key} is {now[key] or 'none'}"
            )
    return None


def plan_view(plan: PlanRow, tokens: list[PlanTokenRow]) -> PlanView:
    shown = [
        PlanToken(
            token=row.token,
            outcome=row.outcome or PENDING,
            reason=row.reason,
            applied_at=None if row.applied_at is None else to_iso(row.applied_at),
        )
        for row in tokens
    ]
    return PlanView(
        plan=plan.id,
        action=plan.action,
        state=plan.options.get("from"),
        to=plan.options.get("to"),
        where=plan.filter,
        by=plan.made_by,
        made_at=to_iso(plan.made_at),
        pending=sum(row.applied_at is None for row in tokens),
        tokens=shown,
    )


class Plans:
    """Making, reading and applying plans, over one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.migrations = Migrations(engine)

    def make(
        self,
        action: str,
        where: str,
        state: str | None = None,
        to: str | None = None,
        *,
        by: str | None = None,
    ) -> PlanView:
        """Keep a plan of `action` over the tokens that `where` selects now."""
        options = options_of(action, state, to, self.engine.graph.checksum)
        filters = parse_where(where)
        if "state" in filters:
            known_state(self.engine.graph, filters["state"])
        # From the first token on: `where` names the filters only, never a page's cursor.
        query = token_query(MAX_PLAN_TOKENS + 1, after=None, **filters)
        ident = secrets.token_hex(8)

        def operation(tx: Tx) -> PlanView:
            if action == "migrate":
                self.engine.graphs.kept(options["to"], tx)
            rows = [] if matches_nothing(query) else tx.token_page(query)
            if len(rows) > MAX_PLAN_TOKENS:
                raise PlanTooLarge(
                    f"the filter selects more than {MAX_PLAN_TOKENS} tokens; narrow it"
                )
            if action == "migrate":
                rows = [(row, moved) for row, moved in rows if row.parent is None]
            plan = PlanRow(ident, action, options, filters, by, tx.now)
            tx.insert_plan(plan, [row.token for row, _ in rows])
            return plan_view(plan, tx.plan_tokens(ident))

        return self.engine.store.write(operation)

    def get(self, plan: str) -> PlanView:
        return self.engine.store.read(lambda tx: plan_view(*self._read(tx, plan)))

    @staticmethod
    def _read(tx: Tx, plan: str) -> tuple[PlanRow, list[PlanTokenRow]]:
        row = tx.plan(plan) if checks.keepable(plan) else None
        if row is None:
            raise PlanNotFound(f"no plan has the id {plan!r}")
        return row, tx.plan_tokens(plan)

    def apply(
        self,
        plan: str,
        action: str,
        state: str | None = None,
        to: str | None = None,
        limit: int | None = None,
        *,
        by: str | None = None,
    ) -> PlanView:
        """Act on the plan's pending tokens (at most `limit` of them), each once; the action
        and options must be those the plan was made with."""
        options = options_of(action, state, to, self.engine.graph.checksum)
        if limit is not None and limit < 1:
            raise InvalidArgument("limit must be 1 or more")
        row, tokens = self.engine.store.read(lambda tx: self._read(tx, plan))
        if (row.action, row.options) != (action, options):
            raise PlanMismatch(
                f"plan {plan!r} was made to {row.action}"
                + "".join(f" with {key} {value!r}" for key, value in row.options.items())
                + "; apply it with the same action and options"
            )
        pending = [token for token in tokens if token.applied_at is None]
        for token in pending[:limit]:
            self._apply_one(row, token, by)
        return self.engine.store.read(lambda tx: plan_view(*self._read(tx, plan)))

    def _apply_one(self, plan: PlanRow, token: PlanTokenRow, by: str | None) -> None:
        """Act on one token and mark it done, in one transaction; a refusal of the token
        marks it refused in another, and a database's own refusal stops the apply."""
        act = self._step(plan)

        def operation(tx: Tx) -> None:
            tx.by, tx.plan_id = by, plan.id
            row = self.engine.token_row(tx, token.token)
            mark = tx.plan_token(plan.id, token.n)
            if mark is None or mark.applied_at is not None:
                return
            moved = still_matches(plan.filter, row)
            if moved is not None:
                tx.mark_plan_token(plan.id, token.n, REFUSED, moved)
                return
            act(tx, token.token)
            tx.mark_plan_token(plan.id, token.n, DONE, None)

        try:
            self.engine.store.write(operation)
        except EngineError as error:
            if error.status >= 500:
                raise
            reason = str(error)
            self.engine.store.write(
                lambda tx: tx.mark_plan_token(plan.id, token.n, REFUSED, reason)
            )

    def _step(self, plan: PlanRow) -> Callable[[Tx, str], object]:
        """The engine's step that the plan's action takes, in a transaction."""
        engine = self.engine
        steps: dict[str, Callable[[Tx, str], object]] = {
            "pause": engine.pause_in,
            "resume": engine.resume_in,
            "cancel": engine.cancel_in,
            "retry": lambda tx, token: engine.retry_in(tx, token, plan.options.get("from"), None),
            "migrate": lambda tx, token: self.migrations.migrate_in(tx, token, plan.options["to"]),
        }
        return steps[plan.action]
