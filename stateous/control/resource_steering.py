"""What an operator sees of resources and does to them: `GET /resources`, pause, resume,
`set --slots` and `open` (a parked key), each one transaction; and what a waiting task's
listing says it waits for.

A pause lets nothing more in: the tasks let in but not claimed yet give their slots back
and wait. A resume, or more slots, lets in the oldest that wait. Fewer slots take effect
as the tasks that took them end: nobody is stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from stateous.control import parking, quota, resources
from stateous.control.errors import InvalidSlots, KeyNotParked, ResourceNotFound
from stateous.control.store import Counter, ParkingRow, ResourceRow, Tx
from stateous.control.store import to_iso as when
from stateous.model.resources import KeyView, Parked, ResourceView, Taker, shown, waits_shown
from stateous.model.sentences import parked_words
from stateous.model.vocabulary import ParkingCause

if TYPE_CHECKING:
    from stateous.control.engine import Engine


def views(engine: Engine) -> list[ResourceView]:
    """Every resource, by name, with its keys that have slots in use or tasks waiting."""

    def operation(tx: Tx) -> list[ResourceView]:
        parkings = _parkings(tx)
        return [_view(tx, row, parkings.get(row.name, 0)) for row in tx.resources()]

    return engine.store.read(operation)


def _parkings(tx: Tx) -> dict[str, int]:
    """How many times each resource's keys were parked (`Counter.PARKINGS`, whose labels
    are `resource cause`)."""
    counted: dict[str, int] = {}
    for (name, label), n in tx.counters().items():
        if name == Counter.PARKINGS:
            resource = label.partition(" ")[0]
            counted[resource] = counted.get(resource, 0) + n
    return counted


def _view(tx: Tx, row: ResourceRow, parkings: int) -> ResourceView:
    waiting = tx.waiting_counts(row.name)
    parked = {parking.key: parking for parking in tx.parkings(row.name)}
    takers: dict[str, list[Taker]] = {}
    for taker in tx.takers(row.name):
        takers.setdefault(taker.key, []).append(
            Taker(task=taker.task, token=taker.token, status=taker.status, count=taker.count)
        )
    keys = [
        KeyView(
            key=key.key,
            in_use=key.in_use,
            takers=takers.get(key.key, []),
            waiting=waiting.get(key.key, 0),
            closed_until=None if key.closed_until is None else when(key.closed_until),
            parked=_parked(tx, parked.get(key.key), row.slots),
        )
        for key in tx.resource_keys(row.name)
        if key.in_use or key.key in waiting or key.key in parked
    ]
    return ResourceView(
        name=row.name,
        slots=row.slots,
        rate=row.rate,
        paused=row.paused,
        in_use=sum(key.in_use for key in keys),
        waiting=sum(waiting.values()),
        keys=keys,
        parkings=parkings,
    )


def _parked(tx: Tx, row: ParkingRow | None, slots: int) -> Parked | None:
    """A parked key's view: why, until when, and how it reopens."""
    if row is None or row.cause is None or row.until is None:
        return None
    reopening = None
    if row.step is not None and row.until <= tx.now:
        size = parking.cohort(row.step, slots)
        reopening = "probe" if row.step == 0 else f"cohort of {size}"
    return Parked(
        cause=row.cause,
        until=when(row.until),
        reason=row.reason or "",
        fingerprint=row.fingerprint if row.cause == ParkingCause.BREAKER else None,
        reopening=reopening,
    )


def _change(
    engine: Engine, name: str, by: str | None, change: Callable[[Tx, ResourceRow], None]
) -> ResourceView:
    """Apply `change` to a resource in one transaction and answer its view after it."""

    def operation(tx: Tx) -> ResourceView:
        row = tx.resource(name)
        if row is None:
            raise ResourceNotFound(f"no resource is named {name!r}")
        change(tx, replace(row, changed_at=tx.now, changed_by=by))
        new = tx.resource(name)
        assert new is not None
        return _view(tx, new, _parkings(tx).get(name, 0))

    return engine.store.write(operation)


def pause(engine: Engine, name: str, by: str | None = None) -> ResourceView:
    """Pause a resource: it lets nothing in until resumed."""

    def change(tx: Tx, row: ResourceRow) -> None:
        if not row.paused:
            resources.pause(tx, replace(row, paused=True))

    return _change(engine, name, by, change)


def resume(engine: Engine, name: str, by: str | None = None) -> ResourceView:
    """Resume a resource and let in the oldest tasks that wait for each of its keys."""

    def change(tx: Tx, row: ResourceRow) -> None:
        if row.paused:
            tx.put_resource(replace(row, paused=False))
            resources.let_in_all(tx, row.name)

    return _change(engine, name, by, change)


def set_slots(engine: Engine, name: str, slots: object, by: str | None = None) -> ResourceView:
    """Give a resource `slots` per key until a graph file declares other slots for it."""
    if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
        raise InvalidSlots(f"slots: {slots!r} must be a whole number, 1 or more")

    def change(tx: Tx, row: ResourceRow) -> None:
        tx.put_resource(replace(row, slots=slots))
        resources.let_in_all(tx, row.name)

    return _change(engine, name, by, change)


def open_key(engine: Engine, name: str, key: str, by: str | None = None) -> ResourceView:
    """Reopen a parked key of a resource at once and whole (`stateous resource open`)."""

    def change(tx: Tx, row: ResourceRow) -> None:
        if not quota.open_key(tx, row.name, key):
            raise KeyNotParked(f"{shown(row.name, key)} is not parked")

    return _change(engine, name, by, change)


def waits_lines(tx: Tx, tasks: list[int]) -> dict[int, str]:
    """What each of these tasks that waits for a resource waits for (`waits_line`)."""
    return {task: waits_line(tx, text) for task, text in tx.waits_for(tasks).items()}


def waits_line(tx: Tx, waits_for: str) -> str:
    """What a waiting task's listing says: `waits for repo=acme/api, held by task 17 of PR-12`
    (or `paused`, or `parked: ...` until its reset, or `until` the time its rate's bucket
    holds a token again)."""
    line = f"waits for {waits_shown(waits_for)}"
    resource, equals, key = waits_for.partition("=")
    if not equals:
        return line
    row = tx.resource(resource)
    if row is not None and row.paused:
        return f"{line} (paused)"
    # A parked key lets nothing in until its reset, even once its holders are done.
    parked = tx.parking(resource, key)
    if parked is not None and parked.cause is not None and parked.until is not None:
        waiting = tx.waiting_counts(resource).get(key, 0)
        return f"{line}: {parked_line(resource, key, parked, waiting)}"
    takers = tx.takers(resource, key)
    if takers:
        shown = ", ".join(f"task {taker.task} of {taker.token}" for taker in takers[:3])
        return f"{line}, held by {shown}"
    state = tx.resource_key(resource, key)
    if state is not None and state.closed_until is not None:
        return f"{line} (its rate lets one in at {when(state.closed_until)})"
    return line


def parked_line(resource: str, key: str, row: ParkingRow, waiting: int) -> str:
    """`parked: llm=acct-1 until 14:05:10, 37 tasks waiting; reason: 429 ...`."""
    assert row.until is not None
    return parked_words(resource, key, when(row.until), waiting, str(row.reason))
