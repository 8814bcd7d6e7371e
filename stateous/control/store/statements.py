"""How a transaction's SQL reaches its database: the one face that every class of verbs
writes its statements against.

The verbs of `Tx` live in classes of statements, one per concern (`sql.py`'s moves,
`listing_sql.py`, `plan_sql.py`, ...), each a `Statements`: none overrides another,
so a new verb is written once, in the class of its concern. A store's transaction
(`sqlite.py`, `postgres/store.py`) is all of them at once, and supplies `execute`
and what else its database does its own way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from stateous.control.store.columns import LISTED
from stateous.control.store.rows import to_column

Rows = list[tuple[Any, ...]]


class Statements(ABC):
    """A transaction as its SQL sees it: where statements go, and the words they share.

    `now` is the transaction's time, `stamp` the same as a column keeps it. `listed` is the table of
    the keys of a JSON list (`columns.LISTED` on SQLite). `for_update` ends every
    read of a row that the transaction may change: empty on SQLite, whose single
    writer needs no row locks; `FOR UPDATE` in a Postgres write.
    """

    now: float
    stamp: str
    for_update = ""
    #: How a statement reads the keys of its one JSON parameter as a table.
    listed = LISTED

    @abstractmethod
    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> Rows:
        """Run one statement with `?` placeholders and return its rows."""

    def column_time(self, moment: float) -> str:
        """A moment as a column keeps it; the transaction's own time is made once (`stamp`)."""
        return self.stamp if moment == self.now else to_column(moment)

    def change(self, sql: str, bindings: tuple[Any, ...] = ()) -> None:
        """Run one statement whose rows are not read; a store may send it without waiting."""
        self.execute(sql, bindings)

    def reads(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[Rows]:
        """Run several statements and answer the rows of each; a store may send them together."""
        return [self.execute(sql, bindings) for sql, bindings in statements]

    def one(self, sql: str, bindings: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        """Run one statement and return its first row, if any."""
        rows = self.execute(sql, bindings)
        return rows[0] if rows else None
