"""The SQLite store, through APSW: one write at a time, run by the callers' own threads,
in groups when they arrive together, or in the turn that the caller opened.

SQLite takes one writer at a time, and a commit costs a sync. A write that finds no
other write running and none waiting runs at once in its caller's thread (no
hand-off to another thread and back). Writes that find one running wait in a
queue; when it ends, the first of them leads: its thread runs all the operations
that wait together in one transaction and commits them with one sync (a group
commit; when one fails, the others run again each in a savepoint, so that it rolls
back alone), then wakes the others. A caller may instead open a unit of work
(`turn()`, `turn.py`), as the server's loop does around the writes it serves: the
writes inside share its transaction, each in a savepoint, a read inside runs on that
transaction, and leaving the block commits. A turn waits at most
`TURN_BUSY_MILLISECONDS` for the database (another write of this process, or another
process that holds the file's lock) and then refuses its writes as busy, so that
its opener never waits for SQLite's busy timeout; a turn begun with a `wake` (the
server's loop) waits for no write of this process: it is told to come back, and goes
next, so that a long write (a large context, a checkpoint) holds no socket. Either way a
caller is answered only after the commit is on disk. Reads run on a connection of the
calling thread, beside the writes, thanks to WAL. Checkpoints run in a thread of their own
(`checkpoints.py`), never in a write.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw

from stateous.control.errors import DatabaseBusy
from stateous.control.histogram import WriterTimes
from stateous.control.store.checkpoints import CHECKPOINT_PAGES, Checkpointer
from stateous.control.store.contract import KeepAndRaise, Result, Tx
from stateous.control.store.counts import Counter
from stateous.control.store.locks import private
from stateous.control.store.migrations import migrate, upgrade_failed
from stateous.control.store.positions import Positions, Reservation
from stateous.control.store.sql import SqlTx
from stateous.control.store.turn import Turn, entered, joined

log = logging.getLogger("stateous.control.store")

BUSY_MILLISECONDS = 30_000
#: The longest a turn waits for the database to begin its transaction: for the write of
#: another thread, or for another process that holds the file's lock (a backup, `auth add`).
TURN_BUSY_MILLISECONDS = 100
#: The most operations that one commit takes together.
BATCH = 64


def make_private(path: str) -> None:
    """Make a new database file readable by its owner only (0600) before SQLite opens it;
    SQLite gives its `-wal` and `-shm` files the database's mode. A file that exists keeps
    its mode."""
    if path != ":memory:" and not path.startswith("file:"):
        open(path, "ab", opener=private).close()


def connect(path: str, busy: int = BUSY_MILLISECONDS) -> apsw.Connection:
    """Open a connection with the settings every connection of the store shares."""
    connection = apsw.Connection(path)
    connection.setbusytimeout(busy)
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = FULL")
    connection.execute("PRAGMA wal_autocheckpoint = 10000")
    connection.execute("PRAGMA foreign_keys = OFF")
    # The statements are written for the indexes they use: a plan must not depend on the
    # values bound. Without this, SQLite prepares some statements again at every new
    # value (the read of a token's row and live task took 10 times as long).
    connection.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)
    return connection


def _call_each(waiting: list[Callable[[], None]]) -> None:
    """Call what waited for a turn's end, each whatever the others do: none must fail the
    turn's opener (the server's loop), which holds other answers."""
    for then in waiting:
        try:
            then()
        except Exception:
            log.exception("what waited for a turn's end failed")


class _Job:
    """One write and, once run, its result or error.

    A queued job waits on `woken`, a lock taken when it is queued and released
    when its turn comes (`batch` then holds the group its thread is to run) or when
    another thread committed it: a waiter's cheapest wake-up, where an `Event`
    would add a condition's work to every write.
    """

    __slots__ = ("batch", "error", "operation", "result", "woken")

    def __init__(self, operation: Callable[[Tx], Any]) -> None:
        self.operation = operation
        self.woken = threading.Lock()
        self.batch: list[_Job] | None = None
        self.result: Any = None
        self.error: BaseException | None = None


class SqliteTurn(Turn):
    """A turn of one store: the transaction its writes share, once the first has begun it,
    and what waits for its commit."""

    __slots__ = ("refused", "reservation", "store", "undone", "waiting", "writes")

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        #: The positions reserved from the turn's BEGIN to its end; None until it begins.
        self.reservation: Reservation | None = None
        #: Why the turn could not begin: its writes are refused with it.
        self.refused: BaseException | None = None
        self.writes = 0
        self.waiting: list[Callable[[], None]] = []
        self.undone: list[Callable[[], None]] = []

    def after(self, then: Callable[[], None], undone: Callable[[], None] | None = None) -> None:
        self.waiting.append(then)
        if undone is not None:
            self.undone.append(undone)

    def begin(self, wake: Callable[[], None] | None) -> bool:
        if self.reservation is not None or self.refused is not None:
            return True
        return self.store._begin_turn(self, wake)


class SqliteStore:
    """A control plane's database in one SQLite file.

    `checkpoint_pages`: the size of the WAL, in frames, that starts a checkpoint.
    """

    database = "sqlite"
    one_writer = True

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        busy: int = BUSY_MILLISECONDS,
        checkpoint_pages: int = CHECKPOINT_PAGES,
    ) -> None:
        self.path = str(path)
        self.clock = clock
        self.busy = busy
        make_private(self.path)
        self._writer = connect(self.path, busy)
        # Each operation of a write runs in a savepoint, whose journal of the pages it
        # changes SQLite otherwise moves to a temporary file past 64 KiB: a fire changes
        # about 100 KiB of pages, so every write made, filled and dropped a file, a quarter
        # of a fire's CPU (bench/bench_write_path.py).
        self._writer.execute("PRAGMA temp_store = MEMORY")
        try:
            migrate(SqliteTx(self._writer, clock()), dialect="sqlite")
        except apsw.Error as ex:
            self._writer.close()
            raise upgrade_failed(str(ex)) from None
        self.positions = Positions(SqliteTx(self._writer, clock()).last_position())
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._lock = threading.Lock()
        #: Guards the three fields below; a pause and `close` wait on it.
        self._guard = threading.Condition()
        #: A write runs now, or writes are paused.
        self._writing = False
        #: The waits for the turn to write other than queued writes (the checkpointer's
        #: pause, a turn's BEGIN): they go next, and new writes queue meanwhile.
        self._waiting = 0
        #: Called when the turn to write is passed on, for a turn that waits to begin
        #: without blocking its thread (`SqliteTurn.begin`); counted in `_waiting`.
        self._wake: Callable[[], None] | None = None
        self._jobs: list[_Job] = []
        self._fenced: Exception | None = None
        self.writer = WriterTimes()
        # Once the WAL starts over, its file is cut back to the size of a checkpoint's frames.
        self._writer.pragma(
            "journal_size_limit", checkpoint_pages * self._writer.pragma("page_size")
        )
        self.checkpointer = Checkpointer(connect(self.path, busy), self.paused, checkpoint_pages)
        self._writer.set_wal_hook(self.checkpointer.committed)

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` in a write transaction; return once it is committed: at once
        when no other write runs or waits, else in the next group. Inside a turn of this
        store, in the turn's transaction, which the turn's end commits."""
        if self._fenced is not None:
            raise self._fenced
        turn = self._own_turn()
        if turn is not None:
            return self._write_in_turn(turn, operation)
        job = _Job(operation)
        with self._guard:
            queued = self._writing or bool(self._waiting) or bool(self._jobs)
            if queued:
                job.woken.acquire()
                self._jobs.append(job)
            else:
                self._writing = True
        if queued:
            job.woken.acquire()
        if not queued or job.batch is not None:
            self._lead(job.batch or [job])
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def turn(self) -> Iterator[Turn]:
        """Open a unit of work for this block (`turn.py`): its writes share one transaction,
        committed as the block ends, or rolled back when it raises. A commit that fails
        raises `DatabaseBusy`: none of the turn's writes is kept. Inside a turn of this
        store, the turn open goes on."""
        open_turn = self._own_turn()
        if open_turn is not None:
            yield open_turn
            return
        turn = SqliteTurn(self)
        with entered(turn):
            try:
                yield turn
            except BaseException:
                self._end_turn(turn, commit=False)
                _call_each(turn.undone)
                raise
        try:
            self._end_turn(turn, commit=True)
        except BaseException:
            _call_each(turn.undone)
            raise
        _call_each(turn.waiting)

    def read(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` on a consistent snapshot, beside the writer."""
        if self._fenced is not None:
            raise self._fenced
        turn = self._own_turn()
        if turn is not None and turn.reservation is not None:
            # On the turn's transaction, which holds writes that are not committed yet.
            return operation(SqliteTx(self._writer, self.clock()))
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

    def horizon(self) -> int:
        return self.positions.horizon()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No write runs while this lasts; it waits for the write in progress to end."""
        with self._guard:
            self._waiting += 1
            while self._writing:
                self._guard.wait()
            self._waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            self._pass_turn()

    def fence(self, error: Exception) -> None:
        """Refuse every later read and write with `error`: this store is no longer ours."""
        self._fenced = error

    def close(self) -> None:
        """Let the writes in flight finish, then close every connection."""
        with self._guard:
            while self._writing or self._jobs:
                self._guard.wait()
        self.checkpointer.close()
        with self._lock:
            for connection in self._readers:
                connection.close()
        self._writer.close()

    def _own_turn(self) -> SqliteTurn | None:
        """The turn of this store open in this context, if any."""
        turn = joined()
        return turn if isinstance(turn, SqliteTurn) and turn.store is self else None

    def _write_in_turn(self, turn: SqliteTurn, operation: Callable[[Tx], Result]) -> Result:
        """Run a write in the transaction of its turn, beginning it first if need be; in a
        savepoint, so that one that fails rolls back alone."""
        turn.begin(None)
        if turn.refused is not None:
            raise turn.refused
        assert turn.reservation is not None
        result, error = self._in_savepoint(operation, turn.reservation)
        turn.writes += 1
        if error is not None:
            raise error
        return result  # type: ignore[no-any-return]

    def _begin_turn(self, turn: SqliteTurn, wake: Callable[[], None] | None) -> bool:
        """Take the turn to write, as a group's leader does, and begin the transaction. While
        another write of this process holds it: with `wake`, answer False at once and call
        `wake` once it is passed on, this turn going next; without, wait for it at most
        `TURN_BUSY_MILLISECONDS`. Another process that holds the file is waited for as long;
        a turn that cannot begin then is refused (`turn.refused`)."""
        deadline = time.monotonic() + TURN_BUSY_MILLISECONDS / 1000
        with self._guard:
            if wake is not None and self._writing:
                if self._wake is None:
                    self._waiting += 1
                self._wake = wake
                return False
            if self._wake is not None:  # the turn that waited to begin does now
                self._wake = None
                self._waiting -= 1
            self._waiting += 1
            try:
                while self._writing and self._guard.wait(deadline - time.monotonic()):
                    pass
            finally:
                self._waiting -= 1
            if self._writing:
                turn.refused = DatabaseBusy("the database is busy; try again")
                return True
            self._writing = True
        left = max(1, int((deadline - time.monotonic()) * 1000))
        self._writer.setbusytimeout(left)
        try:
            self._writer.execute("BEGIN IMMEDIATE")
        except Exception as ex:
            self._pass_turn()
            turn.refused = failure(ex)
            return True
        finally:
            self._writer.setbusytimeout(self.busy)
        turn.reservation = self.positions.reserve()
        return True

    def _end_turn(self, turn: SqliteTurn, *, commit: bool) -> None:
        """Commit a turn's transaction, or roll it back, and pass the turn to write on;
        `DatabaseBusy` when the commit failed and its writes are rolled back."""
        if turn.reservation is None:
            return
        failed: apsw.Error | None = None
        try:
            if commit:
                failed = self._commit_now(turn.writes)
            else:
                with contextlib.suppress(apsw.Error):
                    self._writer.execute("ROLLBACK")
        finally:
            turn.reservation.release()
            turn.reservation = None
            self._pass_turn()
        if failed is not None:
            raise DatabaseBusy(f"the database could not commit ({failed}); try again")

    def _lead(self, batch: list[_Job]) -> None:
        """Run a group of writes in this thread, pass the turn on, then wake the others of
        the group: each is committed."""
        try:
            self._run(batch)
        finally:
            self._pass_turn()
        for job in batch[1:]:
            job.woken.release()

    def _pass_turn(self) -> None:
        """End a write, a turn or a pause: a pause or a turn that waits goes next, else the
        writes that wait, led by the first of them (so its thread needs no other wake-up),
        else no one."""
        with self._guard:
            if self._waiting or not self._jobs:
                self._writing = False
                self._guard.notify_all()
                wake = self._wake
                batch = None
            else:
                batch, self._jobs = self._jobs[:BATCH], self._jobs[BATCH:]
        if batch is not None:
            batch[0].batch = batch
            batch[0].woken.release()
        elif wake is not None:
            wake()

    def _run(self, batch: list[_Job]) -> None:
        """Commit a batch; keep the store alive when it breaks. One reservation of positions for
        the batch, whose rows commit together, released before any caller is answered, so
        that a caller woken by its answer reads its rows."""
        reservation = self.positions.reserve()
        try:
            self._commit(batch, reservation)
        except BaseException as ex:
            self._abandon(batch, ex)
        finally:
            reservation.release()

    def _abandon(self, batch: list[_Job], ex: BaseException) -> None:
        """Roll a broken batch back and refuse each of its jobs."""
        log.exception("a batch of writes failed; it is rolled back")
        with contextlib.suppress(apsw.Error):
            if not self._writer.getautocommit():
                self._writer.execute("ROLLBACK")
        for job in batch:
            job.result = None
            job.error = DatabaseBusy(f"the database failed to take the change ({ex}); try again")

    def _commit(self, batch: list[_Job], reservation: Reservation) -> None:
        """Run a group's operations one after another in one transaction, and commit.

        When one fails, the transaction is rolled back: that operation's error is its
        answer, and the others run again, each in a savepoint of its own, so that another
        that fails rolls back alone. A savepoint copies every page its operation changes,
        a twentieth of a write's work, which a group where nothing fails does without.
        """
        connection = self._writer
        if not self._begin(batch):
            return
        failed = self._run_together(batch, reservation)
        if failed is not None:
            connection.execute("ROLLBACK")
            batch = [job for job in batch if job is not failed]
            if not batch or not self._begin(batch):
                return
            self._run_apart(batch, reservation)
        commit_error = self._commit_now(len(batch))
        if commit_error is not None:
            for job in batch:
                job.result = None
                job.error = DatabaseBusy(
                    f"the database could not commit ({commit_error}); try again"
                )

    def _commit_now(self, operations: int) -> apsw.Error | None:
        """Commit the write transaction of `operations` and time it; when the commit fails,
        roll back and answer why."""
        connection = self._writer
        started = time.perf_counter()
        try:
            connection.execute("COMMIT")
        except apsw.Error as ex:
            log.error("a commit failed: %s", ex)
            with contextlib.suppress(apsw.Error):
                if not connection.getautocommit():
                    connection.execute("ROLLBACK")
            return ex
        self.writer.committed(time.perf_counter() - started, operations)
        return None

    def _begin(self, batch: list[_Job]) -> bool:
        """Begin the write transaction; when the database is busy, refuse every job."""
        try:
            self._writer.execute("BEGIN IMMEDIATE")
        except apsw.BusyError:
            for job in batch:
                job.error = DatabaseBusy("the database is busy; try again")
            return False
        return True

    def _run_together(self, batch: list[_Job], reservation: Reservation) -> _Job | None:
        """Run the operations until one fails; answer that one, its error set (a refusal
        kept with what it wrote, `KeepAndRaise`, is no failure)."""
        for job in batch:
            try:
                job.result = SqliteTx(self._writer, self.clock(), reservation).run(job.operation)
            except KeepAndRaise as ex:
                job.error = ex.error
            except BaseException as ex:
                job.result, job.error = None, failure(ex)
                return job
        return None

    def _run_apart(self, batch: list[_Job], reservation: Reservation) -> None:
        """Run every operation in a savepoint of its own: one that fails rolls back alone."""
        for job in batch:
            job.result, job.error = self._in_savepoint(job.operation, reservation)

    def _in_savepoint(
        self, operation: Callable[[Tx], Any], reservation: Reservation
    ) -> tuple[Any, BaseException | None]:
        """Run an operation in a savepoint of the open transaction: its result, or the error
        its caller gets (a refusal kept with what it wrote, or a failure rolled back alone)."""
        connection = self._writer
        connection.execute("SAVEPOINT operation")
        try:
            return SqliteTx(connection, self.clock(), reservation).run(operation), None
        except KeepAndRaise as ex:
            return None, ex.error
        except BaseException as ex:
            connection.execute("ROLLBACK TO operation")
            return None, failure(ex)
        finally:
            connection.execute("RELEASE operation")


def failure(ex: BaseException) -> BaseException:
    """The error that a write's caller gets for what its operation raised."""
    if isinstance(ex, apsw.BusyError):
        return DatabaseBusy("the database is busy; try again")
    return ex


class SqliteTx(SqlTx):
    """One transaction on a SQLite connection: what SQLite does its own way."""

    def __init__(
        self, connection: apsw.Connection, now: float, reservation: Reservation | None = None
    ) -> None:
        super().__init__(now, reservation)
        self.connection = connection

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.connection.execute(sql, bindings).fetchall()

    def insert_row(self, table: str, columns: str, values: tuple[Any, ...]) -> int:
        """Insert a row and answer the rowid SQLite gave it: `RETURNING` would collect the
        ids in a temporary table."""
        marks = ", ".join("?" for _ in values)
        self.connection.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", values)
        return self.connection.last_insert_rowid()

    def cancel_pending(self, statement: str, bindings: tuple[Any, ...]) -> None:
        """Cancel pending timers and count how many went, as SQLite tells once the UPDATE
        has run (`RETURNING` would collect the rows in a temporary table)."""
        self.connection.execute(statement, bindings)
        gone = self.connection.changes()
        if gone:
            self.counts.count(Counter.TIMERS_PENDING, "", -gone)
