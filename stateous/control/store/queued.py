"""A transaction that notes which queues it queued a task in.

A claim may wait for a task (`stateous.control.waits`); once a write commits, the
claims waiting for the queues it queued a task in are woken to claim again. The
queues are noted where the task's row is inserted: its state, by the name a claim
lists (a child workflow's task is claimed as `child/state`), and its contract, which
a claim that names its supervisor's graph lists instead; a retried task or a resumed token
(whose queued task becomes claimable again) wakes every waiting claim, since the
state is not at hand there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from stateous.control.store.counts import CountingTx
from stateous.control.store.positions import Reservation
from stateous.model.vocabulary import Kind

#: Entries after which a task of any state may be claimable.
WAKE_ALL = frozenset({Kind.TASK_RETRYING, Kind.RESUMED})


class QueuedTx(CountingTx):
    """`CountingTx` that keeps `queued_in`: how many tasks it queued in each state and in
    each contract (None: maybe some in any)."""

    def __init__(self, now: float, reservation: Reservation | None = None) -> None:
        super().__init__(now, reservation)
        self.queued_in: Counter[str] | None = Counter()

    def insert_task(self, token: str, state: str, visit: int, contract: str | None) -> int:
        if self.queued_in is not None:
            self.queued_in[state] += 1
            if contract is not None:
                self.queued_in[contract] += 1
        return super().insert_task(token, state, visit, contract)

    def record(self, token: str, kind: str, data: dict[str, Any], key: str | None = None) -> None:
        if kind in WAKE_ALL:
            self.queued_in = None
        super().record(token, kind, data, key)
