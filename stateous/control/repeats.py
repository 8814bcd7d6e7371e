"""What a failed attempt records of its failure, and whether `stop_on_repeat` ends the
task's retries.

The control plane computes the fingerprint from the attempt's error text (`stateous.model.
fingerprints`), so a failure reported by any supervisor, or a lease that ended, has one.
Beside it goes the digest of the token's context as it is when the attempt fails. A state
with `stop_on_repeat=N` stops retrying once its task's last N failures, read back from the
ledger since the task was queued, agree on both: the same failure on the same input, which
another attempt would only repeat. Everything runs inside the transaction that the engine
opened.
"""

from __future__ import annotations

from typing import Any

from stateous.control.store import TaskRow, TokenRow, Tx
from stateous.model.fingerprints import failure_shape, fingerprint
from stateous.model.graph_file import StateSpec
from stateous.model.repeats import context_digest
from stateous.model.vocabulary import Kind


def failure(task: TaskRow, token: TokenRow, error: str) -> dict[str, Any]:
    """The data of a `task_failed` row: the task, the error, its fingerprint, and the digest
    of the context it failed on."""
    return {
        "task": task.id,
        "error": error,
        "fingerprint": fingerprint(error),
        "context_digest": context_digest(token.context),
    }


def stopped(tx: Tx, token: TokenRow, spec: StateSpec, failed: dict[str, Any]) -> bool:
    """Whether the failure `failed`, just recorded, is the state's `stop_on_repeat`-th in a
    row of the same kind on the same context; if so, record `retries_stopped`."""
    if spec.stop_on_repeat is None:
        return False
    queued = tx.last_entry(token.token, (Kind.TASK_QUEUED,))
    since = 0 if queued is None else queued.seq
    same = (failed["fingerprint"], failed["context_digest"])
    repeats = 0
    for entry in reversed(tx.entries_after(token.token, since, Kind.TASK_FAILED)):
        if entry.data.get("task") != failed["task"]:
            continue
        if (entry.data.get("fingerprint"), entry.data.get("context_digest")) != same:
            break
        repeats += 1
    if repeats < spec.stop_on_repeat:
        return False
    tx.record(
        token.token,
        Kind.RETRIES_STOPPED,
        {
            "task": failed["task"],
            "fingerprint": failed["fingerprint"],
            "shape": failure_shape(failed["error"]),
            "repeats": repeats,
        },
    )
    return True
