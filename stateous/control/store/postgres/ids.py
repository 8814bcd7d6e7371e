"""The ids of new tasks and timers, which the control plane gives out itself (`Ids`)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

#: How many ids of tasks or timers one trip to a sequence takes.
ID_BLOCK = 64


class Reads(Protocol):
    """A transaction that runs a statement and answers its rows."""

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]: ...


class Ids:
    """Ids for new tasks and timers, taken from each table's sequence a block at a time,
    so that inserting a row need not wait for the database to number it.

    One control plane serves a database, so its ids come from this one place, in
    increasing order like the sequence's own. The rest of a block is skipped when
    the process ends: a sequence has gaps anyway.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: dict[str, list[int]] = {}

    def forget(self) -> None:
        """Drop the ids taken and not used yet."""
        with self._lock:
            self._free.clear()

    def take(self, table: str, tx: Reads) -> int:
        with self._lock:
            free = self._free.setdefault(table, [])
            if free:
                return free.pop()
        # No lock is held while the transaction waits for the database.
        rows = tx.execute(
            "SELECT nextval(pg_get_serial_sequence(?, 'id')) FROM generate_series(1, ?)",
            (table, ID_BLOCK),
        )
        with self._lock:
            free += (row[0] for row in rows)
            free.sort(reverse=True)
            return free.pop()
