"""The ledger's global order: each new row's `pos`, and how far it may be read.

A row's `seq` counts within its token; `pos` counts across all tokens, for the
live stream (`GET /stream`), whose readers resume after the last `pos` they saw.
A position is taken while its transaction runs, and on Postgres several run at
once, so a transaction with a small position may commit after one with a larger:
a reader that went past the small one would never see it. So each transaction
keeps its positions reserved until it has committed or rolled back, and a reader
reads only up to the `horizon`, below the smallest position still reserved.
One control plane serves a database, so every writer is in this process, and the
numbers come from one counter, started after the largest `pos` that ever committed:
the largest kept, or a larger one that retention removed, which the removal records
(`ledger_removed`), so that no id comes twice once the newest rows are gone. A rolled
back transaction leaves a gap, which a reader passes over.
"""

from __future__ import annotations

import threading


class Positions:
    """The counter of ledger positions, and the positions reserved by running transactions."""

    def __init__(self, last: int = 0) -> None:
        self._lock = threading.Lock()
        self._last = last
        #: The smallest position of each running transaction that took one.
        self._reserved: dict[Reservation, int] = {}

    def reserve(self) -> Reservation:
        """A new transaction's reservation: the positions it takes, until it releases them."""
        return Reservation(self)

    def take(self, reservation: Reservation) -> int:
        """The next position, reserved by `reservation`."""
        with self._lock:
            self._last += 1
            self._reserved.setdefault(reservation, self._last)
            return self._last

    def release(self, reservation: Reservation) -> None:
        """`reservation`'s transaction has committed or rolled back: its positions are settled."""
        with self._lock:
            self._reserved.pop(reservation, None)

    def horizon(self) -> int:
        """The largest position below which no transaction has one reserved: every row up to it
        that will ever commit has committed."""
        with self._lock:
            return min(self._reserved.values(), default=self._last + 1) - 1


class Reservation:
    """The positions that one transaction (on SQLite, one group commit) takes."""

    __slots__ = ("positions",)

    def __init__(self, positions: Positions) -> None:
        self.positions = positions

    def take(self) -> int:
        return self.positions.take(self)

    def release(self) -> None:
        self.positions.release(self)
