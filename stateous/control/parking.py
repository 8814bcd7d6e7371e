"""How a parked key reopens: one probe, then cohorts of 1, 2, 4, ... up to its slots.

A key parked by a quota report or its breaker lets nothing in until its `closed_until`
(`resources._take` refuses, and the clock opens it: `resources.opened`). Then its parking
row's `step` gates it: step 0 lets in one task, the probe; each step after lets in a cohort
twice the last, starting only once every task let in before it has ended (the key holds no
slot in use), so that a reset never lets the whole queue in at once. When a step's tasks
have all ended, the next begins; once a cohort as large as the slots has ended, the key is
open again, its parking forgotten. A quota report or a trip meanwhile parks it anew
(`stateous.control.quota`). Everything runs inside the caller's transaction.
"""

from __future__ import annotations

from stateous.control.store import KeyRow, ParkingRow, Tx
from stateous.model.vocabulary import Kind


def cohort(step: int, slots: int) -> int:
    """How many tasks a step lets in: 1 for the probe (step 0), then 1, 2, 4, ... at most
    the key's slots."""
    return 1 if step == 0 else min(slots, 2 ** (step - 1))


def gate(tx: Tx, key: KeyRow, slots: int) -> ParkingRow | bool | None:
    """Whether a reopening key lets one more task in: False if not; else its parking row
    (to count the task in with `admitted`), or None for a key that is not reopening."""
    if not key.reopening:
        return None
    row = tx.parking(key.resource, key.key)
    if row is None or row.step is None:
        return None
    if row.admitted >= cohort(row.step, slots):
        return False
    if row.admitted == 0 and key.in_use > 0:
        return False  # a step starts once those let in before it have all ended
    return row


def admitted(tx: Tx, row: ParkingRow, task: int, slots: int) -> None:
    """Count a task let in to a reopening key; the first of a step says it in the ledger."""
    assert row.step is not None
    row.admitted += 1
    tx.put_parking(row)
    if row.admitted > 1:
        return
    kind = Kind.RESOURCE_PROBE
    data: dict[str, object] = {"task": task}
    if row.step > 0:
        kind, data = Kind.RESOURCE_COHORT, {"size": cohort(row.step, slots)}
    _record(tx, task, kind, row, data)


def ended(tx: Tx, key: KeyRow, task: int) -> None:
    """After a task of a reopening key gave its slots back: once the step's tasks have all
    ended, begin the next step, or, after a cohort as large as its slots, open the key
    whole and forget its parking (a breaker's count starts anew)."""
    if key.in_use > 0 or not key.reopening:
        return
    row = tx.parking(key.resource, key.key)
    if row is None or row.step is None or row.admitted == 0:
        return
    resource = tx.resource(key.resource)
    if resource is None:
        return
    if row.step > 0 and cohort(row.step, resource.slots) >= resource.slots:
        tx.drop_parking(row.resource, row.key)
        _record(tx, task, Kind.RESOURCE_REOPENED, row, {})
        return
    row.step, row.admitted = row.step + 1, 0
    tx.put_parking(row)


def _record(tx: Tx, task: int, kind: Kind, row: ParkingRow, data: dict[str, object]) -> None:
    """Say it in the ledger of the task's token."""
    found = tx.task(task)
    if found is not None:
        tx.record(found.token, kind, {"resource": row.resource, "key": row.key, **data})
