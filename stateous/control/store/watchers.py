"""What a transaction tells of the rows it writes, to what keeps something beside them.

The transaction's verbs write (`sql.py`); a watcher that the transaction holds keeps
what follows from the writes: the counts (`counts.py`), the queues that a change
queued a task in (`queued.py`), on Postgres the change's first ledger row
(`postgres/settle.py`). Each kind of write calls its hook from the one verb that
writes it, so a watcher hooks `record` (or any other write) once, in one place, and
a verb that writes none of these rows knows no watcher.
"""

from __future__ import annotations

from typing import Any

from stateous.control.store.rows import TaskRow
from stateous.control.store.statements import Statements


class Watcher:
    """The hooks of a transaction's writes; each does nothing unless a watcher defines it."""

    __slots__ = ()

    def recorded(self, token: str, seq: int | None, kind: str, data: str) -> None:
        """A ledger row is written: `seq` is None when the database numbers it; `data` is
        its JSON text, `by` and `plan` in it."""

    def token_written(self, before: tuple[Any, ...] | None, after: tuple[Any, ...]) -> None:
        """A token's row is inserted (`before` None) or saved; both are `TOKEN_COLUMNS`."""

    def task_queued(self, state: str, contract: str | None) -> None:
        """A task is inserted, queued."""

    def task_saved(self, row: TaskRow) -> None:
        """A task's row is saved from `row.was` to `row.status`."""

    def timer_set(self) -> None:
        """A pending timer is inserted."""

    def timer_settled(self, status: str) -> None:
        """A pending timer is given `status`."""

    def finished(self, tx: Statements, refused: Exception | None) -> None:
        """The operation ended, to be committed, its ledger rows written; `refused` is the
        refusal it keeps to raise after the commit, if any. A watcher writes here what it
        keeps in the database."""
