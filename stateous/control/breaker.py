"""The failure-storm breaker: `breaker=N` failed attempts in a row on one resource key, with
the same fingerprint (`model.fingerprints`), close the key for a cool-down.

The cool-down doubles from a minute (at most an hour) with each trip in a row; then the key
reopens through a probe and cohorts, as after a quota (`parking.py`). An attempt on the key
that ends well starts the count anew; a failure alike while the key reopens trips it again
at once. Everything runs inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any

from stateous.control import quota
from stateous.control.store import ParkingRow, TaskRow, Tx
from stateous.model.graph_file import ResourceSpec
from stateous.model.vocabulary import ParkingCause


def failed(
    tx: Tx, task: TaskRow, token: str, failure: dict[str, Any], declared: dict[str, ResourceSpec]
) -> None:
    """Count a failed attempt (the data of its `task_failed` row: its error and fingerprint)
    against the keys it took whose resource has a breaker, and trip those whose streak
    reaches it."""
    if not any(spec.breaker for spec in declared.values()):
        return
    error, shape = failure["error"], failure["fingerprint"]
    for use in tx.uses(task.id):
        spec = declared.get(use.resource)
        if not use.taken or spec is None or spec.breaker is None:
            continue
        tx.lock_key(use.resource, use.key)  # the streak changes under the key's lock
        row = tx.parking(use.resource, use.key) or ParkingRow(use.resource, use.key)
        again = row.cause == ParkingCause.BREAKER and row.step is not None
        if row.fingerprint == shape:
            row.streak += 1
        else:
            row.fingerprint, row.streak, again = shape, 1, False
        if again or row.streak >= spec.breaker:
            reason = f"{row.streak} failed attempts alike in a row: {error}"[:1000]
            quota.park(tx, token, use.resource, use.key, ParkingCause.BREAKER, reason, None, shape)
        else:
            tx.put_parking(row)


def succeeded(tx: Tx, task: int, declared: dict[str, ResourceSpec]) -> None:
    """An attempt that ended well starts the streak of its keys anew."""
    if not any(spec.breaker for spec in declared.values()):
        return
    for use in tx.uses(task):
        spec = declared.get(use.resource)
        if spec is None or spec.breaker is None:
            continue
        row = tx.parking(use.resource, use.key)
        if row is None or row.streak == 0:
            continue
        if row.cause is None:
            tx.drop_parking(use.resource, use.key)
        else:
            row.streak = 0
            tx.put_parking(row)
