"""The verbs of spend and budgets that a request asks for: a routine's spend, an operator's
raise, a start's budget checked, what a token and its tree spent; and what becomes of a
tree whose spend reached its budget.

When a tree's spend reaches a limit, its top token gets the event `over_budget`, which its
graph may route as it routes `error`; a graph that does not take it pauses the tree, and the
ledger says why. A raise lifts the limits, lets the tasks that waited for the budget back in
their queues and resumes a tree that the budget paused. Each verb is one transaction, or a
step of the caller's (`_in`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stateous.control import outcomes
from stateous.control.budgets import reached, waits
from stateous.control.errors import InvalidBudget, InvalidSpend, NoBudget
from stateous.control.holding import held_task
from stateous.control.moves import Arrival, NoRoute, Unrouted
from stateous.control.store import BudgetRow, TaskRow, TokenRow, Tx
from stateous.model.budgets import (
    BUDGET_WARN,
    amounts_problem,
    amounts_text,
    graph_reserves,
    reserve_problem,
    summed,
)
from stateous.model.limits import IDEMPOTENCY_KEY_LIMIT
from stateous.model.names import OVER_BUDGET_EVENT, plain_text
from stateous.model.vocabulary import Kind, TokenStatus
from stateous.model.wire import BudgetView, ReportBody, SpendBody, SpentView

if TYPE_CHECKING:
    from stateous.control.engine import Engine


def checked_spend(amounts: Any) -> dict[str, float]:
    """What a routine spent, refused `invalid_spend` unless units and numbers, 0 or more."""
    problem = amounts_problem("spent", amounts)
    if problem is not None:
        raise InvalidSpend(problem)
    return {unit: float(amount) for unit, amount in amounts.items()}


def checked_key(key: str | None) -> str | None:
    """A spend's key, refused `invalid_spend` unless 1 to 256 characters and no control
    characters: it is kept on the `spent` row, as an event's idempotency key is."""
    if key is not None and not plain_text(key, IDEMPOTENCY_KEY_LIMIT):
        raise InvalidSpend(
            f"key: a spend's key has 1 to {IDEMPOTENCY_KEY_LIMIT} characters and no control "
            "characters"
        )
    return key


def checked_budget(engine: Engine, limits: Any) -> dict[str, float]:
    """A start's or a raise's budget, refused `invalid_budget` unless units and numbers above
    0 that every reservation of the served workflow fits."""
    problem = amounts_problem("budget", limits, positive=True)
    for field, reserve in graph_reserves(engine.graph.document):
        within = {unit: amount for unit, amount in reserve.items() if unit in limits}
        problem = problem or reserve_problem(field, within, limits)
    if problem is not None:
        raise InvalidBudget(problem)
    return {unit: float(amount) for unit, amount in limits.items()}


def open_in(engine: Engine, tx: Tx, token: str, limits: dict[str, float] | None) -> None:
    """Give a token just started its tree's budget: the start's, else its workflow's."""
    document = engine.graph.document
    limits = limits or document.budget
    if limits:
        warn = document.budget_warn or BUDGET_WARN
        engine.moves.budgets.open(tx, token, limits, warn)


def apply(engine: Engine, tx: Tx, task: TaskRow, token: TokenRow, body: ReportBody) -> None:
    """Apply a report: what its attempt spent first, then its outcome, then, when the spend
    reached its tree's budget, `reach`."""
    spent = body.spent
    top = engine.moves.budgets.spend(tx, task, token, checked_spend(spent)) if spent else None
    outcomes.apply(tx, engine.moves, task, token, body)
    if top is not None:
        reach(engine, tx, top)


def spend(engine: Engine, task: int, body: SpendBody, by: str | None = None) -> bool:
    """Keep what a routine spent during its attempt (`ctx.spend`), at once; answer False
    when the spend's key was taken on its token before, as a spend sent again (its answer
    lost, or its sender restarted) carries it: it counts once."""
    amounts = checked_spend(body.spent)
    key = checked_key(body.key)

    def operation(tx: Tx) -> bool:
        row, token = held_task(tx, task, body.attempt, body.supervisor)
        if key is not None and tx.key_used(token.token, key):
            return False
        top = engine.moves.budgets.spend(tx, row, token, amounts, key)
        if top is not None:
            reach(engine, tx, top)
        return True

    return engine.write(operation, by)


def reach(engine: Engine, tx: Tx, top: str) -> None:
    """The tree of `top` has spent its budget: `over_budget` to its top token, routed as the
    graph says; a graph that does not take it pauses the tree, with the reason."""
    budget = tx.budget(top)
    row = tx.token(top)
    if budget is None or row is None or row.status != TokenStatus.ACTIVE:
        return
    spent, limits = amounts_text(budget.spent), amounts_text(budget.limits)
    reason = f"the tree spent {spent} of its budget of {limits}"
    arrival = Arrival(OVER_BUDGET_EVENT, detail=reason)
    moves = engine.moves
    routed = not isinstance(moves.choose(tx, row, arrival), NoRoute)
    tx.record(top, Kind.OVER_BUDGET, {"reason": reason, "routed": routed})
    if routed:
        moves.route(tx, row, arrival, Unrouted.REJECT)
    else:
        engine.pause_in(tx, top)


def raise_budget(engine: Engine, token: str, limits: Any, by: str | None = None) -> BudgetView:
    """Raise (or set) limits of the budget of the token's tree; the work goes on. Limits
    set below what the tree spent are reached as a spend reaches them (`reach`)."""
    checked = checked_budget(engine, limits)

    def operation(tx: Tx) -> BudgetView:
        row = engine.token_row(tx, token)
        budget = engine.moves.budgets.of(tx, row)
        if budget is None:
            raise NoBudget(f"token {token!r} has no budget, nor has any token above it")
        unknown = sorted(set(checked) - set(budget.limits))
        if unknown:
            raise InvalidBudget(
                f"budget: the budget of {budget.token!r} has no unit {unknown[0]!r} "
                f"(it has {', '.join(sorted(budget.limits))})"
            )
        budget.limits.update(checked)
        budget.warned = [unit for unit in budget.warned if unit not in checked]
        was_over, budget.over = budget.over, reached(budget)
        tx.put_budget(budget)
        tx.record(budget.token, Kind.BUDGET_RAISED, {"budget": budget.limits})
        if not budget.over and tx.let_in_budget(waits(budget.token)):
            tx.let_in()
        top = tx.token(budget.token)
        if was_over and not budget.over and top is not None and _paused_by_budget(tx, top):
            engine.resume_in(tx, top.token)
        if budget.over and not was_over:
            reach(engine, tx, budget.token)
        return budget_view(tx, budget)

    return engine.write(operation, by)


def _paused_by_budget(tx: Tx, top: TokenRow) -> bool:
    """Whether the top token is paused because its tree spent its budget (not by a person)."""
    if top.status != TokenStatus.PAUSED:
        return False
    last = tx.last_entry(top.token, (Kind.PAUSED, Kind.OVER_BUDGET))
    if last is None or last.kind != Kind.PAUSED:
        return False
    before = tx.last_entry(top.token, (Kind.OVER_BUDGET, Kind.RESUMED))
    return before is not None and before.kind == Kind.OVER_BUDGET and not before.data["routed"]


def budget_view(tx: Tx, budget: BudgetRow) -> BudgetView:
    """A budget as the API shows it: its limits, what its tree spent and reserved."""
    return BudgetView(
        token=budget.token,
        limits=budget.limits,
        spent=budget.spent,
        reserved=summed(tx.reserved(budget.token)),
        warn=budget.warn,
        over=budget.over,
    )


def spent_view(engine: Engine, tx: Tx, row: TokenRow) -> SpentView | None:
    """What a token and its tree (its children included) spent, and its tree's budget; None
    when nothing was spent and no budget holds."""
    family = tx.family(row)
    own: dict[str, float] = {}
    tree: dict[str, float] = {}
    for member in family:
        rows = [entry.data["spent"] for entry in tx.entries_after(member.token, 0, Kind.SPENT)]
        part = summed(rows)
        tree = summed([tree, part])
        if member is row:
            own = part
    budget = engine.moves.budgets.of(tx, row) if engine.moves.budgets.live(tx) else None
    if not tree and budget is None:
        return None
    shown = None if budget is None else budget_view(tx, budget)
    return SpentView(token=own, tree=tree, budget=shown)
