"""The Postgres store, through psycopg 3: many transactions at once, one token at a time.

Each write runs in its own transaction on a pooled connection, and locks the
rows of the tokens it reads (`FOR UPDATE`), so that each token moves one step at
a time while other tokens move beside it; a claim skips tasks whose token another
transaction holds. A transaction is sent in libpq's pipeline mode
(`pipeline.py`): statements whose rows are not read go out without waiting, a
read waits for its rows, and the COMMIT for everything; every value is a bound
parameter, and every statement is prepared once per connection. A conflict with another transaction
runs the operation once more; a limit that stops a request answers
`database_busy`. This module keeps rows and takes locks; it decides nothing.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext, suppress
from functools import cache
from typing import Any

import msgspec
import psycopg
from psycopg import errors

from stateous.control.errors import DatabaseBusy
from stateous.control.histogram import WriterTimes
from stateous.control.store.columns import (
    GRANTED,
    KEY_USED,
    LAST_CLAIM,
    LAST_POSITION,
    TASK_BY_ID,
    TASK_COLUMNS,
    TIMER_BY_ID,
    TOKEN_COLUMNS,
    QueueBy,
    Queues,
    counts_columns,
    granted_of,
    json_text,
    qualified,
    queue_head,
    task_row,
    time_or_none,
    timer_row,
    token_row,
    token_state_sql,
)
from stateous.control.store.contract import KeepAndRaise, Result, Tx
from stateous.control.store.counts import BUMP, TOTAL, Counter, Shards
from stateous.control.store.counts import COLUMNS as COUNT_COLUMNS
from stateous.control.store.locks import Lock
from stateous.control.store.migrations import migrate, upgrade_failed
from stateous.control.store.positions import Positions, Reservation
from stateous.control.store.postgres.connection import (
    LOCK_MILLISECONDS,
    STATEMENT_MILLISECONDS,
    Connection,
    SessionLost,
    Statements,
    Unreachable,
    first_line,
)
from stateous.control.store.postgres.ids import Ids
from stateous.control.store.postgres.lock import LOCK_CLASS
from stateous.control.store.postgres.pipeline import Pipeline
from stateous.control.store.postgres.sessions import Sessions
from stateous.control.store.postgres.settle import FirstRow, Unanswered, settle
from stateous.control.store.rows import ClaimReads, GrantReads, TaskRow, TimerRow, TokenRow
from stateous.control.store.sql import SqlTx
from stateous.control.store.turn import COMMITTED, Turn
from stateous.model.vocabulary import Kind, TaskStatus, TokenStatus

log = logging.getLogger("stateous.control.store")
_decode = msgspec.json.decode

#: The second key of the advisory lock that numbers deferred events.
ARRIVALS = 1
#: The pause before a conflicting transaction runs once more, in seconds (random in between).
RETRY_PAUSE = (0.02, 0.08)
#: Conflicts with another transaction: the operation runs again once.
CONFLICTS = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation)
BEGIN_WRITE = "BEGIN"
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


@cache
def _numbered(sql: str) -> str:
    """Turn the shared SQL's `?` placeholders into the `$1`, `$2`... of a prepared statement."""
    pieces = sql.split("?")
    return "".join(
        f"{piece}${index}" if index < len(pieces) else piece
        for index, piece in enumerate(pieces, 1)
    )


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


#: The states that a claim lists, as a table `s` of one column `value`, from a JSON list.
_LISTED = "json_array_elements_text(?::json) s(value)"


#: The JSON list of the claim's labels in the condition on preferred tasks.
_PREFER = "json_array_elements_text(?::json)"


def _heads(count: str, by: QueueBy, prefer: str) -> str:
    """The first `count` queued tasks of each queue (state or contract: `by`) of a JSON list
    (`?`), all of them in turn: the candidates of a claim.

    Their tokens are not read here: with the token's status in the condition, the
    planner, which cannot tell how many tasks it passes over, may prefer to read and
    sort the state's whole queue. A candidate whose token is not active is passed
    over once locked, as one that another transaction holds.
    """
    return (
        f"SELECT h.id, h.turn_at FROM {_LISTED} CROSS JOIN LATERAL "
        f"({queue_head('queued.id, queued.turn_at', count, active=False, by=by, prefer=prefer)}) h "
        "ORDER BY h.turn_at, h.id"
    )


@cache
def _claim_sql(count: str, by: QueueBy, prefer: str) -> str:
    """The claim among the first `count` tasks of each queue: the first candidate whose task
    and token no other transaction holds, both locked, and still queued and active once
    locked, then what the grant shows besides the token (the data of the event that
    brought the token into its state, and the memory of the state), then the token's last
    ledger number and number of pending timers, so that the claim knows the token's
    whole state.

    The candidates are tried one by one in their order, each task and token read
    by its key alone (so that no other index can look as cheap to the planner), and
    the first one that fits ends the statement. A candidate that another claim took
    since the heads were read stays locked to the end of this transaction, unused.
    The grant's reads run outside the locking query, so once, for the row it locked.
    """
    locked = (
        f"SELECT c.* FROM ({_heads(count, by, prefer)}) h CROSS JOIN LATERAL ("
        f"SELECT {qualified(TASK_COLUMNS, 't')}, {qualified(TOKEN_COLUMNS, 'k')}, "
        "t.status AS task_status, k.status AS token_status, t.token AS of_token, "
        "k.state AS of_state FROM tasks t JOIN tokens k ON k.token = t.token "
        "WHERE t.id = h.id LIMIT 1 FOR UPDATE OF t, k SKIP LOCKED) c "
        f"WHERE c.task_status = '{TaskStatus.QUEUED}' "
        f"AND c.token_status = '{TokenStatus.ACTIVE}' ORDER BY h.turn_at, h.id LIMIT 1"
    )
    return (
        "SELECT q.*, (SELECT data FROM ledger WHERE ledger.token = q.of_token "
        f"AND kind = '{Kind.EVENT_ACCEPTED}' ORDER BY seq DESC LIMIT 1), "
        "(SELECT json_object_agg(key, value ORDER BY key) FROM memory "
        "WHERE memory.token = q.of_token AND memory.state = q.of_state), "
        f"{', '.join(counts_columns('q.of_token'))} FROM ({locked}) q"
    )


#: How many queued tasks a claim's first look takes in all (at least each state's head):
#: as many as there are claims racing for one queue when eight supervisors serve the same
#: state, so that each finds a free task in one statement instead of two to four more.
FIRST_LOOK = 8


@cache
def _deeper_sql(by: QueueBy, prefer: str) -> str:
    """Whether some queue of the list has at least `?` queued tasks: then a deeper look may
    find one that is free."""
    return (
        f"SELECT EXISTS (SELECT 1 FROM {_LISTED} "
        f"WHERE (SELECT count(*) FROM "
        f"({queue_head('1', '?', active=False, by=by, prefer=prefer)}) h) >= ?)"
    )


#: How a row of `_claim_sql` ends: the statuses of the task and the token, the two columns that
#: name the token and its state, the grant's two reads, and the token's two counts.
_CLAIM_TAIL = 8


class PostgresStore:
    """A control plane's database on a Postgres server."""

    database = "postgres"
    one_writer = False

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        size: int = 10,
        lock_timeout: int = LOCK_MILLISECONDS,
        statement_timeout: int = STATEMENT_MILLISECONDS,
        lock: Lock | None = None,
    ) -> None:
        self.clock = clock
        self._fenced: Exception | None = None
        self._ids = Ids()
        self._shards = Shards()
        self.writer = WriterTimes()
        limits = {"lock_timeout": lock_timeout, "statement_timeout": statement_timeout}
        self._sessions = Sessions(url, limits, size, lock, self._ids, self.fence)
        self._pool = self._sessions.pool
        try:
            with self._pool.connection() as connection:
                self._migrate(connection)
                last = connection.execute(LAST_POSITION).fetchone()
        except BaseException:
            self._pool.close()
            raise
        self.positions = Positions(int(last[0]) if last else 0)

    def _migrate(self, connection: Connection) -> None:
        """Make or upgrade the tables: the lock limit holds, the statement limit does not."""
        connection.execute("SET statement_timeout = 0")
        try:
            migrate(Statements(connection), dialect="postgres")
        except psycopg.Error as ex:
            raise upgrade_failed(first_line(ex)) from None
        finally:
            connection.execute("RESET statement_timeout")

    def write(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` in one transaction that locks the tokens it reads; once more when
        it met another transaction."""
        try:
            return self._attempt(operation, BEGIN_WRITE, CONFLICTS)
        except CONFLICTS as ex:
            log.info("a transaction met another (%s); it runs once more", first_line(ex))
        # Row locks are not queued fairly: let the other transaction finish first.
        time.sleep(random.uniform(*RETRY_PAUSE))
        try:
            return self._attempt(operation, BEGIN_WRITE, CONFLICTS)
        except CONFLICTS as ex:
            raise DatabaseBusy(
                f"the change met another transaction twice ({first_line(ex)}); try again"
            ) from None

    def read(self, operation: Callable[[Tx], Result]) -> Result:
        """Run `operation` on one snapshot; it locks nothing."""
        return self._attempt(operation, BEGIN_READ, ())

    def horizon(self) -> int:
        return self.positions.horizon()

    def turn(self) -> AbstractContextManager[Turn]:
        """Open nothing: each write commits on its own, before it returns."""
        return nullcontext(COMMITTED)

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
    ) -> Result:
        if self._fenced is not None:
            raise self._fenced
        # A write's positions stay reserved until its outcome is known, settled or not.
        reservation = self.positions.reserve() if begin == BEGIN_WRITE else None
        try:
            try:
                return self._on_a_session(operation, begin, reservation)
            except SessionLost:
                # Nothing was kept: once more, on a session of the primary of now.
                return self._on_a_session(operation, begin, reservation)
        except conflicts:
            raise
        except Unanswered as lost:
            self._sessions.lost = True
            self._pool.flush()
            return settle(self._pool, lost)  # type: ignore[no-any-return]
        except (psycopg.OperationalError, Unreachable, SessionLost) as ex:
            raise DatabaseBusy(f"the database is busy ({first_line(ex)}); try again") from None
        finally:
            if reservation is not None:
                reservation.release()

    def _on_a_session(
        self, operation: Callable[[Tx], Result], begin: str, reservation: Reservation | None
    ) -> Result:
        """Run the transaction on a pooled session; one that breaks marks them all lost."""
        if self._sessions.lost:
            self._sessions.reconnect()
        try:
            with self._pool.connection() as connection:
                return self._transaction(connection, operation, begin, reservation)
        except SessionLost:
            self._sessions.lost = True
            raise

    def _transaction(
        self,
        connection: Connection,
        operation: Callable[[Tx], Result],
        begin: str,
        reservation: Reservation | None,
    ) -> Result:
        """Run one transaction in a pipeline and commit it; roll it back on any error."""
        kept: Exception | None = None
        result: Result | None = None
        committing = False
        pipeline = Pipeline(connection)
        tx = PostgresTx(pipeline, self.clock(), self._ids, reservation)
        if tx.writing:
            tx.counts.shard = self._shards.take()
        try:
            pipeline.send(begin, ())
            try:
                result = tx.run(operation)
            except KeepAndRaise as ex:
                kept = ex.error
            committing = True
            started = time.perf_counter()
            connection.end_transaction(pipeline)
            if tx.writing:
                self.writer.committed(time.perf_counter() - started, 1)
        except psycopg.OperationalError as ex:
            # Whether the server kept what this COMMIT sent is not known (`settle` asks).
            if committing and connection.broken and tx.writing:
                raise Unanswered(tx.first.entry, connection.session, result, kept) from ex
            if connection.broken and not committing:
                raise SessionLost(first_line(ex)) from ex
            self._roll_back(pipeline)
            raise
        except BaseException:
            self._roll_back(pipeline)
            raise
        finally:
            if tx.writing:
                self._shards.give(tx.counts.shard)
            pipeline.close()
        if kept is not None:
            raise kept
        return result  # type: ignore[return-value]  # the operation ran whole: it set result

    @staticmethod
    def _roll_back(pipeline: Pipeline) -> None:
        """End a transaction that failed: roll it back, after whatever it sent last."""
        if not pipeline.connection.broken:
            with suppress(psycopg.Error):
                pipeline.send("ROLLBACK", ())
                pipeline.sync()


class PostgresTx(SqlTx):
    """One transaction on a connection in pipeline mode: what Postgres does its own way.

    In a write, reading a token locks it, and first the top token of its family:
    every transaction on a family takes that one lock first, so a parent and its
    children never wait for each other in opposite orders.
    """

    listed = _LISTED
    greatest = "greatest"

    def __init__(
        self, pipeline: Pipeline, now: float, ids: Ids, reservation: Reservation | None
    ) -> None:
        super().__init__(now, reservation)
        self.pipeline = pipeline
        self.connection = pipeline.connection
        self.ids = ids
        #: A write reserves positions for its ledger rows; a read has no reservation.
        self.writing = reservation is not None
        if self.writing:
            self.for_update = " FOR UPDATE"
        #: The first ledger row of this transaction: it tells whether an unanswered COMMIT
        #: was kept.
        self.first = FirstRow(self.stamp)
        self.watchers.append(self.first)
        #: What a claim read for its grant, by token and state.
        self._grant_reads: dict[tuple[str, str], GrantReads] = {}
        #: The rows of statements sent ahead (`ahead`), once their round trip came back.
        self._early: list[list[tuple[Any, ...]]] = []
        self._ahead = 0
        #: Whether idempotency keys were used, as read with their tokens (`token_and_key`).
        self._keys: dict[tuple[str, str], bool] = {}

    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.reads([(sql, bindings)])[0]

    def ahead(self, sql: str, bindings: tuple[Any, ...]) -> None:
        """Send a statement whose rows are read later (`early`): they come back with the
        next read's, in the same round trip."""
        self.pipeline.send(_numbered(sql), bindings, rows=True)
        self._ahead += 1

    def early(self) -> list[tuple[Any, ...]]:
        """The rows of the oldest statement sent `ahead`, waited for now if no read came
        back since."""
        if self._ahead:
            self.reads([])
        return self._early.pop(0)

    def change(self, sql: str, bindings: tuple[Any, ...] = ()) -> None:
        """Send a statement whose rows are not read; its errors come with the next answer."""
        self.pipeline.send(_numbered(sql), bindings)

    def reads(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[list[tuple[Any, ...]]]:
        """Send statements that return rows, then wait for all their rows, in one round trip."""
        for sql, bindings in statements:
            self.pipeline.send(_numbered(sql), bindings, rows=True)
        answers = self.pipeline.sync()
        ahead, self._ahead = self._ahead, 0
        self._early += answers[:ahead]
        return answers[ahead:]

    def _lock(
        self, token: str, key: Any, then: str | None = None, values: tuple[Any, ...] = ()
    ) -> tuple[Any, ...] | None:
        """Lock the family of the token that the SQL `token` names, then the token; keep
        its state; answer the first row of `then` (its values: `values`, else `key`).

        The statements cost one wait. The token's state, and what `then` reads, are
        read by statements that run after the locks are taken, so they are current.
        """
        statements = [(_family_sql(token), (key, key)), (token_state_sql(token), (key,))]
        if then is not None:
            statements.append((then, values or (key,)))
        rows = self.reads(statements)
        if rows[1]:
            self.keep_state(rows[1][0])
        return rows[2][0] if then is not None and rows[2] else None

    def token(self, token: str) -> TokenRow | None:
        if not self.writing:
            return super().token(token)
        if token not in self._rows:
            self._lock("?", token)
        row = self._rows.get(token)
        return None if row is None else token_row(row)

    def token_and_key(self, token: str, key: str | None) -> TokenRow | None:
        """Lock the token and read whether `key` was used on it, in one round trip."""
        if not self.writing or key is None or token in self._rows:
            return self.token(token)
        self.finish()
        self._keys[(token, key)] = self._lock("?", token, KEY_USED, (token, key)) is not None
        row = self._rows.get(token)
        return None if row is None else token_row(row)

    def key_used(self, token: str, key: str) -> bool:
        known = self._keys.pop((token, key), None)
        return super().key_used(token, key) if known is None else known

    def task(self, task: int) -> TaskRow | None:
        if not self.writing:
            return super().task(task)
        row = self._lock("(SELECT token FROM tasks WHERE id = ?)", task, TASK_BY_ID)
        return None if row is None else task_row(row)

    def timer(self, timer: int) -> TimerRow | None:
        if not self.writing:
            return super().timer(timer)
        row = self._lock("(SELECT token FROM timers WHERE id = ?)", timer, TIMER_BY_ID)
        return None if row is None else timer_row(row)

    def next_queued(self, queues: Queues) -> TaskRow | None:
        """The oldest queued task of these queues whose active token no one else holds.

        The claim looks at the first tasks of each queue (of a state, or of a contract:
        `queues.by`; `FIRST_LOOK` in all, at least the head of each), oldest first, and
        locks the first whose task and token are free (`SKIP LOCKED`) and whose token
        is active: a token that another
        transaction holds is passed over, and so is a task that another claim took
        after this statement began (its row is read again once locked, no longer
        queued). When every one is held, gone or of a token not active, it looks
        again at twice as many tasks of each queue, until it locks one or no queue
        has as many queued tasks as it looked at. The same statement reads what the
        grant shows: while the task stays queued, its token has not moved and no
        routine writes the memory of its state, so those reads are current too.
        """
        listed, by, prefer = json_text(queues.keys), queues.by, self.preferring(queues)
        depth = max(1, FIRST_LOOK // len(queues.keys))
        row = self._claim_among(listed, depth, by, prefer)
        deeper = _deeper_sql(by, _PREFER if prefer else "")
        while row is None and self.one(deeper, (listed, *prefer, depth, depth)) == (True,):
            depth *= 2
            row = self._claim_among(listed, depth, by, prefer)
        if row is None:
            return None
        _, _, token, state, accepted, memory, last, timers = row[-_CLAIM_TAIL:]
        self._grant_reads[(token, state)] = GrantReads(
            None if accepted is None else _decode(accepted),
            {} if memory is None else _decode(memory),
        )
        # A number read before the lock and old by now makes the claim's ledger row clash
        # with another, so the claim runs again.
        self._next_seq.setdefault(token, (last or 0) + 1)
        self._timers.setdefault(token, timers)
        return self.queued(row[:-_CLAIM_TAIL])

    def claim_reads(self, supervisor: str, request: str | None, queues: Queues) -> ClaimReads:
        """The claim row, the grant of the request id and the claim, in one round trip: a
        claim sent again after a lost answer (rare) leaves the task it locked here queued,
        locked until the commit."""
        self.ahead(LAST_CLAIM, (supervisor,))
        if request is not None:
            self.ahead(GRANTED, (supervisor, request))
        task = self.next_queued(queues) if queues.keys else None
        last = self.early()
        granted = granted_of(self.early() if request is not None else [])
        return ClaimReads(time_or_none(last[0][0]) if last else None, granted, task)

    def _claim_among(
        self, listed: str, depth: int, by: QueueBy, prefer: tuple[Any, ...]
    ) -> tuple[Any, ...] | None:
        """The claim among the first `depth` tasks of each queue of `listed`: the heads
        alone by the statement whose plan is made for one row a queue (one statement for
        any number of queues, its plan the same for every claim); `prefer`, the bindings
        of the condition on preferred tasks, if the claim has it."""
        condition = _PREFER if prefer else ""
        if depth == 1:
            return self.one(_claim_sql("1", by, condition), (listed, *prefer))
        return self.one(_claim_sql("?", by, condition), (listed, *prefer, depth))

    def grant_reads(self, token: str, state: str) -> GrantReads:
        known = self._grant_reads.pop((token, state), None)
        if known is None or self.accepted_here(token) is not None:
            # The claim's statement read the ledger before this transaction's own rows of
            # the token (a write that queued the task and hands it to a waiting claim).
            return super().grant_reads(token, state)
        return known

    def cancel_pending(self, statement: str, bindings: tuple[Any, ...]) -> None:
        """Cancel pending timers and count how many went, in one statement sent without
        waiting: the UPDATE's rows are counted into `counts` by the database itself."""
        self.change(
            f"WITH gone AS ({statement} RETURNING 1) INSERT INTO counts ({COUNT_COLUMNS}) "
            f"SELECT '{Counter.TIMERS_PENDING.value}', '', {TOTAL}, CAST(? AS INTEGER), "
            f"{TOTAL}, -count(*) FROM gone HAVING count(*) > 0 {BUMP}",
            (*bindings, self.counts.shard),
        )

    def insert_row(self, table: str, columns: str, values: tuple[Any, ...]) -> int:
        ident = self.ids.take(table, self)
        marks = ", ".join("?" for _ in values)
        self.change(f"INSERT INTO {table} (id, {columns}) VALUES (?, {marks})", (ident, *values))
        return ident

    def last_arrival(self) -> int:
        """The last arrival number; deferred events are numbered one transaction at a time."""
        self.execute("SELECT pg_advisory_xact_lock(?, ?)", (LOCK_CLASS, ARRIVALS))
        return super().last_arrival()
