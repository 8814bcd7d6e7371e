"""The columns of each table as the shared SQL names them, the statements built from them,
and how a row of them becomes a typed row.

Statements are built from these names and from words of the vocabulary (constants
of the text, so that the conditions of partial indexes match them); every value
a statement carries is a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

import msgspec

from stateous.control.store.rows import (
    CredentialRow,
    Entry,
    TaskRow,
    TimerRow,
    TokenRow,
    from_column,
    to_column,
)
from stateous.model.vocabulary import (
    LIVE_TASK,
    Kind,
    TaskStatus,
    TimerKind,
    TimerStatus,
    TokenStatus,
)

_encode = msgspec.json.encode
decode = msgspec.json.decode


def json_text(value: Any) -> str:
    return _encode(value).decode()


@cache
def insert_rows(head: str, columns: int, rows: int, tail: str = "") -> str:
    """An INSERT of `rows` rows of `columns` values each: `head`, the placeholders, then
    `tail`. Made once for each number of rows, not at every write."""
    row = "(" + ", ".join("?" * columns) + ")"
    return f"{head} VALUES {', '.join([row] * rows)}{tail}"


def word(member: StrEnum) -> str:
    """A word of the vocabulary as an SQL literal: a constant of a statement's text, so that
    the conditions of partial indexes (`WHERE status = 'queued'`) match it."""
    return f"'{member.value}'"


def any_word(column: str, members: tuple[StrEnum, ...]) -> str:
    """The condition that `column` holds one of these words, spelled as the partial indexes
    spell it: `(status = 'queued' OR status = 'claimed' OR ...)`.

    Not `status IN (...)`: SQLite evaluates an IN list of three words or more through a
    temporary table, and it evaluates the conditions of the partial indexes at every
    write of the table (0008.sql).
    """
    return "(" + " OR ".join(f"{column} = {word(member)}" for member in members) + ")"


def time_or_none(value: str | None) -> float | None:
    return None if value is None else from_column(value)


def token_row(row: tuple[Any, ...]) -> TokenRow:
    token, state, status, visit, context, entered_at, parent, workflow, visits, result = row[:10]
    checksum, priority = row[10:12]
    return TokenRow(
        token,
        state,
        status,
        visit,
        decode(context),
        from_column(entered_at),
        parent,
        workflow,
        decode(visits),
        None if result is None else decode(result),
        checksum,
        priority,
    )


def task_row(row: tuple[Any, ...]) -> TaskRow:
    ident, token, state, visit, status, attempt, claimed_by, lease_until, queued_at = row
    return TaskRow(
        ident,
        token,
        state,
        visit,
        status,
        attempt,
        claimed_by,
        time_or_none(lease_until),
        from_column(queued_at),
        status,
    )


def timer_row(row: tuple[Any, ...]) -> TimerRow:
    ident, token, state, visit, event, payload, set_at, due_at, status, kind = row
    return TimerRow(
        ident,
        token,
        state,
        visit,
        event,
        decode(payload),
        from_column(set_at),
        from_column(due_at),
        status,
        kind,
    )


def entry_row(row: tuple[Any, ...]) -> Entry:
    token, seq, at, kind, key, data = row
    return Entry(token, seq, from_column(at), kind, key, decode(data))


TOKEN_COLUMNS = (
    "token, state, status, visit, context, entered_at, parent, workflow, visits, result, checksum, "
    "priority"
)
TASK_COLUMNS = "id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at"
ENTRY_COLUMNS = "token, seq, at, kind, key, data"
TASK_BY_ID = f"SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?"
#: When each pending timer of a token is due: what a resume shifts.
PENDING_DUE = (
    f"SELECT id, due_at, kind FROM timers WHERE token = ? AND status = {word(TimerStatus.PENDING)}"
)
#: A pending `retry` timer of a token: its task waits for its next attempt.
PLANNED_RETRY = (
    f"SELECT 1 FROM timers WHERE token = ? AND status = {word(TimerStatus.PENDING)} "
    f"AND kind = {word(TimerKind.RETRY)} LIMIT 1"
)
TIMER_BY_ID = (
    "SELECT id, token, state, visit, event, payload, set_at, due_at, status, kind "
    "FROM timers WHERE id = ?"
)
INSERT_TOKEN = (
    f"INSERT INTO tokens ({TOKEN_COLUMNS}, moved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPDATE_TOKEN = (
    "UPDATE tokens SET state = ?, status = ?, visit = ?, context = ?, entered_at = ?, "
    "parent = ?, workflow = ?, visits = ?, result = ?, checksum = ?, priority = ?, moved_at = ? "
    "WHERE token = ?"
)
#: The most ledger rows that one INSERT carries.
LEDGER_BATCH = 100


def qualified(names: str, table: str) -> str:
    """Each of the columns `names`, named with its `table`."""
    return ", ".join(f"{table}.{name}" for name in names.split(", "))


def counts_columns(token: str) -> tuple[str, str]:
    """The last ledger number and the number of pending timers of the token that the SQL
    `token` names."""
    return (
        f"(SELECT max(seq) FROM ledger WHERE ledger.token = {token})",
        f"(SELECT count(*) FROM timers WHERE timers.token = {token} "
        f"AND status = {word(TimerStatus.PENDING)})",
    )


#: What `token_state_sql` reads: the token's columns, its last ledger number, its number of
#: pending timers, then its live task's columns (empty when it has none).
STATE_COLUMNS = (
    *(f"k.{name}" for name in TOKEN_COLUMNS.split(", ")),
    *counts_columns("k.token"),
    *(f"t.{name}" for name in TASK_COLUMNS.split(", ")),
)
#: Where a row of `token_state_sql` has its last ledger number, its number of pending
#: timers, and its live task.
STATE_LAST = len(TOKEN_COLUMNS.split(", "))
STATE_TIMERS = STATE_LAST + 1
STATE_TASK = STATE_COLUMNS.index("t.id")
_STATE_TABLES = (
    "tokens k LEFT JOIN tasks t ON t.id = "
    f"(SELECT max(id) FROM tasks WHERE tasks.token = k.token AND {any_word('status', LIVE_TASK)})"
)


@cache
def token_state_sql(token: str, columns: str = ", ".join(STATE_COLUMNS)) -> str:
    """One row: the `columns` (by default `STATE_COLUMNS`) of the token that the SQL `token`
    names.

    A move needs them all, so they come back together.
    """
    return f"SELECT {columns} FROM {_STATE_TABLES} WHERE k.token = {token}"


class QueueBy(StrEnum):
    """The column that a claim's queues are keyed by: a state's name, or a contract's digest
    (for a claim that names the graph its supervisor was built for; the digest names the
    state too)."""

    STATE = "state"
    CONTRACT = "contract"


@dataclass(frozen=True, slots=True)
class Queues:
    """The queues that a claim takes from: the `keys` of column `by`."""

    keys: list[str]
    by: QueueBy = QueueBy.STATE
    #: The claiming supervisor's labels as `name=value`, when a state of `keys` has
    #: `prefers`: the claim then passes over a task preferred for another label until its
    #: `prefer_until`. None for a claim of states without (its statement has no condition).
    prefer: list[str] | None = None


#: A queued task that waits for no resource, as the queues' partial indexes say it: one
#: term, so that Postgres estimates the queues' indexes as it did before resources (two
#: terms make them look empty, and a scan of another index as cheap). A `waits_for` is never
#: the word `queued` (`model.resources.waiting`).
LET_IN = f"coalesce(queued.waits_for, queued.status) = {word(TaskStatus.QUEUED)}"
#: The condition on a queued task preferred for a label (`preferred`): none, its time is
#: over (`?`, the claim's), or the claim's labels (a JSON list `?`) hold it.
PREFERRED = (
    "NOT EXISTS (SELECT 1 FROM preferred p WHERE p.task = queued.id AND p.until > ? "
    "AND p.label NOT IN (SELECT value FROM {listed}))"
)


def queued_in_state(
    columns: str, *, active: bool = True, by: QueueBy = QueueBy.STATE, prefer: str = ""
) -> str:
    """The `columns` of the queued tasks of the queue that `s.value` names (a state, or a
    contract: `by`), by that queue's index (`tasks_queue` or `tasks_contract_queue`:
    `by, turn_at, id WHERE coalesce(waits_for, status) = 'queued'`: a task that waits
    for a resource is not in it); with `active`, only those whose token is active (each
    token read by its key)."""
    sql = f"SELECT {columns} FROM tasks queued WHERE {LET_IN} AND queued.{by} = s.value"
    if prefer:
        sql += f" AND {PREFERRED.format(listed=prefer)}"
    if active:
        sql += (
            " AND (SELECT status FROM tokens WHERE tokens.token = queued.token) = "
            f"{word(TokenStatus.ACTIVE)}"
        )
    return sql


def queue_head(
    columns: str,
    count: str,
    *,
    active: bool = True,
    by: QueueBy = QueueBy.STATE,
    prefer: str = "",
) -> str:
    """The first `count` tasks of `queued_in_state`, in turn (`control.turns`; ties by id).

    It walks the queue's index of one state (or contract) in its order and stops at
    the first tasks that fit: the queue is never sorted.
    """
    return (
        f"{queued_in_state(columns, active=active, by=by, prefer=prefer)} "
        f"ORDER BY queued.turn_at, queued.id LIMIT {count}"
    )


#: The states that a claim lists, as a table `s` of one column `value` read from one bound
#: parameter, a JSON list (SQLite), so that one statement serves any number of states.
LISTED = "json_each(?) s"


@cache
def any_queued_sql(listed: str, by: QueueBy = QueueBy.STATE) -> str:
    """Whether a task is queued for an active token in a queue of the list that the SQL
    `listed` reads: a read, locking nothing, that a claim makes before it writes. It looks
    into each queue until it finds one (a scalar subquery, which no planner turns into a
    join over the whole queue, as Postgres does an EXISTS), by the queue's head: in the
    order of the queue's index, which no other index gives."""
    return (
        f"SELECT 1 FROM {listed} WHERE ({queue_head('queued.id', '1', by=by)}) IS NOT NULL LIMIT 1"
    )


@cache
def next_queued_sql(by: QueueBy = QueueBy.STATE, prefer: bool = False) -> str:
    """The first queued task in turn of the queues of a JSON list whose token is active, as
    a row of `STATE_COLUMNS` (SQLite): the head of each queue, then the first of those heads.
    The task is its token's live task, so the row reads as `token_state_sql`'s does."""
    return (
        f"SELECT {', '.join(STATE_COLUMNS)} FROM {LISTED} "
        f"JOIN tasks t ON t.id = "
        f"({queue_head('queued.id', '1', by=by, prefer='json_each(?)' if prefer else '')}) "
        "JOIN tokens k ON k.token = t.token ORDER BY t.turn_at, t.id LIMIT 1"
    )


#: The claim of a list of states (SQLite).
NEXT_QUEUED = next_queued_sql()

#: The claimed tasks whose lease is over (the times as of `?`, at most `?`), by the index of
#: leases in its order.
EXPIRED_LEASES = (
    f"SELECT id FROM tasks WHERE status = {word(TaskStatus.CLAIMED)} AND lease_until <= ? "
    "ORDER BY lease_until LIMIT ?"
)
#: The pending timers due by `?` (at most `?`) of active tokens, by the index of due timers in
#: its order, each timer's token read by its key: the active tokens are never read whole.
DUE_TIMERS = (
    f"SELECT t.id FROM timers t WHERE t.status = {word(TimerStatus.PENDING)} AND t.due_at <= ? "
    f"AND (SELECT status FROM tokens k WHERE k.token = t.token) = {word(TokenStatus.ACTIVE)} "
    "ORDER BY t.due_at, t.id LIMIT ?"
)


CREDENTIAL_COLUMNS = (
    "name, role, events, may_start, hmac_key, secret_hash, created_at, last_used, revoked_at, "
    "supervisor, supervisor_prefix, github"
)
#: A bound parameter for each of `CREDENTIAL_COLUMNS`.
CREDENTIAL_MARKS = ", ".join("?" * (CREDENTIAL_COLUMNS.count(",") + 1))


def credential_row(row: tuple[Any, ...]) -> CredentialRow:
    name, role, events, may_start, hmac_key, secret_hash, created, last_used, revoked = row[:9]
    supervisor, prefix, github = row[9:]
    return CredentialRow(
        name,
        role,
        None if events is None else decode(events),
        bool(may_start),
        hmac_key,
        secret_hash,
        from_column(created),
        time_or_none(last_used),
        time_or_none(revoked),
        supervisor,
        bool(prefix),
        None if github is None else decode(github),
    )


def credential_values(row: CredentialRow) -> tuple[Any, ...]:
    """A credential's columns, as the database keeps them."""
    return (
        row.name,
        row.role,
        None if row.events is None else json_text(row.events),
        int(row.may_start),
        row.hmac_key,
        row.secret_hash,
        to_column(row.created_at),
        None if row.last_used is None else to_column(row.last_used),
        None if row.revoked_at is None else to_column(row.revoked_at),
        row.supervisor,
        int(row.supervisor_prefix),
        None if row.github is None else json_text(row.github),
    )


#: The largest ledger position that ever committed: the largest kept, or a larger one that
#: retention removed (`ledger_removed`); 0 for none. A control plane that starts counts on
#: from it, so that a stream id never comes twice (`positions.py`).
LAST_POSITION = (
    "SELECT coalesce(max(pos), 0) FROM (SELECT max(pos) AS pos FROM ledger "
    "UNION ALL SELECT pos FROM ledger_removed) AS ever"
)
#: Whether a token's ledger holds an idempotency key.
KEY_USED = "SELECT 1 FROM ledger WHERE token = ? AND key = ?"
#: The data of the event that brought a token into its state: its last `event_accepted`.
LAST_ACCEPTED = (
    f"SELECT data FROM ledger WHERE token = ? AND kind = {word(Kind.EVENT_ACCEPTED)} "
    "ORDER BY seq DESC LIMIT 1"
)
#: The memory of a token's state, as a grant shows it.
GRANT_MEMORY = "SELECT key, value FROM memory WHERE token = ? AND state = ? ORDER BY key"
#: A supervisor's claim row.
LAST_CLAIM = "SELECT claimed_at FROM claims WHERE supervisor = ?"
#: The task (and its attempt) last granted to a supervisor under a request id.
GRANTED = (
    "SELECT task_id, attempt FROM claim_requests WHERE supervisor = ? AND request = ? "
    "ORDER BY task_id DESC LIMIT 1"
)


#: `LAST_CLAIM` and `GRANTED` in one row (SQLite: one statement is cheaper than two): the
#: supervisor's claim time (NULL without a row) and the task and attempt (NULL: none).
CLAIM_AND_GRANTED = (
    "SELECT (SELECT claimed_at FROM claims WHERE supervisor = ?), g.task_id, g.attempt "
    "FROM (SELECT 1) LEFT JOIN claim_requests g ON g.task_id = "
    "(SELECT max(task_id) FROM claim_requests WHERE supervisor = ? AND request = ?)"
)


def granted_of(rows: list[tuple[Any, ...]]) -> tuple[int, int] | None:
    """The task and attempt that the rows of `GRANTED` name, if any."""
    return (rows[0][0], rows[0][1]) if rows else None
