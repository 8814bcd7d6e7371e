"""The SQL that both stores run: every `Tx` verb, written once for SQLite and Postgres.

The statements use only what both databases understand (`?` placeholders, `->>`
on JSON, `RETURNING`, `ON CONFLICT`, `rowid` for the order of insertion), so each
store only adds how a statement reaches its connection, and, on Postgres, the row
locks that let many transactions run at once. Nothing here decides what happens
to a token: the engine does.
"""

from __future__ import annotations

from abc import abstractmethod
from collections import Counter
from collections.abc import Callable
from itertools import chain
from typing import Any

from stateous.control.store.budget_sql import BudgetSql
from stateous.control.store.columns import (
    CLAIM_AND_GRANTED,
    DUE_TIMERS,
    ENTRY_COLUMNS,
    GRANT_MEMORY,
    INSERT_TOKEN,
    KEY_USED,
    LAST_ACCEPTED,
    LAST_POSITION,
    LEDGER_BATCH,
    PENDING_DUE,
    PLANNED_RETRY,
    STATE_LAST,
    STATE_TASK,
    STATE_TIMERS,
    TASK_BY_ID,
    TASK_COLUMNS,
    TIMER_BY_ID,
    TOKEN_COLUMNS,
    UPDATE_TOKEN,
    Queues,
    any_queued_sql,
    any_word,
    decode,
    entry_row,
    insert_rows,
    json_text,
    next_queued_sql,
    task_row,
    time_or_none,
    timer_row,
    token_row,
    token_state_sql,
    word,
)
from stateous.control.store.contract import KeepAndRaise, Result
from stateous.control.store.counts import Counts, CountSql
from stateous.control.store.credential_sql import CredentialSql
from stateous.control.store.fleet_sql import FleetSql
from stateous.control.store.graphs_sql import GraphsSql
from stateous.control.store.lease_sql import LeaseSql
from stateous.control.store.listing_sql import ListingSql
from stateous.control.store.memory_sql import MemorySql
from stateous.control.store.parking_sql import ParkingSql
from stateous.control.store.plan_sql import PlanSql
from stateous.control.store.positions import Reservation
from stateous.control.store.queued import Queued
from stateous.control.store.resource_sql import ResourceSql
from stateous.control.store.retention_sql import RetentionSql
from stateous.control.store.rows import (
    ClaimReads,
    Entry,
    GrantReads,
    TaskRow,
    TimerRow,
    TokenRow,
    from_column,
    to_column,
)
from stateous.control.store.schedule_sql import ScheduleSql
from stateous.control.store.tenure_sql import TenureSql
from stateous.control.store.turn_sql import TaskTurn, TurnSql
from stateous.control.store.watchers import Watcher
from stateous.model.vocabulary import LIVE_TASK, Kind, TaskStatus, TimerStatus


class SqlTx(
    ListingSql,
    PlanSql,
    CredentialSql,
    GraphsSql,
    RetentionSql,
    ScheduleSql,
    LeaseSql,
    MemorySql,
    ResourceSql,
    BudgetSql,
    ParkingSql,
    TenureSql,
    FleetSql,
    TurnSql,
    CountSql,
):
    """One transaction: the verbs of `Tx` over `execute`, which each store provides.

    The verbs that move tokens are here; those of each other concern are in a class
    of statements of their own, and none overrides another. What a change keeps
    beside its rows is kept by the watchers it holds (`watchers.py`): its counts
    (`counts.py`) and the queues it queued a task in (`queued.py`); each verb that writes
    a ledger row, a token, a task or a timer tells them once, and `run` lets them
    write what they keep as the operation ends.

    A transaction reads each token's row once: the row, the token's last ledger
    number, its count of pending timers and its live task are kept from that read
    and from this transaction's own writes, so a move asks the database little.
    Ledger rows of tokens whose last number is known wait in `_ledger` and go out
    in one INSERT: before any read of the ledger, and at `finish`, which the store
    calls before it commits. A token started waits for its first move's save: one INSERT.
    """

    def __init__(self, now: float, reservation: Reservation | None = None) -> None:
        self.now = now
        #: Where the ledger rows of a write take their positions (`positions.py`).
        self.reservation = reservation
        self.stamp = to_column(now)
        #: The credential that asked for this change; the first ledger row names it.
        self.by: str | None = None
        #: The plan this change applies, if any; the first ledger row names it too.
        self.plan_id: str | None = None
        self._signed = False
        #: Token rows as read or written in this transaction, by token.
        self._rows: dict[str, tuple[Any, ...]] = {}
        #: The live task of a token (None: it has none), while known.
        self._live: dict[str, tuple[Any, ...] | None] = {}
        #: The number of the next ledger row of a token, when known.
        self._next_seq: dict[str, int] = {}
        #: How many pending timers a token has, when known.
        self._timers: dict[str, int] = {}
        self._ledger: list[tuple[Any, ...]] = []
        #: The tokens started here, not written yet: their first save (or `finish`) inserts.
        self._unwritten: dict[str, None] = {}
        self.counts = Counts(now)
        self._queued = Queued()
        #: What keeps something beside the rows that this transaction writes.
        self.watchers: list[Watcher] = [self.counts, self._queued]

    @property
    def queued_in(self) -> Counter[str] | None:
        """How many tasks this change queued in each state and in each contract (`queued.py`)."""
        return self._queued.queued_in

    def let_in(self) -> None:
        """A task that waited for a resource is in its queue now: wake every waiting claim
        once this change commits (`queued.py`)."""
        self._queued.queued_in = None

    def count(self, name: str, label: str = "", added: int = 1) -> None:
        """Count `added` more `name` (with `label`) when this change is kept (`counts.py`)."""
        self.counts.count(name, label, added)

    def run(self, operation: Callable[[Any], Result]) -> Result:
        """Run an engine operation, then write what it left waiting and what its watchers
        keep (also when it keeps a refusal to raise after the commit)."""
        try:
            result = operation(self)
        except KeepAndRaise as ex:
            self.ended(ex.error)
            raise
        self.ended(None)
        return result

    def ended(self, refused: Exception | None) -> None:
        """The operation ended with `refused` to raise after the commit (or none): write
        the ledger rows that wait, then what each watcher keeps."""
        self.finish()
        for watcher in self.watchers:
            watcher.finished(self, refused)

    def finish(self) -> None:
        """Write the tokens and the ledger rows that wait."""
        for token in self._unwritten:
            self.change(INSERT_TOKEN, (*self._rows[token], self.stamp))
        self._unwritten.clear()
        while self._ledger:
            batch, self._ledger = self._ledger[:LEDGER_BATCH], self._ledger[LEDGER_BATCH:]
            self.change(
                insert_rows(f"INSERT INTO ledger ({ENTRY_COLUMNS}, pos)", 7, len(batch)),
                tuple(chain.from_iterable(batch)),
            )

    def keep(self, row: tuple[Any, ...]) -> TokenRow:
        """Remember a token row read in this transaction and answer it."""
        self._rows[row[0]] = row
        return token_row(row)

    def keep_state(self, row: tuple[Any, ...]) -> None:
        """Remember a row of `token_state_sql` (its token's row is made when asked for)."""
        token = row[0]
        self._next_seq.setdefault(token, (row[STATE_LAST] or 0) + 1)
        self._timers.setdefault(token, row[STATE_TIMERS])
        self._live[token] = None if row[STATE_TASK] is None else row[STATE_TASK:]
        self._rows[token] = row[:STATE_LAST]

    # tokens

    def token(self, token: str) -> TokenRow | None:
        row = self._rows.get(token)
        if row is not None:
            return token_row(row)
        found = self.one(token_state_sql("?") + self.for_update, (token,))
        if found is not None:
            self.keep_state(found)
        return None if found is None else token_row(found)

    def token_any_case(self, token: str) -> TokenRow | None:
        row = self.one(
            f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE lower(token) = lower(?){self.for_update}",
            (token,),
        )
        return None if row is None else self.keep(row)

    def token_values(self, row: TokenRow) -> tuple[Any, ...]:
        return (
            row.token,
            row.state,
            row.status,
            row.visit,
            json_text(row.context),
            self.column_time(row.entered_at),
            row.parent,
            row.workflow,
            json_text(row.visits),
            None if row.result is None else json_text(row.result),
            row.checksum,
            row.priority,
        )

    def insert_token(self, row: TokenRow) -> None:
        values = self.token_values(row)
        self._rows[row.token] = values
        for watcher in self.watchers:
            watcher.token_written(None, values)
        self._live[row.token] = None
        self._next_seq[row.token] = 1
        self._timers[row.token] = 0
        self._unwritten[row.token] = None

    def save_token(self, row: TokenRow) -> None:
        before = self._rows.get(row.token)
        if before is None:  # every write reads a token before it saves it; this is a safety net
            before = self.one(f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token = ?", (row.token,))
        values = self.token_values(row)
        self._rows[row.token] = values
        for watcher in self.watchers:
            watcher.token_written(before, values)
        if row.token in self._unwritten:
            del self._unwritten[row.token]
            self.change(INSERT_TOKEN, (*values, self.stamp))
        else:
            self.change(UPDATE_TOKEN, (*values[1:], self.stamp, row.token))

    def children(self, parent: str) -> list[TokenRow]:
        rows = self.execute(
            f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE parent = ? ORDER BY rowid{self.for_update}",
            (parent,),
        )
        return [self.keep(row) for row in rows]

    def family(self, row: TokenRow) -> list[TokenRow]:
        """The token and its descendants, parents first."""
        family = [row]
        for member in family:
            family.extend(self.children(member.token))
        return family

    # ledger

    def record(self, token: str, kind: str, data: dict[str, Any], key: str | None = None) -> None:
        """Add a ledger row, numbered after the token's last one.

        When this transaction knows the token's last number, the row waits for
        `finish`; otherwise the database numbers it in a statement of its own.
        """
        text = json_text(self.signed(data))
        assert self.reservation is not None, "a ledger row is written in a write transaction"
        pos = self.reservation.take()
        seq = self._next_seq.get(token)
        for watcher in self.watchers:
            watcher.recorded(token, seq, kind, text)
        if seq is not None:
            self._next_seq[token] = seq + 1
            self._ledger.append((token, seq, self.stamp, kind, key, text, pos))
            return
        self.change(
            f"INSERT INTO ledger ({ENTRY_COLUMNS}, pos) "
            "SELECT ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ?, ? FROM ledger WHERE token = ?",
            (token, self.stamp, kind, key, text, pos, token),
        )

    def signed(self, data: dict[str, Any]) -> dict[str, Any]:
        """The data of a ledger row, with `by` (who asked) and `plan` (the plan applied) on
        the first row of a change that names them."""
        if self._signed or not (self.by or self.plan_id):
            return data
        self._signed = True
        marks = {name: value for name, value in (("by", self.by), ("plan", self.plan_id)) if value}
        return {**data, **marks}

    def _entries(self, sql: str, bindings: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Read the ledger, with the rows of this transaction that wait written first."""
        self.finish()
        return self.execute(sql, bindings)

    def entries_since(
        self, after: int, upto: int, token: str | None, limit: int
    ) -> list[tuple[int, Entry]]:
        """The ledger rows whose position is past `after` and at most `upto` (of `token`
        only, when given), in the order of their positions, at most `limit`."""
        # A token's rows are in the order of their positions: read them by its key.
        of_token, order = ("", "pos") if token is None else ("token = ? AND ", "seq")
        rows = self.execute(
            f"SELECT pos, {ENTRY_COLUMNS} FROM ledger "
            f"WHERE {of_token}pos > ? AND pos <= ? ORDER BY {order} LIMIT ?",
            (*(() if token is None else (token,)), after, upto, limit),
        )
        return [(row[0], entry_row(row[1:])) for row in rows]

    def last_position(self) -> int:
        """The largest position that ever committed, kept or removed (0 for none)."""
        row = self.one(LAST_POSITION)
        return int(row[0]) if row else 0

    def key_used(self, token: str, key: str) -> bool:
        return bool(self._entries(KEY_USED, (token, key)))

    def token_and_key(self, token: str, key: str | None) -> TokenRow | None:
        """A token's row (`token`), where `key_used` is asked about `key` next: Postgres
        reads both in one round trip."""
        return self.token(token)

    def history(self, token: str) -> list[Entry]:
        rows = self._entries(
            f"SELECT {ENTRY_COLUMNS} FROM ledger WHERE token = ? ORDER BY seq", (token,)
        )
        return [entry_row(row) for row in rows]

    def event_counts(self, token: str) -> dict[str, int]:
        rows = self._entries(
            "SELECT data ->> 'event', count(*) FROM ledger "
            f"WHERE token = ? AND kind = {word(Kind.EVENT_ACCEPTED)} GROUP BY 1",
            (token,),
        )
        return {event: count for event, count in rows}

    def last_entry(self, token: str, kinds: tuple[str, ...]) -> Entry | None:
        marks = ", ".join("?" for _ in kinds)
        rows = self._entries(
            f"SELECT {ENTRY_COLUMNS} FROM ledger WHERE token = ? AND kind IN ({marks}) "
            "ORDER BY seq DESC LIMIT 1",
            (token, *kinds),
        )
        return entry_row(rows[0]) if rows else None

    def entries_after(self, token: str, seq: int, kind: str) -> list[Entry]:
        rows = self._entries(
            f"SELECT {ENTRY_COLUMNS} FROM ledger "
            "WHERE token = ? AND seq > ? AND kind = ? ORDER BY seq",
            (token, seq, kind),
        )
        return [entry_row(row) for row in rows]

    def last_arrival(self) -> int:
        rows = self._entries(
            "SELECT max(CAST(data ->> 'arrival' AS INTEGER)) FROM ledger "
            f"WHERE kind = {word(Kind.EVENT_DEFERRED)}",
            (),
        )
        return int(rows[0][0] or 0) if rows else 0

    # tasks

    @abstractmethod
    def insert_row(self, table: str, columns: str, values: tuple[Any, ...]) -> int:
        """Insert a row of a table whose rows have ids, and answer its id (each store
        knows the id its own way)."""

    def insert_task(
        self, token: str, state: str, visit: int, contract: str | None, turn: TaskTurn
    ) -> int:
        for watcher in self.watchers:
            watcher.task_queued(state, contract)
        task = self.insert_row(
            "tasks",
            "token, state, visit, status, attempt, queued_at, contract, turn_at",
            (token, state, visit, TaskStatus.QUEUED, 0, self.stamp, contract, turn.turn_at),
        )
        # The token's newest task is its live one: a report's `next` need not read it.
        self._live[token] = (
            task,
            token,
            state,
            visit,
            TaskStatus.QUEUED,
            0,
            None,
            None,
            self.stamp,
        )
        self.prefer(task, turn)
        return task

    def task(self, task: int) -> TaskRow | None:
        """A task, read with its token's state (kept): whoever reads a task by its id reads
        its token next. A task that is not its token's live one (it ended) is read alone."""
        row = self.one(token_state_sql("(SELECT token FROM tasks WHERE id = ?)"), (task,))
        if row is None:
            return None
        if row[0] not in self._rows:
            self.keep_state(row)
        if row[STATE_TASK] == task:
            return task_row(row[STATE_TASK:])
        return task_row(self.execute(TASK_BY_ID, (task,))[0])

    def task_values(self, row: TaskRow) -> tuple[Any, ...]:
        """A task's columns, as the database keeps them."""
        return (
            row.id,
            row.token,
            row.state,
            row.visit,
            row.status,
            row.attempt,
            row.claimed_by,
            None if row.lease_until is None else self.column_time(row.lease_until),
            self.column_time(row.queued_at),
        )

    def save_task(self, row: TaskRow) -> None:
        for watcher in self.watchers:
            watcher.task_saved(row)
        self.update_task(self.task_values(row))
        row.was = row.status

    def update_task(self, values: tuple[Any, ...]) -> None:
        """Write a task's row from its `task_values`."""
        self._live.pop(values[1], None)
        self.change(
            "UPDATE tasks SET status = ?, attempt = ?, claimed_by = ?, lease_until = ?, "
            "queued_at = ? WHERE id = ?",
            (*values[4:], values[0]),
        )

    def live_task(self, token: str) -> TaskRow | None:
        if token in self._live:
            known = self._live[token]
            return None if known is None else task_row(known)
        row = self.one(
            f"SELECT {TASK_COLUMNS} FROM tasks WHERE token = ? AND {any_word('status', LIVE_TASK)} "
            "ORDER BY id DESC LIMIT 1",
            (token,),
        )
        return None if row is None else task_row(row)

    def next_queued(self, queues: Queues) -> TaskRow | None:
        """The first queued task in turn of these queues (of states, or of contracts) whose
        token is active.

        One writer runs at a time on SQLite, so the first such task is free to take.
        The keys go as one JSON list, so the statement is the same for any number.
        """
        row = self.one(
            next_queued_sql(queues.by, queues.prefer is not None),
            (json_text(queues.keys), *self.preferring(queues)),
        )
        if row is None:
            return None
        self.keep_state(row)
        return task_row(row[STATE_TASK:])

    def any_queued(self, queues: Queues) -> bool:
        sql = any_queued_sql(self.listed, queues.by)
        return bool(self.execute(sql, (json_text(queues.keys),)))

    def queued(self, row: tuple[Any, ...]) -> TaskRow:
        """Read a row of a claim's statement: keep its token's row, answer its task."""
        self.keep(row[9:])
        return task_row(row[:9])

    # timers

    def insert_timer(
        self, token: str, state: str, visit: int, event: str, payload: Any, due_at: float, kind: str
    ) -> int:
        for watcher in self.watchers:
            watcher.timer_set()
        if token in self._timers:
            self._timers[token] += 1
        due, pending = to_column(due_at), TimerStatus.PENDING
        return self.insert_row(
            "timers",
            "token, state, visit, event, payload, set_at, due_at, status, kind",
            (token, state, visit, event, json_text(payload), self.stamp, due, pending, kind),
        )

    def timer(self, timer: int) -> TimerRow | None:
        row = self.one(TIMER_BY_ID, (timer,))
        return None if row is None else timer_row(row)

    def set_timer_status(self, timer: int, status: str) -> None:
        """Set the status of a pending timer (the engine sets none of another)."""
        for watcher in self.watchers:
            watcher.timer_settled(status)
        self.change("UPDATE timers SET status = ? WHERE id = ?", (status, timer))

    def cancel_timers(self, token: str, kind: str | None = None) -> None:
        if self._timers.get(token) == 0:
            return
        statement = (
            f"UPDATE timers SET status = {word(TimerStatus.CANCELLED)} "
            f"WHERE token = ? AND status = {word(TimerStatus.PENDING)}"
        )
        if kind is None:
            self._timers[token] = 0
            self.cancel_pending(statement, (token,))
        else:
            self.cancel_pending(f"{statement} AND kind = ?", (token, kind))

    @abstractmethod
    def cancel_pending(self, statement: str, bindings: tuple[Any, ...]) -> None:
        """Run the UPDATE that cancels pending timers, and count how many went (each store
        learns the number its own way)."""

    def shift_timers(self, token: str, seconds: float, kind: str | None = None) -> None:
        """Move the token's pending timers (of `kind` only, when given) by `seconds`."""
        for ident, due_at, of_kind in self.execute(PENDING_DUE, (token,)):
            if kind is not None and of_kind != kind:
                continue
            moved = to_column(from_column(due_at) + seconds)
            self.change("UPDATE timers SET due_at = ? WHERE id = ?", (moved, ident))

    def retry_planned(self, token: str) -> bool:
        """Whether the token's task waits for its next attempt: a pending `retry` timer."""
        return self.one(PLANNED_RETRY, (token,)) is not None

    def due_timers(self, limit: int) -> list[int]:
        return [row[0] for row in self.execute(DUE_TIMERS, (self.stamp, limit))]

    def pending_timers(self, token: str) -> int:
        """How many timers of `token` are pending: known once the token was read, else
        counted by the index of the token's timers."""
        known = self._timers.get(token)
        if known is None:
            found = self.one(
                f"SELECT count(*) FROM timers WHERE token = ? AND status = "
                f"{word(TimerStatus.PENDING)}",
                (token,),
            )
            known = int(found[0]) if found else 0
            self._timers[token] = known
        return known

    # memory

    def grant_reads(self, token: str, state: str) -> GrantReads:
        """What a grant shows besides the token: the data of the event that brought the token
        into its state (its last `event_accepted`: one this transaction wrote, as a report
        that asks `next` did, is not read again), and the memory of the state."""
        memory = (GRANT_MEMORY, (token, state))
        accepted = self.accepted_here(token)
        if accepted is not None:
            rows = self.execute(*memory)
        else:
            self.finish()
            found, rows = self.reads([(LAST_ACCEPTED, (token,)), memory])
            accepted = found[0][0] if found else None
        return GrantReads(
            None if accepted is None else decode(accepted),
            {key: decode(value) for key, value in rows},
        )

    def accepted_here(self, token: str) -> str | None:
        """The data of the last `event_accepted` of `token` that this transaction wrote and
        has not yet sent (None: none): a read of the ledger would not see it yet."""
        event = Kind.EVENT_ACCEPTED
        written = [row[5] for row in self._ledger if row[0] == token and row[3] == event]
        return written[-1] if written else None

    # claims

    def claim_reads(self, supervisor: str, request: str | None, queues: Queues) -> ClaimReads:
        """What a claim reads (`ClaimReads`): the oldest queued task of `queues` (None when
        it names none) is read even when the claim is sent again, which then leaves it
        queued: Postgres sends the three reads in one round trip."""
        asked = (supervisor, supervisor, request)
        claimed, task, attempt = self.execute(CLAIM_AND_GRANTED, asked)[0]
        return ClaimReads(
            time_or_none(claimed),
            None if task is None else (task, attempt),
            self.next_queued(queues) if queues.keys else None,
        )
