"""Connections to Postgres: their time limits, keepalives, and a small pool.

Every connection carries the limits of the reliability guarantees
(`connect_timeout`, `statement_timeout`, `lock_timeout`, TCP keepalives on both
ends), so that no request waits for ever on a bad network or a lock. JSON columns
come back as text, which the shared SQL decodes itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, TypedDict

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.string import TextLoader

from stateous.control.errors import DatabaseBusy
from stateous.control.store.postgres.pipeline import Pipeline, Prepared
from stateous.model.errors import Failure

CONNECT_SECONDS = 10
STATEMENT_MILLISECONDS = 30_000
LOCK_MILLISECONDS = 10_000


class Keepalives(TypedDict):
    """libpq's keepalive parameters, which a connection is opened with by name."""

    keepalives: int
    keepalives_idle: int
    keepalives_interval: int
    keepalives_count: int


#: TCP keepalives: the first probe after 30 s of silence, then every 10 s, 3 probes.
KEEPALIVES: Keepalives = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


class Unreachable(Failure):
    """A connection to the database cannot be made."""


def first_line(ex: BaseException) -> str:
    """The first line of an error, for a sentence of our own."""
    return (str(ex).strip().splitlines() or [type(ex).__name__])[0]


class Connection(psycopg.Connection[Any]):
    """A connection that knows its server session, to settle a COMMIT that went unanswered."""

    #: The server process of this connection and its start, which tell it from a later
    #: process with the same id; `connect` reads them.
    session: tuple[int, Any] = (0, None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The statements that this connection's transactions have prepared.
        self.prepared_statements = Prepared()

    def end_transaction(self, pipeline: Pipeline) -> None:
        """Commit the transaction in `pipeline`: send the COMMIT, and wait for its answer
        and every answer before it."""
        pipeline.send("COMMIT", ())
        pipeline.sync()


def connect(
    url: str,
    *,
    lock_timeout: int = LOCK_MILLISECONDS,
    statement_timeout: int = STATEMENT_MILLISECONDS,
) -> Connection:
    """Open an autocommit connection with the time limits; JSON columns come back as text."""
    try:
        given = conninfo_to_dict(url).get("options")
    except psycopg.ProgrammingError as ex:
        raise Unreachable(f"the database URL cannot be read: {first_line(ex)}") from None
    options = " ".join(
        f"-c {name}={value}"
        for name, value in (
            ("statement_timeout", statement_timeout),
            ("lock_timeout", lock_timeout),
            # The server's end probes too, so that it ends the session, and frees its locks
            # (the serving lock among them), about a minute after this computer is gone.
            ("tcp_keepalives_idle", KEEPALIVES["keepalives_idle"]),
            ("tcp_keepalives_interval", KEEPALIVES["keepalives_interval"]),
            ("tcp_keepalives_count", KEEPALIVES["keepalives_count"]),
        )
    )
    try:
        connection = Connection.connect(
            url,
            autocommit=True,
            connect_timeout=CONNECT_SECONDS,
            client_encoding="utf8",
            options=f"{given} {options}" if given else options,
            **KEEPALIVES,
        )
    except psycopg.OperationalError as ex:
        raise Unreachable(f"cannot connect to the database: {first_line(ex)}") from None
    connection.adapters.register_loader("json", TextLoader)
    row = connection.execute(
        "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
    ).fetchone()
    connection.session = (row[0], row[1]) if row else (connection.info.backend_pid, None)
    return connection


class SessionLost(Exception):
    """A connection broke before its transaction sent its COMMIT: nothing of it was kept."""


class Pool:
    """Up to `size` connections, each lent to one thread at a time; a broken one is dropped."""

    def __init__(self, connect: Callable[[], Connection], size: int) -> None:
        self._connect = connect
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        if not self._slots.acquire(timeout=CONNECT_SECONDS):
            raise DatabaseBusy("every connection to the database is in use; try again")
        try:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                connection = self._connect()
            try:
                yield connection
            finally:
                self._give_back(connection)
        finally:
            self._slots.release()

    def _give_back(self, connection: Connection) -> None:
        with self._lock:
            if not self._closed and connection.info.transaction_status == TransactionStatus.IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def flush(self) -> None:
        """Close the idle connections: one of their server's sessions broke, so the others
        are likely gone too (a failover ends them all); new ones reach the new primary."""
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.flush()


@cache
def _placeholders(sql: str) -> str:
    """Turn the shared SQL's `?` placeholders into psycopg's `%s`."""
    return sql.replace("%", "%%").replace("?", "%s")


class Statements:
    """Statements run one by one on an autocommit connection: the schema upgrade's."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(_placeholders(sql), bindings, prepare=False)
        return cursor.fetchall() if cursor.description is not None else []
