"""The Postgres store, through psycopg 3: many transactions at once, one token at a time.

Each write runs in its own transaction on a pooled connection. A transaction
locks the rows of the tokens it reads (`FOR UPDATE`), so each token moves one
step at a time while other tokens move beside it; a claim skips tasks whose
token another transaction holds. Every connection carries the time limits of
`LIMITS`; a request that a limit stops answers `database_busy`, and a deadlock
runs again once. This module keeps rows and takes locks; it decides nothing.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import cache
from typing import Any

import msgspec
import psycopg
from psycopg import errors, generators, pq
from psycopg.adapt import Transformer
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.types.string import TextLoader

from stateous.control.errors import DatabaseBusy, OutcomeUnknown
from stateous.control.hold import HoldLost, HoldRefused
from stateous.control.known import KnownStates
from stateous.control.migrations import SchemaError, migrate, upgrade_failed
from stateous.control.sql import (
    INSERT_TOKEN,
    STATE_COLUMNS,
    STATE_TASK,
    TASK_BY_ID,
    TIMER_BY_ID,
    SqlTx,
    counts_columns,
    next_queued_sql,
    task_row,
    timer_row,
    token_row,
    token_state_sql,
)
from stateous.control.store import (
    LIVE_TASK,
    KeepAndRaise,
    Result,
    TaskRow,
    TimerRow,
    TokenRow,
    Tx,
)
from stateous.model.errors import Failure

log = logging.getLogger("stateous.control.store")
IDLE = TransactionStatus.IDLE
_decode = msgspec.json.decode
TUPLES_OK = pq.ExecStatus.TUPLES_OK
FATAL_ERROR = pq.ExecStatus.FATAL_ERROR

CONNECT_SECONDS = 10
STATEMENT_MILLISECONDS = 30_000
LOCK_MILLISECONDS = 10_000
#: TCP keepalives: the first probe after 30 s of silence, then every 10 s, 3 probes.
KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}
#: How many ids of tasks or timers one trip to a sequence takes.
ID_BLOCK = 64
#: The first key of the advisory locks this module takes (the letters "STAT").
LOCK_CLASS = 0x53544154
#: The second key of the lock that numbers held events.
ARRIVALS = 1
#: The pause before a conflicting transaction runs once more, in seconds (random in between).
RETRY_PAUSE = (0.02, 0.08)

#: Conflicts with another transaction: the operation runs again once.
_CONFLICTS = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation)
_BEGIN_WRITE = "BEGIN"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
#: A value not known to this transaction.
_UNKNOWN: Any = object()
#: The task columns of a token state whose token has no live task.
_NO_TASK = (None,) * (len(STATE_COLUMNS) - STATE_TASK)


@cache
def _family_sql(token: str) -> str:
    """Lock the top token of the family of the token that the SQL `token` names (its oldest
    ancestor), then the token itself, in that order.

    Each step up the family and each lock reads one row by its key, so the plan
    that Postgres keeps cannot turn into a scan of every token, whatever the size
    of the table when it was made.
    """
    return (
        "WITH RECURSIVE up (token, parent) AS ("
        f"SELECT token, parent FROM tokens WHERE token = {token} "
        "UNION ALL SELECT up.parent, (SELECT t.parent FROM tokens t WHERE t.token = up.parent) "
        "FROM up WHERE up.parent IS NOT NULL) "
        "SELECT (SELECT token FROM tokens "
        "WHERE token = (SELECT token FROM up WHERE parent IS NULL) FOR UPDATE), "
        f"(SELECT token FROM tokens WHERE token = {token} FOR UPDATE)"
    )


@cache
def _claim_sql(states: int) -> str:
    """The oldest free queued task of `states` states with its token, locked, then what the
    grant shows besides the token: the data of the event that brought the token into its
    state, and the memory of the state; then the token's last ledger number and number of
    pending timers, so that the claim knows the token's whole state.

    Those reads run outside the locking query, so once, for the row it locked,
    not for each row it passes over because another claim holds it.
    """
    locked = next_queued_sql(
        states, " FOR UPDATE OF t, k SKIP LOCKED", ", t.token AS of_token, k.state AS of_state"
    )
    return (
        "SELECT q.*, (SELECT data FROM ledger WHERE ledger.token = q.of_token "
        "AND kind = 'event_accepted' ORDER BY seq DESC LIMIT 1), "
        "(SELECT json_object_agg(key, value ORDER BY key) FROM memory "
        "WHERE memory.token = q.of_token AND memory.state = q.of_state), "
        f"{', '.join(counts_columns('q.of_token'))} FROM ({locked}) q"
    )


def _literal(value: Any) -> str:
    """Write a value as SQL. Every connection sets `standard_conforming_strings`, under which
    a quote is the only character that a string literal must double (a NUL, which no text
    on Postgres can hold, is refused for the whole batch)."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if value is None:
        return "NULL"
    if type(value) is int:
        return str(value)
    raise TypeError(f"a {type(value).__name__} cannot be written into a statement")


#: The start of the error that a proof stops its transaction with; Postgres logs it.
STALE = "stateous: the state this control plane kept of token "


@cache
def _proof_sql() -> str:
    """One value, read after the token's lock: 1 when the token's state is the one given
    (a row of `token_state_sql`); else an error that stops the transaction and says why in
    the server's log (a division by zero when the token is not there at all)."""
    same = " AND ".join(f"({column})::text IS NOT DISTINCT FROM ?" for column in STATE_COLUMNS)
    stale = f"CAST('{STALE}' || k.token || ' is old; the write runs again' AS INTEGER)"
    state = token_state_sql("?", f"CASE WHEN {same} THEN 1 ELSE {stale} END")
    return f"SELECT 1 / coalesce(({state}), 0)"


class Stale(Exception):
    """A token's state that this control plane kept is not the database's any more."""


class Unreachable(Failure):
    """A connection to the database cannot be made."""


def _first_line(ex: BaseException) -> str:
    return (str(ex).strip().splitlines() or [type(ex).__name__])[0]


class Connection(psycopg.Connection[Any]):
    """A connection that knows the statements it has prepared, by their SQL."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The server process of this connection and its start, which tell it from a
        #: later process with the same id; `connect` reads them.
        self.session: tuple[int, Any] = (0, None)
        self.prepared: dict[str, str] = {}
        #: Names are never used twice: a PREPARE whose batch failed may still exist.
        self.names = itertools.count(1)
        self._loader: Transformer | None = None

    def rows(self, result: pq.abc.PGresult) -> list[tuple[Any, ...]]:
        """The rows of a result: integers as int, every other value as text (JSON stays text,
        by the loader that `connect` registers)."""
        if self._loader is None:
            self._loader = Transformer(self)
        self._loader.set_pgresult(result)
        return self._loader.load_rows(0, result.ntuples, tuple)

    def run(self, text: str) -> list[pq.abc.PGresult]:
        """Send statements as one text and wait for their results, without a cursor: the
        batches of a transaction need none of its conversions."""
        with self.lock:
            self.pgconn.send_query(text.encode())
            results = self.wait(generators.execute(self.pgconn))
        for result in results:
            if result.status == FATAL_ERROR:
                raise errors.error_from_result(result, encoding="utf-8")
        return results


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
        raise Unreachable(f"the database URL cannot be read: {_first_line(ex)}") from None
    options = " ".join(
        f"-c {name}={value}"
        for name, value in (
            ("statement_timeout", statement_timeout),
            ("lock_timeout", lock_timeout),
            ("standard_conforming_strings", "on"),
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
            prepare_threshold=None,
            connect_timeout=CONNECT_SECONDS,
            client_encoding="utf8",
            options=f"{given} {options}" if given else options,
            **KEEPALIVES,
        )
    except psycopg.OperationalError as ex:
        raise Unreachable(f"cannot connect to the database: {_first_line(ex)}") from None
    connection.adapters.register_loader("json", TextLoader)
    row = connection.execute(
        "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
    ).fetchone()
    connection.session = (row[0], row[1]) if row else (connection.info.backend_pid, None)
    return connection


@cache
def _placeholders(sql: str) -> str:
    """Turn the shared SQL's `?` placeholders into psycopg's `%s`."""
    return sql.replace("%", "%%").replace("?", "%s")


@cache
def _numbered(sql: str) -> str:
    """Turn the shared SQL's `?` placeholders into the `$1`, `$2`... of a PREPARE."""
    pieces = sql.split("?")
    return "".join(
        f"{piece}${index}" if index < len(pieces) else piece
        for index, piece in enumerate(pieces, 1)
    )


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
            if not self._closed and connection.info.transaction_status == IDLE:
                self._idle.append(connection)
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()


class PostgresStore:
    """A control plane's database on a Postgres server."""

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        size: int = 10,
        lock_timeout: int = LOCK_MILLISECONDS,
        statement_timeout: int = STATEMENT_MILLISECONDS,
    ) -> None:
        self.clock = clock
        self._fenced: Exception | None = None
        self._ids = Ids()
        self._known = KnownStates()
        self._pool = Pool(
            lambda: connect(url, lock_timeout=lock_timeout, statement_timeout=statement_timeout),
            size,
        )
        try:
            with self._pool.connection() as connection:
                self._migrate(connection)
        except BaseException:
            self._pool.close()
            raise

    def _migrate(self, connection: Connection) -> None:
        """Make or upgrade the tables: the lock limit holds, the statement limit does not."""
        connection.execute("SET statement_timeout = 0")
        try:
            migrate(Statements(connection), dialect="postgres")
        except psycopg.Error as ex:
            raise upgrade_failed(_first_line(ex)) from None
        finally:
            connection.execute("RESET statement_timeout")

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` in one transaction that locks the tokens it reads; once more on
        a deadlock, or when a token's state that this control plane kept was old."""
        try:
            try:
                return self._attempt(operation, _BEGIN_WRITE, _CONFLICTS, prove=True)
            except Stale:
                return self._attempt(operation, _BEGIN_WRITE, _CONFLICTS)
        except _CONFLICTS as ex:
            log.info("a transaction met another (%s); it runs once more", _first_line(ex))
        # Row locks are not queued fairly: let the other transaction finish first.
        time.sleep(random.uniform(*RETRY_PAUSE))
        try:
            return self._attempt(operation, _BEGIN_WRITE, _CONFLICTS)
        except _CONFLICTS as ex:
            raise DatabaseBusy(
                f"the change met another transaction twice ({_first_line(ex)}); try again"
            ) from None

    def read(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` on one snapshot; it locks nothing."""
        return self._attempt(operation, _BEGIN_READ, ())

    def _settle(self, lost: Unanswered) -> Any:
        """Learn whether a transaction whose COMMIT went unanswered was kept.

        Its server session is waited for, and ended if it is still open, so that
        the transaction is over; then its first ledger row, if it is there, tells.
        """
        try:
            with self._pool.connection() as connection:
                ended(connection, lost.session)
                token, seq, at, kind, data = lost.tx.first_entry  # type: ignore[misc]
                rows = connection.execute(
                    "SELECT 1 FROM ledger WHERE token = %s AND at = %s AND kind = %s "
                    "AND data::text = %s AND seq = coalesce(%s, seq)",
                    (token, at, kind, data, seq),
                ).fetchall()
        except (psycopg.Error, Unreachable, DatabaseBusy) as ex:
            raise OutcomeUnknown(
                f"the connection to the database was lost as a change was being committed, "
                f"and the database cannot say now whether it was ({_first_line(ex)}); look "
                "at the token's history before sending the request again"
            ) from None
        if not rows:
            raise DatabaseBusy(
                "the connection to the database was lost before the change was committed; "
                "nothing was written; try again"
            )
        log.info("a COMMIT went unanswered; the database kept it")
        if lost.kept is not None:
            raise lost.kept
        return lost.result

    def fence(self, error: Exception) -> None:
        """Refuse every later read and write with `error`: this store is no longer ours."""
        self._fenced = error

    def close(self) -> None:
        self._pool.close()

    def _attempt(
        self,
        operation: Callable[[Tx], Result],
        begin: str,
        conflicts: tuple[type[Exception], ...],
        prove: bool = False,
    ) -> Result:
        if self._fenced is not None:
            raise self._fenced
        try:
            with self._pool.connection() as connection:
                return self._transaction(connection, operation, begin, prove)
        except conflicts:
            raise
        except Unanswered as lost:
            return self._settle(lost)  # type: ignore[no-any-return]
        except (psycopg.OperationalError, Unreachable) as ex:
            raise DatabaseBusy(f"the database is busy ({_first_line(ex)}); try again") from None

    def _transaction(
        self, connection: Connection, operation: Callable[[Tx], Result], begin: str, prove: bool
    ) -> Result:
        """Run one transaction and commit it; roll it back on any error."""
        kept: Exception | None = None
        result: Any = None
        tx = PostgresTx(
            connection, self.clock(), self._ids, begin=begin, known=self._known, prove=prove
        )
        try:
            try:
                result = tx.run(operation)
            except KeepAndRaise as ex:
                kept = ex.error
            except Exception:
                tx.prove_taken()
                raise
            try:
                tx.commit()
            except psycopg.OperationalError as ex:
                # Whether the server kept what this COMMIT sent is not known; a change
                # that leaves no ledger row is the same when sent again.
                if connection.broken and tx.first_entry is not None:
                    raise Unanswered(tx, connection.session, result, kept) from ex
                raise
        except BaseException:
            tx.forget()
            if not connection.broken and connection.info.transaction_status != IDLE:
                with suppress(psycopg.Error):
                    connection.execute("ROLLBACK")
            raise
        tx.remember()
        if kept is not None:
            raise kept
        return result


class Unanswered(Exception):
    """The COMMIT of `tx`, sent on the server session `session`, went unanswered."""

    def __init__(self, tx: PostgresTx, session: tuple[int, Any], result: Any, kept: Any) -> None:
        super().__init__("a COMMIT went unanswered")
        self.tx, self.session, self.result, self.kept = tx, session, result, kept


#: How long a session whose COMMIT went unanswered may take to end, in seconds.
SETTLE_SECONDS = 10.0


def ended(connection: psycopg.Connection[Any], session: tuple[int, Any]) -> None:
    """Wait until the transaction of a server session (its process id and start) is over:
    the session has ended or waits outside a transaction. A session that waits inside a
    transaction, as one whose COMMIT never arrived does, is ended; one that runs on, as
    one still committing does, is waited for."""
    deadline = time.monotonic() + SETTLE_SECONDS
    pid, started = session
    while True:
        row = connection.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
            (pid, started),
        ).fetchone()
        if row is None or row[0] == "idle":
            return
        if (row[0] or "").startswith("idle in transaction"):
            log.info("ending server session %s: its COMMIT did not arrive", pid)
            connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
        if time.monotonic() > deadline:
            raise DatabaseBusy(f"the server session {pid} did not end")
        time.sleep(0.02)


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

    def take(self, table: str, tx: PostgresTx) -> int:
        with self._lock:
            free = self._free.setdefault(table, [])
            if free:
                return free.pop()
        # No lock is held while the transaction waits for the database.
        rows = tx.execute(
            f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) "
            f"FROM generate_series(1, {ID_BLOCK})"
        )
        with self._lock:
            free += (row[0] for row in rows)
            free.sort(reverse=True)
            return free.pop()


class Statements:
    """Statements run one by one on an autocommit connection: the schema upgrade's."""

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(_placeholders(sql), bindings)
        return cursor.fetchall() if cursor.description is not None else []


class PostgresTx(SqlTx):
    """One transaction on a Postgres connection, in as few round trips as it can.

    Everything goes out as text batches, one round trip each: the driver costs
    more per statement than the server does. A read waits for its rows; BEGIN
    goes with the first one. A statement whose rows are not read (`change`)
    waits for the next read, or for the COMMIT. Each statement runs as one that
    the connection prepared once, so the server does not plan it again.

    In a write, reading a token locks it, and first the top token of its family:
    every transaction on a family takes that one lock first, so a parent and its
    children never wait for each other in opposite orders. A token whose state
    this control plane kept (`KnownStates`) is not read: its locks and the proof
    of the kept state go out with the next batch, ahead of anything else of this
    transaction's for it.
    """

    def __init__(
        self,
        connection: Connection,
        now: float,
        ids: Ids,
        *,
        begin: str,
        known: KnownStates | None = None,
        prove: bool = False,
    ) -> None:
        super().__init__(now)
        self.connection = connection
        self.ids = ids
        self.begin = begin
        self.writing = begin == _BEGIN_WRITE
        if self.writing:
            self.for_update = " FOR UPDATE"
        #: The token states this control plane committed last; with `prove`, a write starts
        #: from them, and proves them in the database with its first batch.
        self.known = known if self.writing else None
        self.prove = prove
        self._proving = False
        self._proven: set[str] = set()
        #: The live task of a token as this transaction leaves it (None: it has none).
        self._live_after: dict[str, tuple[Any, ...] | None] = {}
        #: Tokens changed in ways this transaction does not follow to the end.
        self._unsure: set[str] = set()
        self._begun = False
        #: The first ledger row of this transaction: token, number (None when the database
        #: numbers it), time, kind and data; it tells whether an unanswered COMMIT was kept.
        self.first_entry: tuple[str, int | None, str, str, str] | None = None
        self._changes: list[tuple[str, tuple[Any, ...]]] = []
        self._grant_reads: dict[tuple[str, str], tuple[dict[str, Any] | None, dict[str, Any]]] = {}

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.reads([(sql, bindings)])[0]

    def change(self, sql: str, bindings: tuple[Any, ...] = ()) -> None:
        self._changes.append((sql, bindings))

    def reads(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[list[tuple[Any, ...]]]:
        """Run statements that return rows, after the changes that wait, in one round trip."""
        return self._send(statements)

    def commit(self) -> None:
        """Send the changes that wait with the COMMIT; nothing when nothing ran."""
        if self._begun or self._changes:
            self._send([], "COMMIT")

    def _send(
        self, statements: list[tuple[str, tuple[Any, ...]]], closing: str | None = None
    ) -> list[list[tuple[Any, ...]]]:
        """Send BEGIN if not yet sent, the changes that wait, then `statements` and `closing`,
        as one text; answer the rows of each of `statements`.

        Each part of the text has one result, so a statement's result is found by
        its place.
        """
        text = [] if self._begun else [self.begin]
        places = []
        prepared = self.connection.prepared
        fresh: dict[str, str] = {}
        for index, (sql, bindings) in enumerate([*self._changes, *statements]):
            name = prepared.get(sql) or fresh.get(sql)
            if name is None:
                name = fresh[sql] = f"stateous_{next(self.connection.names)}"
                text.append(f"PREPARE {name} AS {_numbered(sql)}")
            if index >= len(self._changes):
                places.append(len(text))
            values = ", ".join(map(_literal, bindings))
            text.append(f"EXECUTE {name}({values})" if bindings else f"EXECUTE {name}")
        if closing is not None:
            text.append(closing)
        batch = "; ".join(text)
        if "\x00" in batch:
            raise ValueError("a text with a NUL character cannot be kept on Postgres")
        self._changes = []
        self._begun = True
        # The proofs that wait go out now: proven here, or the transaction ends here.
        proving, self._proving = self._proving, False
        try:
            results = self.connection.run(batch)
        except (errors.DivisionByZero, errors.InvalidTextRepresentation) as ex:
            if proving and (STALE in str(ex) or isinstance(ex, errors.DivisionByZero)):
                raise Stale from None
            raise
        prepared.update(fresh)
        return [self.connection.rows(results[place]) for place in places]

    def _lock(self, token: str, key: Any, then: str | None = None) -> tuple[Any, ...] | None:
        """Lock the family of the token that the SQL `token` names, then the token; keep
        its state; answer the first row of `then`.

        The statements cost one wait. The token's state is read by a statement
        that runs after the locks are taken, so it is current.
        """
        statements = [(_family_sql(token), (key, key)), (token_state_sql(token), (key,))]
        if then is not None:
            statements.append((then, (key,)))
        rows = self.reads(statements)
        if rows[1]:
            self.keep_state(rows[1][0])
        return rows[2][0] if then is not None and rows[2] else None

    def save_token(self, row: TokenRow) -> None:
        """Write a token's row; one inserted by a change not yet sent is inserted as it is
        now, so a new token entering its first state is written once, not twice."""
        for index, (sql, bindings) in enumerate(self._changes):
            if sql == INSERT_TOKEN and bindings[0] == row.token:
                values = self._rows[row.token] = self.token_values(row)
                self._changes[index] = (sql, (*values, self.stamp))
                return
        super().save_token(row)

    def token(self, token: str) -> TokenRow | None:
        if self.writing and token not in self._rows:
            state = self._kept(token)
            if state is None:
                self._lock("?", token)
            else:
                self._take(token, state)
            row = self._rows.get(token)
            return None if row is None else token_row(row)
        return super().token(token)

    def _kept(self, token: str) -> tuple[Any, ...] | None:
        """The state of a token not read yet in this transaction, as this control plane
        committed it last, if it may start from there."""
        if not self.prove or self.known is None or token in self._rows:
            return None
        return self.known.get(token)

    def _take(self, token: str, state: tuple[Any, ...]) -> None:
        """Start from a token's state as this control plane committed it. The family lock
        and the proof of the state wait for the next batch, ahead of any write, so the
        transaction goes no further if the state is not the database's."""
        self.change(_family_sql("?"), (token, token))
        self.change(_proof_sql(), (*(None if v is None else str(v) for v in state), token))
        self._proving = True
        self._proven.add(token)
        self.keep_state(state)

    def prove_taken(self) -> None:
        """Before a refusal that writes nothing is answered: prove the kept states it was
        decided on, which otherwise would go out with the COMMIT (raises `Stale`)."""
        if self._proving:
            proofs = (_family_sql("?"), _proof_sql())
            self._changes = [change for change in self._changes if change[0] in proofs]
            self._send([])

    def remember(self) -> None:
        """After the COMMIT: keep the state of each token that this transaction knows whole,
        as it left it; forget the others it read or changed."""
        if self.known is None:
            return
        whole = {}
        for token, row in self._rows.items():
            if token in self._unsure or token not in self._next_seq or token not in self._timers:
                continue
            live = self._live_after.get(token, self._live.get(token, _UNKNOWN))
            if live is _UNKNOWN:
                continue
            last = self._next_seq[token] - 1 or None
            whole[token] = (*row, last, self._timers[token], *(live or _NO_TASK))
        self.known.drop((set(self._rows) | self._unsure) - set(whole))
        for token, state in whole.items():
            self.known.put(token, state)

    def forget(self) -> None:
        """After a transaction that did not commit: forget the states it read or took."""
        if self.known is not None:
            self.known.drop(set(self._rows) | self._proven | self._unsure)

    def insert_task(self, token: str, state: str, visit: int) -> int:
        ident = super().insert_task(token, state, visit)
        self._live_after[token] = (ident, token, state, visit, "queued", 0, None, None, self.stamp)
        return ident

    def save_task(self, row: TaskRow) -> None:
        before = self._live_after.get(row.token, self._live.get(row.token, _UNKNOWN))
        values = self.task_values(row)
        self.update_task(values)
        if row.status in LIVE_TASK:
            self._live_after[row.token] = values
        elif before is not _UNKNOWN and before is not None and before[0] == row.id:
            self._live_after[row.token] = None
        else:
            self._unsure.add(row.token)

    def cancel_timers(self, token: str, kind: str | None = None) -> None:
        super().cancel_timers(token, kind)
        if kind is not None:
            self._unsure.add(token)

    def set_timer_status(self, timer: int, status: str) -> None:
        super().set_timer_status(timer, status)
        self._unsure.update(self._rows)

    def task(self, task: int) -> TaskRow | None:
        if not self.writing:
            return super().task(task)
        token = self.known.token_of(task) if self.prove and self.known is not None else None
        state = self._kept(token) if token is not None else None
        if state is not None and state[STATE_TASK] == task:
            self._take(token, state)  # type: ignore[arg-type]
            return task_row(state[STATE_TASK:])
        row = self._lock("(SELECT token FROM tasks WHERE id = ?)", task, TASK_BY_ID)
        return None if row is None else task_row(row)

    def timer(self, timer: int) -> TimerRow | None:
        if not self.writing:
            return super().timer(timer)
        row = self._lock("(SELECT token FROM timers WHERE id = ?)", timer, TIMER_BY_ID)
        return None if row is None else timer_row(row)

    def next_queued(self, states: list[str]) -> TaskRow | None:
        """The oldest queued task of these states whose active token no one else holds.

        The task and its token are both locked, skipping locked rows: a token that
        another transaction holds is passed over, and so is a task that another
        claim took after this statement began (its row is read again once locked,
        no longer queued). The same statement reads what the grant shows: while
        the task stays queued, its token has not moved and no routine writes the
        memory of its state, so those reads are current too.
        """
        row = self.one(_claim_sql(len(states)), tuple(states))
        if row is None:
            return None
        token, state, accepted, memory, last, timers = row[-6:]
        self._grant_reads[(token, state)] = (
            None if accepted is None else _decode(accepted),
            {} if memory is None else _decode(memory),
        )
        # A number read before the lock and old by now makes the claim's ledger row clash
        # with another, so the claim runs again; an old count fails the next proof.
        self._next_seq.setdefault(token, (last or 0) + 1)
        self._timers.setdefault(token, timers)
        return self.queued(row[:-6])

    def grant_reads(self, token: str, state: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        known = self._grant_reads.pop((token, state), None)
        return known if known is not None else super().grant_reads(token, state)

    def insert_row(self, table: str, columns: str, values: tuple[Any, ...]) -> int:
        ident = self.ids.take(table, self)
        marks = ", ".join("?" for _ in values)
        self.change(f"INSERT INTO {table} (id, {columns}) VALUES (?, {marks})", (ident, *values))
        return ident

    def record(self, token: str, kind: str, data: dict[str, Any], key: str | None = None) -> None:
        numbered = token in self._next_seq
        super().record(token, kind, data, key)
        if self.first_entry is None:
            # The row as `record` left it: waiting in the ledger batch with its number, or
            # in an INSERT that the database numbers. Its data is not encoded again.
            if numbered:
                _, seq, at, _, _, text = self._ledger[-1]
                self.first_entry = (token, seq, at, kind, text)
            else:
                bindings = self._changes[-1][1]
                self.first_entry = (token, None, bindings[1], kind, bindings[4])

    def last_arrival(self) -> int:
        """The last arrival number; held events are numbered one transaction at a time."""
        self.execute(f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, {ARRIVALS})")
        return super().last_arrival()


class AdvisoryLock:
    """The serving lock on Postgres: an advisory lock on a connection of its own.

    It ends with its connection, so a new control plane can start at once after
    the holder's process dies. Its key is the schema's, so two schemas of one
    database can each have a control plane.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: psycopg.Connection[Any] | None = None

    def take(self) -> None:
        connection = connect(self.url)
        schema, taken = connection.execute(
            "SELECT current_schema(), "
            f"pg_try_advisory_lock({LOCK_CLASS}, hashtext(current_schema()))"
        ).fetchone() or (None, None)
        if not taken:
            connection.close()
        if schema is None:
            raise SchemaError(
                "no schema named by the connection's search_path exists; create one or name another"
            )
        if not taken:
            raise HoldRefused("another control plane serves this database; stop it first")
        self._connection = connection

    def check(self) -> None:
        """Raise `HoldLost` when the connection that holds the lock is gone."""
        if self._connection is None:
            return
        try:
            self._connection.execute("SELECT 1")
        except psycopg.Error as ex:
            cause = "the connection that held the database was lost"
            raise HoldLost(f"{cause} ({_first_line(ex)})", cause) from None

    def release(self) -> None:
        if self._connection is not None:
            with suppress(psycopg.Error):
                self._connection.close()
            self._connection = None
