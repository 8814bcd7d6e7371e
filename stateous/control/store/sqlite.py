"""The SQLite store, through APSW: one writer thread that commits in groups.

Every write operation goes to a single writer thread, which runs the operations
that are waiting together in one transaction, each inside its own savepoint, and
commits them with one sync (a group commit): one failed operation rolls back
alone, and a caller is answered only after the commit is on disk. Reads run on a
connection of the calling thread, beside the writer, thanks to WAL.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from stateous.control.errors import DatabaseBusy
from stateous.control.histogram import WriterTimes
from stateous.control.store.contract import KeepAndRaise, Result, Tx
from stateous.control.store.migrations import migrate, upgrade_failed
from stateous.control.store.queued import QueuedTx

log = logging.getLogger("stateous.control.store")

BUSY_MILLISECONDS = 30_000
#: The most operations that one commit takes together.
BATCH = 64


def connect(path: str, busy: int = BUSY_MILLISECONDS) -> apsw.Connection:
    """Open a connection with the settings every connection of the store shares."""
    connection = apsw.Connection(path)
    connection.setbusytimeout(busy)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("PRAGMA wal_autocheckpoint = 10000")
    connection.execute("PRAGMA foreign_keys = OFF")
    return connection


class _Job:
    __slots__ = ("done", "error", "operation", "result")

    def __init__(self, operation: Callable[[Tx], Any]) -> None:
        self.operation = operation
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class SqliteStore:
    """A control plane's database in one SQLite file."""

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        busy: int = BUSY_MILLISECONDS,
    ) -> None:
        self.path = str(path)
        self.clock = clock
        self.busy = busy
        self._writer = connect(self.path, busy)
        try:
            migrate(SqliteTx(self._writer, clock()), dialect="sqlite")
        except apsw.Error as ex:
            self._writer.close()
            raise upgrade_failed(str(ex)) from None
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._fenced: Exception | None = None
        self.writer = WriterTimes()
        self._thread = threading.Thread(
            target=self._write_loop, name="stateous-writer", daemon=True
        )
        self._thread.start()

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` in a write transaction; return once it is committed."""
        if self._fenced is not None:
            raise self._fenced
        job = _Job(operation)
        self._jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    def read(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` on a consistent snapshot, beside the writer."""
        if self._fenced is not None:
            raise self._fenced
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = connect(self.path, self.busy)
            self._local.connection = connection
            with self._lock:
                self._readers.append(connection)
        connection.execute("BEGIN")
        try:
            return operation(SqliteTx(connection, self.clock()))
        except apsw.BusyError:
            raise DatabaseBusy("the database is busy; try again") from None
        finally:
            connection.execute("COMMIT")

    def fence(self, error: Exception) -> None:
        """Refuse every later read and write with `error`: this store is no longer ours."""
        self._fenced = error

    def close(self) -> None:
        """Finish the writes in flight, then close every connection."""
        self._jobs.put(None)
        self._thread.join()
        with self._lock:
            for connection in self._readers:
                connection.close()
        self._writer.close()

    def _write_loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            batch = [job]
            stop = False
            while len(batch) < BATCH:
                try:
                    more = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            try:
                self._commit(batch)
            except BaseException as ex:
                self._abandon(batch, ex)
            if stop:
                return

    def _abandon(self, batch: list[_Job], ex: BaseException) -> None:
        """Keep the writer alive when a batch breaks: roll it back and refuse each of its jobs."""
        log.exception("a batch of writes failed; it is rolled back")
        with contextlib.suppress(apsw.Error):
            if not self._writer.getautocommit():
                self._writer.execute("ROLLBACK")
        for job in batch:
            if not job.done.is_set():
                job.result = None
                job.error = DatabaseBusy(
                    f"the database failed to take the change ({ex}); try again"
                )
                job.done.set()

    def _commit(self, batch: list[_Job]) -> None:
        connection = self._writer
        try:
            connection.execute("BEGIN IMMEDIATE")
        except apsw.BusyError:
            for job in batch:
                job.error = DatabaseBusy("the database is busy; try again")
                job.done.set()
            return
        for job in batch:
            connection.execute("SAVEPOINT operation")
            try:
                job.result = SqliteTx(connection, self.clock()).run(job.operation)
            except KeepAndRaise as ex:
                job.error = ex.error
            except apsw.BusyError:
                connection.execute("ROLLBACK TO operation")
                job.error = DatabaseBusy("the database is busy; try again")
            except BaseException as ex:
                connection.execute("ROLLBACK TO operation")
                job.error = ex
            connection.execute("RELEASE operation")
        started = time.perf_counter()
        try:
            connection.execute("COMMIT")
            self.writer.committed(time.perf_counter() - started, len(batch))
        except apsw.Error as ex:
            log.error("a commit failed: %s", ex)
            if not connection.getautocommit():
                connection.execute("ROLLBACK")
            for job in batch:
                job.result = None
                job.error = DatabaseBusy(f"the database could not commit ({ex}); try again")
        for job in batch:
            job.done.set()


class SqliteTx(QueuedTx):
    """One transaction on a SQLite connection."""

    def __init__(self, connection: apsw.Connection, now: float) -> None:
        super().__init__(now)
        self.connection = connection

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.connection.execute(sql, bindings).fetchall()
