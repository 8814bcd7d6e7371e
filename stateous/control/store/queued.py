"""What a transaction notes of the queues it queued a task in.

A claim may wait for a task (`stateous.control.waiting_claims`); once a write commits, the
claims waiting for the queues it queued a task in are woken to claim again. The
queues are noted where the task's row is inserted: its state, by the name a claim
lists (a child workflow's task is claimed as `child/state`), and its contract, which
a claim that names its supervisor's graph lists instead; a retried task or a resumed token
(whose queued task becomes claimable again) wakes every waiting claim, since the
state is not at hand there.
"""

from __future__ import annotations

from collections import Counter

from stateous.control.store.watchers import Watcher
from stateous.model.vocabulary import Kind

#: Entries after which a task of any state may be claimable.
WAKE_ALL = frozenset({Kind.TASK_RETRYING, Kind.RESUMED})


class Queued(Watcher):
    """`queued_in`: how many tasks a change queued in each state and in each contract (None:
    maybe some in any)."""

    __slots__ = ("queued_in",)

    def __init__(self) -> None:
        self.queued_in: Counter[str] | None = Counter()

    def task_queued(self, state: str, contract: str | None) -> None:
        if self.queued_in is not None:
            self.queued_in[state] += 1
            if contract is not None:
                self.queued_in[contract] += 1

    def recorded(self, token: str, seq: int | None, kind: str, data: str) -> None:
        if kind in WAKE_ALL:
            self.queued_in = None
