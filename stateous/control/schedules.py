"""Schedules in the control plane: keep them, and start their tokens as the clock beats.

The graph file's schedules (`source` flow) are written into the `schedules` table when a
control plane opens the database; an operator adds more at run time (`source` added).
One name is one schedule: a name that the other kind holds is refused. The graph's may be
paused and resumed, not removed (a new graph file without them removes them).

At each beat the clock asks for the schedules whose next occurrence is due, or that have a
start waiting, and handles each in one transaction of its own. An occurrence starts the
token `<name>.<UTC minute>` (`model.schedule.token_id`), so a crash before the commit
leaves it to the next beat, and one after it leaves the token there, which is never
started twice. After an outage the occurrences missed are counted, never started one by
one: `catch_up="latest"` starts the last of them, `"none"` skips them all. Each occurrence
leaves a row of `schedule_history`, and a skip says why.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from stateous.control import checks
from stateous.control.errors import (
    EngineError,
    InvalidSchedule,
    ScheduleExists,
    ScheduleInFlow,
    ScheduleNotFound,
)
from stateous.control.store import ScheduleRow, Tx
from stateous.model import cron
from stateous.model.errors import Failure
from stateous.model.graph_file import GraphFile, ScheduleSpec
from stateous.model.schedule import ADDED, FLOW, ScheduleBody, ScheduleView, Skip, problems
from stateous.model.schedule import token_id as occurrence_token
from stateous.model.vocabulary import LIVE_TOKEN

if TYPE_CHECKING:
    from stateous.control.engine import Engine

#: How late an occurrence may be handled and still count as on time, in seconds: a beat
#: held up, a restart. Later than this, it was missed while no control plane served.
ON_TIME = 60.0
#: The most missed occurrences counted after an outage (the count only says how many).
MOST_MISSED = 100_000
STARTED, WAITING, SKIPPED = "started", "waiting", "skipped"


class ScheduleClash(Failure):
    """The graph file declares a schedule whose name one added at run time holds."""


def when(moment: float) -> str:
    """A moment as the listings show it: UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _next(row: ScheduleRow, after: float) -> float | None:
    return cron.next_after(cron.parse(row.cron), cron.zone(row.tz), after)


def _row(name: str, spec: ScheduleSpec, source: str, tx: Tx, by: str | None) -> ScheduleRow:
    row = ScheduleRow(
        name, source, spec.cron, spec.tz, spec.context, spec.overlap, spec.catch_up,
        False, None, None, None, None, tx.now, by,
    )  # fmt: skip
    return replace(row, next_at=_next(row, tx.now))


def sync(engine: Engine, document: GraphFile) -> None:
    """Write the served graph file's schedules into the database, in one transaction: new
    ones start counting from now, changed ones keep their state (and count again from now
    when their timing changed), the graph's that it no longer declares are removed."""

    def operation(tx: Tx) -> None:
        kept = {row.name: row for row in tx.schedules()}
        for name, spec in document.schedules.items():
            old = kept.get(name)
            if old is not None and old.source == ADDED:
                raise ScheduleClash(
                    f"the graph file declares schedule {name!r}, which was added at run time; "
                    f"remove that one first (stateous schedule remove {name})"
                )
            new = _row(name, spec, FLOW, tx, None)
            if old is None:
                tx.put_schedule(new)
                continue
            moved = (old.cron, old.tz) != (new.cron, new.tz)
            tx.put_schedule(
                replace(
                    old,
                    context=new.context,
                    cron=new.cron,
                    tz=new.tz,
                    overlap=new.overlap,
                    catch_up=new.catch_up,
                    next_at=new.next_at if moved and not old.paused else old.next_at,
                )
            )
        for name, old in kept.items():
            if old.source == FLOW and name not in document.schedules:
                tx.delete_schedule(name)

    engine.store.write(operation)


def fire_due(engine: Engine) -> int:
    """Handle every schedule that is due, each in its own transaction; answer how many."""
    names = engine.store.read(lambda tx: tx.due_schedules(tx.now))
    return sum(engine.store.write(partial(fire, engine, name=name)) for name in names)


def fire(engine: Engine, tx: Tx, name: str) -> bool:
    """Start the waiting start whose way is free, then handle the due occurrence, if the
    schedule still has them; tell whether it did anything."""
    row = tx.schedule(name)
    if row is None or row.paused:
        return False
    tx.by = f"schedule:{name}"
    before = row
    if row.waiting_at is not None and not _live(tx, row.last_token):
        row = _start(engine, tx, replace(row, waiting_at=None), row.waiting_at, 0)
    if row.next_at is not None and row.next_at <= tx.now:
        row = _due(engine, tx, row)
    if row == before:
        return False
    tx.put_schedule(row)
    return True


def _due(engine: Engine, tx: Tx, row: ScheduleRow) -> ScheduleRow:
    """Handle the occurrences due since `next_at`: one of them acts, the others are counted."""
    line, zone = cron.parse(row.cron), cron.zone(row.tz)
    assert row.next_at is not None
    latest = cron.last_until(line, zone, tx.now) or row.next_at
    missed = 0
    if latest > row.next_at:
        missed = 1 + cron.count_between(line, zone, row.next_at, latest, MOST_MISSED)
    row = replace(row, next_at=cron.next_after(line, zone, latest), last_at=latest)
    if tx.now - latest > ON_TIME and row.catch_up == "none":
        earlier = f" and {missed} occurrence(s) before it" if missed else ""
        reason = f"missed: no control plane served at {when(latest)}{earlier} (catch_up none)"
        tx.record_occurrence(row.name, latest, SKIPPED, None, missed, reason)
        return row
    if _live(tx, row.last_token) and row.overlap != "allow":
        reason = f"the token {row.last_token} of an earlier occurrence is still live"
        if row.overlap == "queue_one" and row.waiting_at is None:
            tx.record_occurrence(row.name, latest, WAITING, None, missed, reason)
            return replace(row, waiting_at=latest)
        if row.waiting_at is not None:
            reason += f", and the start of {when(row.waiting_at)} waits already"
        tx.record_occurrence(row.name, latest, SKIPPED, None, missed, reason + " (overlap)")
        return row
    return _start(engine, tx, row, latest, missed)


def _start(engine: Engine, tx: Tx, row: ScheduleRow, at: float, missed: int) -> ScheduleRow:
    """Start the token of the occurrence at `at`; a start the engine refuses is a skip."""
    token = occurrence_token(row.name, at)
    try:
        engine.start_in(tx, token, row.context)
    except EngineError as ex:
        tx.record_occurrence(row.name, at, SKIPPED, None, missed, f"the start was refused: {ex}")
        return row
    tx.record_occurrence(row.name, at, STARTED, token, missed, "")
    return replace(row, last_token=token)


def _live(tx: Tx, token: str | None) -> bool:
    found = None if token is None else tx.token(token)
    return found is not None and found.status in LIVE_TOKEN


# the operator's verbs


def views(engine: Engine) -> list[ScheduleView]:
    """Every schedule, by name, with its next and last occurrences and its last skip."""

    def read(tx: Tx) -> list[ScheduleView]:
        skips = tx.last_skips()
        return [view(row, skips.get(row.name)) for row in tx.schedules()]

    return engine.store.read(read)


def view(row: ScheduleRow, skip: tuple[float, str] | None = None) -> ScheduleView:
    def at(moment: float | None) -> str | None:
        return None if moment is None else when(moment)

    return ScheduleView(
        name=row.name,
        source=row.source,
        cron=row.cron,
        tz=row.tz,
        overlap=row.overlap,
        catch_up=row.catch_up,
        context=row.context,
        paused=row.paused,
        next_at=None if row.paused else at(row.next_at),
        last_at=at(row.last_at),
        last_token=row.last_token,
        waiting_at=at(row.waiting_at),
        last_skip=None if skip is None else Skip(at=when(skip[0]), reason=skip[1]),
    )


def add(engine: Engine, body: ScheduleBody, by: str | None) -> ScheduleView:
    """Add a schedule at run time; its first occurrence is the first after now."""
    found = problems(body.name, body.cron, body.tz, body.overlap, body.catch_up)
    if found:
        raise InvalidSchedule(f"schedule {body.name!r}: {'; '.join(found)}")
    try:
        context = checks.context(engine.graph.top, body.context)
    except EngineError as ex:
        raise InvalidSchedule(f"schedule {body.name!r}: context: {ex}") from None
    spec = ScheduleSpec(
        cron=" ".join(body.cron.split()),
        tz=body.tz,
        context=context,
        overlap=body.overlap,
        catch_up=body.catch_up,
    )

    def operation(tx: Tx) -> ScheduleView:
        old = tx.schedule(body.name)
        if old is not None:
            raise ScheduleExists(f"a schedule named {body.name!r} exists already ({old.source})")
        row = _row(body.name, spec, ADDED, tx, by)
        tx.add_schedule(row)
        return view(row)

    return engine.store.write(operation)


def _change(engine: Engine, name: str, change: Any) -> ScheduleView:
    def operation(tx: Tx) -> ScheduleView:
        row = tx.schedule(name)
        if row is None:
            raise ScheduleNotFound(f"no schedule is named {name!r}")
        new = change(tx, row)
        if new is None:
            tx.delete_schedule(name)
            return view(row)
        tx.put_schedule(new)
        return view(new)

    return engine.store.write(operation)


def pause(engine: Engine, name: str) -> ScheduleView:
    """Pause a schedule: no occurrence acts until it is resumed (none is caught up then)."""
    return _change(engine, name, lambda tx, row: replace(row, paused=True, next_at=None))


def resume(engine: Engine, name: str) -> ScheduleView:
    """Resume a schedule from its next occurrence after now."""

    def change(tx: Tx, row: ScheduleRow) -> ScheduleRow:
        if not row.paused:
            return row
        return replace(row, paused=False, next_at=_next(row, tx.now))

    return _change(engine, name, change)


def remove(engine: Engine, name: str) -> ScheduleView:
    """Remove a schedule added at run time; the history of its occurrences stays."""

    def change(tx: Tx, row: ScheduleRow) -> None:
        if row.source == FLOW:
            raise ScheduleInFlow(
                f"schedule {name!r} comes from the graph file; pause it, or serve a graph "
                "file without it"
            )

    return _change(engine, name, change)
