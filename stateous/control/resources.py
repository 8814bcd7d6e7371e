"""Who may take a resource's slots: a task is let in when it is queued, and lets the next in
when its attempt ends.

A task whose state `uses` resources takes their slots (and a rate's tokens) as it is
queued, all or none, while its token's context is at hand; one that cannot have them
all waits for the first it could not have, out of its queue's index, so a claim never
passes over it and a workflow without resources pays nothing. A report, a failed
attempt, an ended lease, a cancel, a pause of the token, a report that the work goes on
outside: each releases the task's slots in the same transaction and lets in the oldest
tasks that wait for them. A rate's empty bucket closes its key until it holds a token
again, and so does a quota report or a breaker (`quota.py`); the clock opens it
(`opened`), and a parked key reopens through a probe and cohorts (`parking.py`).
Everything runs inside the caller's transaction.
"""

from __future__ import annotations

from dataclasses import replace

from stateous.control import parking
from stateous.control.store import KeyRow, ParkingRow, ResourceRow, Store, TokenRow, Tx, UseRow
from stateous.model.graph_file import ResourceSpec
from stateous.model.resources import key_of, parse_rate, waiting
from stateous.model.vocabulary import TokenStatus

#: How many tasks that wait for a key one release tries to let in, at most.
LET_IN_BATCH = 16
#: What a queued task of a paused token waits for: its slots went back at the pause.
TOKEN_RESUME = "its token's resume"


def declare(tx: Tx, declared: dict[str, ResourceSpec], by: str | None = None) -> None:
    """Keep the resources a graph file declares. A resource of the same name is one
    resource: the graph served last sets its slots and rate, but only where its declaration
    changed, so that an operator's `set` outlives a restart with the same file."""
    for name, spec in declared.items():
        row = tx.resource(name)
        if row is None:
            row = ResourceRow(name, spec.slots, spec.rate, spec.slots, False, tx.now, by)
        elif (row.declared_slots, row.rate) != (spec.slots, spec.rate):
            row = replace(
                row, slots=spec.slots, rate=spec.rate, declared_slots=spec.slots, changed_at=tx.now
            )
        else:
            continue
        tx.put_resource(row)
        let_in_all(tx, name)


def queue(
    tx: Tx,
    task: int,
    token: TokenRow,
    uses: dict[str, str | int],
    declared: dict[str, ResourceSpec],
) -> None:
    """Keep the uses of a task just queued (their keys read from the token's context), and
    let it in or make it wait."""
    rows = [
        UseRow(task, resource, *key_of(use, token.context), False, False)
        for resource, use in sorted(uses.items())
    ]
    waits = _decide(tx, rows, declared)
    kept = [(use.resource, use.key, use.count) for use in rows]
    if waits is None:
        tx.add_uses(task, kept, taken=True)
    else:
        tx.add_uses(task, kept, taken=False, waiting=waits.resource)
        tx.wait_for(task, waiting(waits.resource, waits.key))


def admit(tx: Tx, task: int) -> UseRow | None:
    """Let a queued task in, or make it wait: answer the use it waits for (None: let in)."""
    uses = tx.uses(task)
    waits = _decide(tx, uses, {})
    if waits is None:
        tx.mark_uses(task, taken=True)
        tx.wait_for(task, None)
        tx.let_in()
    else:
        tx.mark_uses(task, taken=False, waiting=waits.resource)
        tx.wait_for(task, waiting(waits.resource, waits.key))
    return waits


def requeued(tx: Tx, token: TokenRow, task: int) -> None:
    """Let in a task queued again for its next attempt, or make it wait; a paused token's
    waits for its resume without its slots, as one queued at its pause does (`pause_token`)."""
    if token.status == TokenStatus.PAUSED:
        tx.wait_for(task, TOKEN_RESUME)
    else:
        admit(tx, task)


def release(tx: Tx, task: int, waits_for: str | None = None) -> None:
    """Give back the slots a task took, and let in the oldest that wait for them; the task
    waits for nothing more (or for `waits_for`, out of its queue)."""
    uses = tx.uses(task)
    if not uses:
        return
    taken = [use for use in uses if use.taken]
    tx.mark_uses(task, taken=False)
    tx.wait_for(task, waits_for)
    for use in taken:
        row = tx.resource_key(use.resource, use.key)
        if row is not None:
            row = replace(row, in_use=max(0, row.in_use - use.count))
            tx.put_key(row)
            parking.ended(tx, row, task)
    for use in taken:
        let_in(tx, use.resource, use.key)


def pause_token(tx: Tx, task: int) -> None:
    """A queued task of a paused token gives its slots back until the resume."""
    release(tx, task, TOKEN_RESUME)


def let_in(tx: Tx, resource: str, key: str) -> None:
    """Let in the oldest tasks that wait for a key, until one must wait for it still."""
    for task in tx.waiters(resource, key, LET_IN_BATCH):
        if not tx.still_queued(task):
            tx.mark_uses(task, taken=False)
            continue
        waits = admit(tx, task)
        if waits is not None and (waits.resource, waits.key) == (resource, key):
            return


def let_in_all(tx: Tx, resource: str) -> None:
    """Let in what waits for any key of a resource (resumed, or given more slots)."""
    for key in tx.waiting_keys(resource):
        let_in(tx, resource, key)


def pause(tx: Tx, row: ResourceRow) -> None:
    """Pause a resource: the tasks let in but not claimed yet give their slots back and wait."""
    tx.put_resource(row)
    send_back(tx, row.name)


def send_back(tx: Tx, resource: str, key: str | None = None) -> None:
    """The tasks let in to a resource (one key of it) but not claimed yet give their slots
    back and wait again (a pause, a parking)."""
    for task in tx.unclaimed_takers(resource, key):
        if tx.still_queued(task):
            release(tx, task)
            admit(tx, task)


def open_key(tx: Tx, resource: str, key: str) -> None:
    """Open a closed key and let in what waits for it."""
    row = tx.resource_key(resource, key)
    if row is not None:
        tx.put_key(replace(row, closed_until=None))
    let_in(tx, resource, key)


def opened(tx: Tx, limit: int) -> int:
    """Open the keys closed until now (a rate's bucket holds tokens again) and let in what
    waits for them; answer how many."""
    keys = tx.opened_keys(limit)
    for resource, key in keys:
        open_key(tx, resource, key)
    return len(keys)


def open_due(store: Store, limit: int = LET_IN_BATCH) -> None:
    """At a beat of the clock: open the keys whose time has come, if any (a read first, so
    that a beat with none writes nothing)."""
    if store.read(lambda tx: tx.opened_keys(1)):
        store.write(lambda tx: opened(tx, limit))


def _decide(tx: Tx, uses: list[UseRow], declared: dict[str, ResourceSpec]) -> UseRow | None:
    """Take every use's slots (and tokens) if all are free, or none: answer the first use
    that is not (None: all taken). The keys are locked in the order of the uses."""
    taken: list[KeyRow] = []
    gated: list[tuple[ParkingRow, int, int]] = []
    for use in uses:
        resource = tx.resource(use.resource)
        if resource is None:
            resource = _undeclared(tx, use.resource, declared)
        key = tx.lock_key(use.resource, use.key)
        ahead = 0
        if resource.rate is not None:
            ahead = tx.unclaimed(use.resource, use.key, parse_rate(resource.rate)[0])
        after, opens = _take(tx.now, resource, key, use.count, ahead)
        if after is None:
            if opens is not None and (key.closed_until is None or key.closed_until <= tx.now):
                tx.put_key(replace(key, closed_until=opens))
            return use
        reopening = parking.gate(tx, key, resource.slots)
        if reopening is False:
            return use
        if isinstance(reopening, ParkingRow):
            gated.append((reopening, use.task, resource.slots))
        taken.append(after)
    for key in taken:
        tx.put_key(key)
    for row, task, slots in gated:
        parking.admitted(tx, row, task, slots)
    return None


def _undeclared(tx: Tx, name: str, declared: dict[str, ResourceSpec]) -> ResourceRow:
    """A resource that no graph served declared yet (a token pinned to an older graph):
    kept as that graph declares it, one slot without."""
    spec = declared.get(name, ResourceSpec())
    row = ResourceRow(name, spec.slots, spec.rate, spec.slots, False, tx.now, None)
    tx.put_resource(row)
    return row


def _bucket(now: float, resource: ResourceRow, key: KeyRow) -> float:
    """The tokens in a key's rate bucket now: full at first, refilled at the rate."""
    assert resource.rate is not None
    size, seconds = parse_rate(resource.rate)
    if key.bucket is None or key.filled_at is None:
        return float(size)
    return min(float(size), key.bucket + (now - key.filled_at) * size / seconds)


def _take(
    now: float, resource: ResourceRow, key: KeyRow, count: int, ahead: int
) -> tuple[KeyRow | None, float | None]:
    """The key once `count` slots (and tokens) are taken, or None when they cannot be, with
    the time it may let them in then (None: when a slot is given back, or the resource
    resumed). A rate lets a task in while its bucket holds a token and fewer than the
    bucket's size were let in `ahead` of their claims, so that a backlog let in while no
    supervisor claimed is not claimed faster than the rate allows."""
    if resource.paused or key.in_use + count > resource.slots:
        return None, None
    if key.closed_until is not None and key.closed_until > now:
        return None, key.closed_until
    if resource.rate is None:
        return replace(key, in_use=key.in_use + count, closed_until=None), None
    size, seconds = parse_rate(resource.rate)
    tokens = _bucket(now, resource, key)
    if tokens < count or ahead >= size:
        return None, now + max(1.0, count - tokens) * seconds / size
    taken = replace(
        key, in_use=key.in_use + count, bucket=tokens - count, filled_at=now, closed_until=None
    )
    return taken, None
