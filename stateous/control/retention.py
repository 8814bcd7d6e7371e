"""Retention (`serve --keep-ended DURATION`): remove the token trees that ended long ago.

A thread of its own wakes every `EVERY` seconds and removes the trees whose every
token ended longer ago than the duration kept, in batches of `BATCH` trees, each
batch its own short transaction, until a batch finds less than a full one. A batch
is an ordinary write of the store: on SQLite it waits its turn behind the writes
already queued and holds the writer for a few milliseconds (bench/bench_retention.py
measures it); on Postgres it skips the trees that a change holds. It writes no
ledger row: the count of tokens removed goes to `/metrics`, and each batch logs one
line. The engine is not involved: removing what ended moves no token.
"""

from __future__ import annotations

import logging
import threading
import time

from stateous.control.store import Counter, Removed, Store, Tx, to_column

log = logging.getLogger("stateous.control.retention")

#: How often retention looks for trees to remove, in seconds.
EVERY = 1.0
#: The most trees that one batch removes.
BATCH = 10


def remove_batch(store: Store, keep: float, limit: int = BATCH) -> tuple[Removed, float]:
    """Remove up to `limit` trees that ended more than `keep` seconds ago, in one write;
    count the tokens removed with the change. Answer what went and how long the
    operation ran inside its transaction, in seconds (the wait for its turn left out)."""

    def operation(tx: Tx) -> tuple[Removed, float]:
        started = time.perf_counter()
        removed = tx.remove_ended(to_column(tx.now - keep), limit)
        if removed.tokens:
            tx.count(Counter.TOKENS_REMOVED, "", removed.tokens)
        return removed, time.perf_counter() - started

    return store.write(operation)


def remove_written(store: Store, trees: dict[str, int], before: str, limit: int = BATCH) -> Removed:
    """Remove the trees that an archive wrote (top: its last ledger position), `limit` to a
    write, each only while it is as written; answer what went, and how many were gone
    already, all batches together."""
    tops = sorted(trees)
    went = Removed()
    for start in range(0, len(tops), limit):
        batch = {top: trees[top] for top in tops[start : start + limit]}

        def operation(tx: Tx, batch: dict[str, int] = batch) -> Removed:
            removed = tx.remove_trees(batch, before)
            if removed.tokens:
                tx.count(Counter.TOKENS_REMOVED, "", removed.tokens)
            return removed

        removed = store.write(operation)
        went = Removed(
            went.trees + removed.trees,
            went.tokens + removed.tokens,
            gone=went.gone + removed.gone,
        )
    return went


def sweep(store: Store, keep: float, limit: int = BATCH) -> int:
    """Remove batches until one is not full; log a line per batch that removed something;
    answer how many tokens went."""
    tokens = 0
    while True:
        removed, took = remove_batch(store, keep, limit)
        if removed.schedule_rows:
            log.info(
                "retention: removed %d schedule occurrence(s) from over %ds ago",
                removed.schedule_rows,
                keep,
            )
        if removed.tokens or removed.plan_rows:
            log.info(
                "retention: removed %d token tree(s), %d token(s) and %d plan row(s) that "
                "ended over %ds ago; the batch ran %.1f ms in its transaction",
                removed.trees,
                removed.tokens,
                removed.plan_rows,
                keep,
                took * 1000,
            )
        tokens += removed.tokens
        if removed.trees < limit and not removed.plan_rows and not removed.schedule_rows:
            return tokens


class Retention(threading.Thread):
    """Sweeps every `every` seconds until stopped; a sweep that fails is logged in one line
    and tried again at the next."""

    def __init__(self, store: Store, keep: float, every: float = EVERY) -> None:
        super().__init__(name="stateous-retention", daemon=True)
        self.store = store
        self.keep = keep
        self.every = every
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(self.every):
            try:
                sweep(self.store, self.keep)
            except Exception as ex:
                log.warning("retention failed (%s); it tries again in %.0f s", ex, self.every)

    def stop(self) -> None:
        self._stopped.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join()
