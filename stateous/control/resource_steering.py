"""What an operator sees of resources and does to them: `GET /resources`, pause, resume and
`set --slots`, each one transaction; and what a waiting task's listing says it waits for.

A pause lets nothing more in: the tasks let in but not claimed yet give their slots back
and wait. A resume, or more slots, lets in the oldest that wait. Fewer slots take effect
as the tasks that took them end: nobody is stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from stateous.control import resources
from stateous.control.errors import InvalidSlots, ResourceNotFound
from stateous.control.store import ResourceRow, Tx
from stateous.control.store import to_iso as when
from stateous.model.resources import KeyView, ResourceView, Taker, waits_shown

if TYPE_CHECKING:
    from stateous.control.engine import Engine


def views(engine: Engine) -> list[ResourceView]:
    """Every resource, by name, with its keys that have slots in use or tasks waiting."""
    return engine.store.read(lambda tx: [_view(tx, row) for row in tx.resources()])


def _view(tx: Tx, row: ResourceRow) -> ResourceView:
    waiting = tx.waiting_counts(row.name)
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
        )
        for key in tx.resource_keys(row.name)
        if key.in_use or key.key in waiting
    ]
    return ResourceView(
        name=row.name,
        slots=row.slots,
        rate=row.rate,
        paused=row.paused,
        in_use=sum(key.in_use for key in keys),
        waiting=sum(waiting.values()),
        keys=keys,
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
        return _view(tx, new)

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


def waits_lines(tx: Tx, tasks: list[int]) -> dict[int, str]:
    """What each of these tasks that waits for a resource waits for (`waits_line`)."""
    return {task: waits_line(tx, text) for task, text in tx.waits_for(tasks).items()}


def waits_line(tx: Tx, waits_for: str) -> str:
    """What a waiting task's listing says: `waits for repo=acme/api, held by task 17 of PR-12`
    (or `paused`, or `until` the time its rate's bucket holds a token again)."""
    line = f"waits for {waits_shown(waits_for)}"
    resource, equals, key = waits_for.partition("=")
    if not equals:
        return line
    row = tx.resource(resource)
    if row is not None and row.paused:
        return f"{line} (paused)"
    takers = tx.takers(resource, key)
    if takers:
        shown = ", ".join(f"task {taker.task} of {taker.token}" for taker in takers[:3])
        return f"{line}, held by {shown}"
    state = tx.resource_key(resource, key)
    if state is not None and state.closed_until is not None:
        return f"{line} (its rate lets one in at {when(state.closed_until)})"
    return line
