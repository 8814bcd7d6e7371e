"""What a report does to the token of the task it reports on: an event moves it, `waiting`
keeps the task for a report from outside, `failed` ends the attempt (a retry, or the
token fails), `quota` gives the attempt back and parks its resource key (`quota.py`); all
but `quota` keep the report's context changes. The engine finds the task and its token
first (`holding.held_task`)."""

from __future__ import annotations

from stateous.control import breaker, checks, quota
from stateous.control.moves import Arrival, Moves, Unrouted
from stateous.control.store import TaskRow, TokenRow, Tx
from stateous.model.vocabulary import Kind, TaskStatus
from stateous.model.wire import ReportBody


def apply(tx: Tx, moves: Moves, row: TaskRow, token: TokenRow, body: ReportBody) -> None:
    """Apply the outcome of `body` to the task `row` of `token`, in `tx`."""
    if body.kind == "quota":
        quota.report(tx, moves, row, token, body)
        return
    flow = moves.flow(tx, token)
    changes = body.context or {}
    merged = checks.context(flow, {**token.context, **changes}) if changes else None
    if body.kind == "failed":
        # The context changes come first: the next attempt runs on them, and a failure on
        # another context is no repeat of the last (`stop_on_repeat`).
        if changes:
            moves.keep_outcome(tx, token, changes, merged, [])
        moves.fail_attempt(tx, row, token, body.error or "the routine failed", body.retry_after)
        return
    if flow.state(token.state).uses:
        breaker.succeeded(tx, row.id, moves.declared(tx, token))
    schedules = checks.schedules(flow, body.schedules)
    if body.kind == "waiting":
        moves.keep_outcome(tx, token, changes, merged, schedules)
        row.status, row.lease_until = TaskStatus.WAITING, None
        tx.save_task(row)
        moves.release(tx, token, row)
        tx.record(token.token, Kind.TASK_WAITING, {"task": row.id})
        return
    event = body.event
    assert event  # `ReportBody` refuses a report of an event without one
    if not flow.emits(token.state, event):
        moves.refuse(tx, token, event, f"{token.state!r} cannot emit {event!r}")
    arrival = Arrival(
        event,
        checks.payload(flow, event, body.payload),
        task=row,
        changes=changes,
        context=merged,
        schedules=schedules,
    )
    moves.route(tx, token, arrival, Unrouted.REFUSE)
