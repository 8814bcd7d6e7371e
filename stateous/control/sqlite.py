"""The SQLite store, through APSW: one writer thread that commits in groups.

Every write operation goes to a single writer thread, which runs the operations
that are waiting together in one transaction, each inside its own savepoint, and
commits them with one sync (a group commit): one failed operation rolls back
alone, and a caller is answered only after the commit is on disk. Reads run on a
connection of the calling thread, beside the writer, thanks to WAL.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import msgspec

from stateous.control.errors import DatabaseBusy
from stateous.control.migrations import migrate
from stateous.control.store import (
    LIVE_TASK,
    ControlRow,
    Entry,
    KeepAndRaise,
    Result,
    TaskRow,
    TimerRow,
    TokenRow,
    Tx,
    from_column,
    to_column,
)

log = logging.getLogger("stateous.control.store")

BUSY_MILLISECONDS = 30_000
#: The most operations that one commit takes together.
BATCH = 64

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _json(value: Any) -> str:
    return _encode(value).decode()


def _time(value: str | None) -> float | None:
    return None if value is None else from_column(value)


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
        migrate(SqliteTx(self._writer, clock()), dialect="sqlite")
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._fenced: Exception | None = None
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
            self._commit(batch)
            if stop:
                return

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
                job.result = job.operation(SqliteTx(connection, self.clock()))
            except KeepAndRaise as ex:
                job.error = ex.error
            except apsw.BusyError:
                connection.execute("ROLLBACK TO operation")
                job.error = DatabaseBusy("the database is busy; try again")
            except BaseException as ex:
                connection.execute("ROLLBACK TO operation")
                job.error = ex
            connection.execute("RELEASE operation")
        try:
            connection.execute("COMMIT")
        except apsw.Error as ex:
            log.error("a commit failed: %s", ex)
            if not connection.getautocommit():
                connection.execute("ROLLBACK")
            for job in batch:
                job.result = None
                job.error = DatabaseBusy(f"the database could not commit ({ex}); try again")
        for job in batch:
            job.done.set()


def _token(row: tuple[Any, ...]) -> TokenRow:
    token, state, status, visit, context, entered_at, parent, workflow = row
    return TokenRow(
        token, state, status, visit, _decode(context), from_column(entered_at), parent, workflow
    )


def _task(row: tuple[Any, ...]) -> TaskRow:
    ident, token, state, visit, status, attempt, claimed_by, lease_until, queued_at = row
    return TaskRow(
        ident,
        token,
        state,
        visit,
        status,
        attempt,
        claimed_by,
        _time(lease_until),
        from_column(queued_at),
    )


def _entry(row: tuple[Any, ...]) -> Entry:
    token, seq, at, kind, key, data = row
    return Entry(token, seq, from_column(at), kind, key, _decode(data))


_TOKEN = "token, state, status, visit, context, entered_at, parent, workflow"
_TASK = "id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at"
_ENTRY = "token, seq, at, kind, key, data"


class SqliteTx:
    """One transaction on a SQLite connection."""

    def __init__(self, connection: apsw.Connection, now: float) -> None:
        self.connection = connection
        self.now = now
        self.stamp = to_column(now)
        self._next_seq: dict[str, int] = {}
        self._new: set[str] = set()

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.connection.execute(sql, bindings).fetchall()

    def one(self, sql: str, bindings: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self.execute(sql, bindings)
        return rows[0] if rows else None

    # tokens

    def token(self, token: str) -> TokenRow | None:
        row = self.one(f"SELECT {_TOKEN} FROM tokens WHERE token = ?", (token,))
        return None if row is None else _token(row)

    def token_any_case(self, token: str) -> TokenRow | None:
        row = self.one(f"SELECT {_TOKEN} FROM tokens WHERE lower(token) = lower(?)", (token,))
        return None if row is None else _token(row)

    def insert_token(self, row: TokenRow) -> None:
        self._next_seq[row.token] = 1
        self._new.add(row.token)
        self.execute(
            f"INSERT INTO tokens ({_TOKEN}, moved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.token,
                row.state,
                row.status,
                row.visit,
                _json(row.context),
                to_column(row.entered_at),
                row.parent,
                row.workflow,
                self.stamp,
            ),
        )

    def save_token(self, row: TokenRow) -> None:
        self.execute(
            "UPDATE tokens SET state = ?, status = ?, visit = ?, context = ?, entered_at = ?, "
            "moved_at = ? WHERE token = ?",
            (
                row.state,
                row.status,
                row.visit,
                _json(row.context),
                to_column(row.entered_at),
                self.stamp,
                row.token,
            ),
        )

    def children(self, parent: str) -> list[TokenRow]:
        rows = self.execute(
            f"SELECT {_TOKEN} FROM tokens WHERE parent = ? ORDER BY rowid", (parent,)
        )
        return [_token(row) for row in rows]

    def tokens(self, status: str | None, parent: str | None, limit: int) -> list[TokenRow]:
        where, bindings = [], []
        if status is not None:
            where.append("status = ?")
            bindings.append(status)
        if parent is not None:
            where.append("parent = ?")
            bindings.append(parent)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = self.execute(
            f"SELECT {_TOKEN} FROM tokens {clause} ORDER BY moved_at DESC, token LIMIT ?",
            (*bindings, limit),
        )
        return [_token(row) for row in rows]

    def live_tokens(self) -> int:
        row = self.one("SELECT count(*) FROM tokens WHERE status IN ('active', 'paused')")
        return int(row[0]) if row else 0

    # ledger

    def record(self, token: str, kind: str, data: dict[str, Any], key: str | None = None) -> None:
        seq = self._next_seq.get(token)
        if seq is None:
            row = self.one("SELECT max(seq) FROM ledger WHERE token = ?", (token,))
            seq = (row[0] or 0) + 1 if row else 1
        self._next_seq[token] = seq + 1
        self.execute(
            "INSERT INTO ledger (token, seq, at, kind, key, data) VALUES (?, ?, ?, ?, ?, ?)",
            (token, seq, self.stamp, kind, key, _json(data)),
        )

    def key_used(self, token: str, key: str) -> bool:
        return (
            self.one("SELECT 1 FROM ledger WHERE token = ? AND key = ?", (token, key)) is not None
        )

    def history(self, token: str) -> list[Entry]:
        rows = self.execute(f"SELECT {_ENTRY} FROM ledger WHERE token = ? ORDER BY seq", (token,))
        return [_entry(row) for row in rows]

    def event_counts(self, token: str) -> dict[str, int]:
        rows = self.execute(
            "SELECT json_extract(data, '$.event'), count(*) FROM ledger "
            "WHERE token = ? AND kind = 'event_accepted' GROUP BY 1",
            (token,),
        )
        return {event: count for event, count in rows}

    def visits(self, token: str, state: str) -> int:
        if token in self._new:
            return 0
        row = self.one(
            "SELECT count(*) FROM ledger WHERE token = ? AND kind = 'entered' "
            "AND json_extract(data, '$.state') = ?",
            (token, state),
        )
        return int(row[0]) if row else 0

    def last_entry(self, token: str, kinds: tuple[str, ...]) -> Entry | None:
        marks = ", ".join("?" for _ in kinds)
        row = self.one(
            f"SELECT {_ENTRY} FROM ledger WHERE token = ? AND kind IN ({marks}) "
            "ORDER BY seq DESC LIMIT 1",
            (token, *kinds),
        )
        return None if row is None else _entry(row)

    def entries_after(self, token: str, seq: int, kind: str) -> list[Entry]:
        rows = self.execute(
            f"SELECT {_ENTRY} FROM ledger WHERE token = ? AND seq > ? AND kind = ? ORDER BY seq",
            (token, seq, kind),
        )
        return [_entry(row) for row in rows]

    def last_arrival(self) -> int:
        row = self.one(
            "SELECT max(json_extract(data, '$.arrival')) FROM ledger WHERE kind = 'event_deferred'"
        )
        return int(row[0] or 0) if row else 0

    # tasks

    def insert_task(self, token: str, state: str, visit: int) -> int:
        self.execute(
            "INSERT INTO tasks (token, state, visit, status, attempt, queued_at) "
            "VALUES (?, ?, ?, 'queued', 0, ?)",
            (token, state, visit, self.stamp),
        )
        return int(self.connection.last_insert_rowid())

    def task(self, task: int) -> TaskRow | None:
        row = self.one(f"SELECT {_TASK} FROM tasks WHERE id = ?", (task,))
        return None if row is None else _task(row)

    def save_task(self, row: TaskRow) -> None:
        self.execute(
            "UPDATE tasks SET status = ?, attempt = ?, claimed_by = ?, lease_until = ?, "
            "queued_at = ? WHERE id = ?",
            (
                row.status,
                row.attempt,
                row.claimed_by,
                None if row.lease_until is None else to_column(row.lease_until),
                to_column(row.queued_at),
                row.id,
            ),
        )

    def live_task(self, token: str) -> TaskRow | None:
        row = self.one(
            f"SELECT {_TASK} FROM tasks WHERE token = ? AND status IN {LIVE_TASK} "
            "ORDER BY id DESC LIMIT 1",
            (token,),
        )
        return None if row is None else _task(row)

    def next_queued(self, states: list[str]) -> TaskRow | None:
        """The oldest queued task of these states whose token is active.

        One writer runs at a time on SQLite, so the first such task is free to take.
        """
        marks = ", ".join("?" for _ in states)
        row = self.one(
            f"SELECT {', '.join('t.' + name for name in _TASK.split(', '))} FROM tasks t "
            "JOIN tokens k ON k.token = t.token "
            f"WHERE t.status = 'queued' AND t.state IN ({marks}) AND k.status = 'active' "
            "ORDER BY t.queued_at, t.id LIMIT 1",
            tuple(states),
        )
        return None if row is None else _task(row)

    def expired_leases(self, limit: int) -> list[int]:
        rows = self.execute(
            "SELECT id FROM tasks WHERE status = 'claimed' AND lease_until <= ? "
            "ORDER BY lease_until LIMIT ?",
            (self.stamp, limit),
        )
        return [row[0] for row in rows]

    # timers

    def insert_timer(
        self, token: str, state: str, visit: int, event: str, payload: Any, due_at: float, kind: str
    ) -> int:
        self.execute(
            "INSERT INTO timers (token, state, visit, event, payload, set_at, due_at, status, kind)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
            (token, state, visit, event, _json(payload), self.stamp, to_column(due_at), kind),
        )
        return int(self.connection.last_insert_rowid())

    def timer(self, timer: int) -> TimerRow | None:
        row = self.one(
            "SELECT id, token, state, visit, event, payload, set_at, due_at, status, kind "
            "FROM timers WHERE id = ?",
            (timer,),
        )
        if row is None:
            return None
        ident, token, state, visit, event, payload, set_at, due_at, status, kind = row
        return TimerRow(
            ident,
            token,
            state,
            visit,
            event,
            _decode(payload),
            from_column(set_at),
            from_column(due_at),
            status,
            kind,
        )

    def set_timer_status(self, timer: int, status: str) -> None:
        self.execute("UPDATE timers SET status = ? WHERE id = ?", (status, timer))

    def cancel_timers(self, token: str, kind: str | None = None) -> None:
        if kind is None:
            self.execute(
                "UPDATE timers SET status = 'cancelled' WHERE token = ? AND status = 'pending'",
                (token,),
            )
        else:
            self.execute(
                "UPDATE timers SET status = 'cancelled' "
                "WHERE token = ? AND status = 'pending' AND kind = ?",
                (token, kind),
            )

    def shift_timers(self, token: str, seconds: float) -> None:
        rows = self.execute(
            "SELECT id, due_at FROM timers WHERE token = ? AND status = 'pending'", (token,)
        )
        for ident, due_at in rows:
            moved = to_column(from_column(due_at) + seconds)
            self.execute("UPDATE timers SET due_at = ? WHERE id = ?", (moved, ident))

    def due_timers(self, limit: int) -> list[int]:
        rows = self.execute(
            "SELECT t.id FROM timers t JOIN tokens k ON k.token = t.token "
            "WHERE t.status = 'pending' AND t.due_at <= ? AND k.status = 'active' "
            "ORDER BY t.due_at, t.id LIMIT ?",
            (self.stamp, limit),
        )
        return [row[0] for row in rows]

    # memory

    def memory(self, token: str, state: str) -> dict[str, Any]:
        rows = self.execute(
            "SELECT key, value FROM memory WHERE token = ? AND state = ? ORDER BY key",
            (token, state),
        )
        return {key: _decode(value) for key, value in rows}

    def set_memory(self, token: str, state: str, key: str, value: Any) -> None:
        self.execute(
            "INSERT INTO memory (token, state, key, value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (token, state, key) DO UPDATE SET value = excluded.value",
            (token, state, key, _json(value)),
        )

    def delete_memory(self, token: str, state: str, key: str) -> None:
        self.execute(
            "DELETE FROM memory WHERE token = ? AND state = ? AND key = ?", (token, state, key)
        )

    def drop_memory(self, token: str) -> None:
        self.execute("DELETE FROM memory WHERE token = ?", (token,))

    # claims

    def last_claim(self, supervisor: str) -> tuple[str | None, int | None, int | None] | None:
        row = self.one(
            "SELECT request, task_id, attempt FROM claims WHERE supervisor = ?", (supervisor,)
        )
        return None if row is None else (row[0], row[1], row[2])

    def put_claim(
        self, supervisor: str, request: str | None, task: int | None, attempt: int | None
    ) -> None:
        self.execute(
            "INSERT INTO claims (supervisor, request, task_id, attempt) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (supervisor) DO UPDATE SET request = excluded.request, "
            "task_id = excluded.task_id, attempt = excluded.attempt",
            (supervisor, request, task, attempt),
        )

    # the control plane row

    def control(self) -> ControlRow | None:
        row = self.one("SELECT structure, checksum, serving, since FROM control_plane WHERE id = 1")
        if row is None:
            return None
        return ControlRow(row[0], row[1], row[2], _time(row[3]))

    def put_control(self, row: ControlRow) -> None:
        self.execute(
            "INSERT INTO control_plane (id, structure, checksum, serving, since) "
            "VALUES (1, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET structure = excluded.structure,"
            " checksum = excluded.checksum, serving = excluded.serving, since = excluded.since",
            (
                row.structure,
                row.checksum,
                row.serving,
                None if row.since is None else to_column(row.since),
            ),
        )
