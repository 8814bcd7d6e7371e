"""Quota reports: a provider's quota stopped a routine, so its attempt is given back and the
resource key its task took closes until the quota resets.

In the report's one transaction: the attempt is given back (it does not count against
`retries`), the task is queued again, and the key closes (`park`) until the stated reset,
or for a wait that doubles from a minute to an hour, with jitter, when none is stated. Tasks
let in to the key but not claimed yet give their slots back and wait with the rest; the
clock opens the key at the reset, and a probe then cohorts reopen it (`parking.py`). A
report without a resource parks only its own task, for the same wait. A reset more than
7 days ahead is capped at 7 days, and the ledger says so.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from stateous.control import resources
from stateous.control.errors import InvalidQuota, ResourceNotUsed
from stateous.control.store import Counter, KeyRow, ParkingRow, TaskRow, TokenRow, Tx
from stateous.control.store.rows import to_iso
from stateous.model.backoff import doubling_wait
from stateous.model.vocabulary import Kind, ParkingCause, TimerKind
from stateous.model.wire import ReportBody

if TYPE_CHECKING:
    from stateous.control.moves import Moves

#: The first wait of a key parked without a stated reset, and of a breaker's cool-down.
FIRST_WAIT = 60.0
#: The longest of those waits, however many parkings in a row.
LONGEST_WAIT = 3600.0
#: The furthest reset a quota report may state; one further is capped to it.
FURTHEST_RESET = 7 * 86400.0


def check(body: ReportBody) -> None:
    """Refuse a quota report whose reset cannot be (before any transaction)."""
    if body.kind != "quota":
        for field in ("resource", "resets_at", "reason"):
            if getattr(body, field) is not None:
                raise InvalidQuota(f"{field} goes only with a report of kind 'quota'")
        return
    if body.resets_at is not None and body.retry_after is not None:
        raise InvalidQuota("a quota report states resets_at or retry_after, not both")
    if body.resets_at is not None:
        moment = _moment(body.resets_at)
        if moment is None:
            raise InvalidQuota(f"resets_at {body.resets_at!r} is not an ISO time in UTC")


def report(tx: Tx, moves: Moves, task: TaskRow, token: TokenRow, body: ReportBody) -> None:
    """Give the attempt back and park the key of the named resource that the task took (or
    the task alone)."""
    reason = (body.reason or "the provider's quota is used up")[:1000]
    until, capped = _reset(tx, body)
    use = None
    if body.resource is not None:
        use = next((one for one in tx.uses(task.id) if one.resource == body.resource), None)
        if use is None:
            raise ResourceNotUsed(f"task {task.id} does not use {body.resource!r}")
    parked = None if use is None else tx.parking(use.resource, use.key)
    if until is None:
        until = tx.now + doubled((parked.times if parked else 0) + 1, f"{task.id}:{tx.now}")
    detail = {"task": task.id, "until": to_iso(until), "reason": reason}
    if capped:
        detail["capped"] = "the reset was more than 7 days ahead: parked for 7 days"
    tx.cancel_timers(token.token, TimerKind.TIMER)
    task.attempt, task.claimed_by, task.lease_until = task.attempt - 1, None, None
    if use is None:
        tx.record(token.token, Kind.TASK_PARKED, detail)
        # Its slots and its budget's reservation go back: its next claim takes them anew.
        moves.release(tx, token, task)
        moves.retry(tx, token, task, until - tx.now)
        return
    tx.record(token.token, Kind.TASK_PARKED, {**detail, "resource": use.resource, "key": use.key})
    park(tx, token.token, use.resource, use.key, ParkingCause.QUOTA, reason, until)
    moves.release(tx, token, task)
    moves.requeue(tx, token, task)


def park(
    tx: Tx,
    token: str,
    resource: str,
    key: str,
    cause: ParkingCause,
    reason: str,
    until: float | None,
    fingerprint: str | None = None,
) -> None:
    """Close a key until `until` (None: for the doubling wait), say it in `token`'s ledger,
    and send the tasks let in to it but not claimed yet back to wait."""
    row = tx.parking(resource, key) or ParkingRow(resource, key)
    row.times += 1
    if until is None:
        until = tx.now + doubled(row.times, f"{resource}={key}:{row.times}:{tx.now}")
    row.cause, row.reason, row.until, row.step, row.admitted = cause, reason, until, 0, 0
    row.fingerprint, row.streak = fingerprint, 0
    tx.put_parking(row)
    found = tx.resource_key(resource, key) or KeyRow(resource, key, 0, None, None, None)
    tx.put_key(replace(found, closed_until=until))
    data = {
        "resource": resource,
        "key": key,
        "cause": str(cause),
        "until": to_iso(until),
        "reason": reason,
    }
    if fingerprint is not None:
        data["fingerprint"] = fingerprint
    tx.record(token, Kind.RESOURCE_PARKED, data)
    tx.count(Counter.PARKINGS, f"{resource} {cause}")
    resources.send_back(tx, resource, key)


def open_key(tx: Tx, resource: str, key: str) -> bool:
    """Reopen a parked key by hand, at once and whole; answer whether it was parked."""
    row = tx.parking(resource, key)
    if row is None or row.cause is None:
        return False
    tx.drop_parking(resource, key)
    resources.open_key(tx, resource, key)
    return True


def doubled(times: int, seed: str) -> float:
    """The wait of the `times`-th parking in a row: a minute doubled each time, at most an
    hour, drawn between half of it and the whole (seeded, so a rerun draws the same)."""
    return doubling_wait(FIRST_WAIT, LONGEST_WAIT, times, 0.5, seed)


def _reset(tx: Tx, body: ReportBody) -> tuple[float | None, bool]:
    """When the quota resets (None: not stated), and whether it was capped to 7 days."""
    if body.retry_after is not None:
        until = tx.now + body.retry_after
    elif body.resets_at is not None:
        until = _moment(body.resets_at) or tx.now
        if until <= tx.now:
            raise InvalidQuota(f"resets_at {body.resets_at} is in the past")
    else:
        return None, False
    if until > tx.now + FURTHEST_RESET:
        return tx.now + FURTHEST_RESET, True
    return until, False


def _moment(text: str) -> float | None:
    """An ISO time in UTC as seconds, or None if it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    offset = moment.utcoffset()
    if offset is None or offset.total_seconds() != 0:
        return None
    return moment.timestamp()
