"""The SQL of the listings: pages of tokens and of live tasks, and the supervisors seen.

Each page is read in its listing's order by an index made for its filters
(migration 0005): tokens most recently moved first (`moved_at` descending, then
the id), live tasks oldest first (`queued_at`, then the id). A page after a cursor
starts strictly after the cursor's sort key, so a page boundary inside a run of
equal times neither repeats nor skips a row. The filters are bound parameters; a
task status is written as a word of the vocabulary, so that the conditions of the
partial indexes of live tasks match the statement. Nothing here decides what a
listing shows: `stateous.control.listings` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stateous.control.store.columns import (
    TASK_COLUMNS,
    TOKEN_COLUMNS,
    any_word,
    task_row,
    time_or_none,
    token_row,
    word,
)
from stateous.control.store.rows import TaskRow, TokenRow
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import LIVE_TASK, TaskStatus

#: Where a row of `TASK_COLUMNS` has its `queued_at`, as the column keeps it.
TASK_QUEUED_AT = TASK_COLUMNS.split(", ").index("queued_at")
#: The checksum of the graph of a listed task's token (read by its key): the version whose
#: supervisors (or those whose state has the same contract) the task waits for.
TASK_CHECKSUM = "(SELECT checksum FROM tokens WHERE tokens.token = tasks.token)"


@dataclass(frozen=True, slots=True)
class TokenQuery:
    """What a page of tokens asks for; times are column texts (`to_column`)."""

    limit: int
    status: str | None = None
    state: str | None = None
    parent: str | None = None
    #: The graph file the tokens move by.
    checksum: str | None = None
    #: `moved_at` at or after this time.
    since: str | None = None
    #: `moved_at` before this time.
    until: str | None = None
    #: The sort key of the row before the page: its `moved_at` and its id.
    after: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """What a page of live tasks asks for; times are column texts (`to_column`)."""

    limit: int
    status: TaskStatus | None = None
    state: str | None = None
    #: Only the tasks that this supervisor holds (claimed).
    supervisor: str | None = None
    #: `queued_at` at or before this time.
    queued_by: str | None = None
    #: The sort key of the row before the page: its `queued_at` and its id.
    after: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class SupervisorRow:
    """A supervisor's claim row and the tasks it holds now."""

    supervisor: str
    claimed_at: float | None
    heartbeat_at: float | None
    tasks: list[int] = field(default_factory=list)


def token_page_sql(query: TokenQuery) -> tuple[str, tuple[Any, ...]]:
    """The statement of a page of tokens and its bindings."""
    where: list[str] = []
    bindings: list[Any] = []
    for column, value in (
        ("status", query.status),
        ("state", query.state),
        ("parent", query.parent),
        ("checksum", query.checksum),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            bindings.append(value)
    if query.since is not None:
        where.append("moved_at >= ?")
        bindings.append(query.since)
    if query.until is not None:
        where.append("moved_at < ?")
        bindings.append(query.until)
    if query.after is not None:
        # The first term bounds the index range; the second drops the rows of the same
        # moved_at up to the cursor's id.
        where.append("moved_at <= ? AND (moved_at < ? OR token > ?)")
        moved_at, token = query.after
        bindings.extend((moved_at, moved_at, token))
    clause = f"WHERE {' AND '.join(where)} " if where else ""
    sql = (
        f"SELECT {TOKEN_COLUMNS}, moved_at FROM tokens {clause}"
        "ORDER BY moved_at DESC, token LIMIT ?"
    )
    return sql, (*bindings, query.limit)


def task_page_sql(query: TaskQuery) -> tuple[str, tuple[Any, ...]]:
    """The statement of a page of live tasks and its bindings."""
    where = [any_word("status", LIVE_TASK)]
    bindings: list[Any] = []
    if query.status is not None:
        where.append(f"status = {word(query.status)}")
    if query.state is not None:
        where.append("state = ?")
        bindings.append(query.state)
    if query.supervisor is not None:
        where.append(f"status = {word(TaskStatus.CLAIMED)} AND claimed_by = ?")
        bindings.append(query.supervisor)
    if query.queued_by is not None:
        where.append("queued_at <= ?")
        bindings.append(query.queued_by)
    if query.after is not None:
        where.append("queued_at >= ? AND (queued_at > ? OR id > ?)")
        queued_at, ident = query.after
        bindings.extend((queued_at, queued_at, ident))
    sql = (
        f"SELECT {TASK_COLUMNS}, {TASK_CHECKSUM} FROM tasks WHERE {' AND '.join(where)} "
        "ORDER BY queued_at, id LIMIT ?"
    )
    return sql, (*bindings, query.limit)


#: A page of the supervisors that claimed or sent a heartbeat after a time, by name after
#: a name (read in the order of the claims' key), with the tasks that each holds now.
SUPERVISORS_SQL = (
    "SELECT c.supervisor, c.claimed_at, c.heartbeat_at, t.id FROM ("
    "SELECT supervisor, claimed_at, heartbeat_at FROM claims "
    "WHERE supervisor > ? AND (claimed_at > ? OR heartbeat_at > ?) ORDER BY supervisor LIMIT ?"
    f") c LEFT JOIN tasks t ON t.claimed_by = c.supervisor AND t.status = "
    f"{word(TaskStatus.CLAIMED)}"
)


class ListingSql(Statements):
    """The listing verbs of `Tx`, over the `execute` of a store's transaction."""

    def token_page(self, query: TokenQuery) -> list[tuple[TokenRow, str]]:
        """A page of tokens, each with its `moved_at` as the column keeps it."""
        rows = self.execute(*token_page_sql(query))
        return [(token_row(row), row[-1]) for row in rows]

    def task_page(self, query: TaskQuery) -> list[tuple[TaskRow, str, str | None]]:
        """A page of live tasks, each with its `queued_at` as the column keeps it and the
        checksum of its token's graph."""
        rows = self.execute(*task_page_sql(query))
        return [(task_row(row[:-1]), row[TASK_QUEUED_AT], row[-1]) for row in rows]

    def supervisors_seen(self, since: str, limit: int, after: str = "") -> list[SupervisorRow]:
        """Up to `limit` supervisors that claimed or sent a heartbeat after `since`, by name,
        each named after `after`."""
        seen: dict[str, SupervisorRow] = {}
        bindings = (after, since, since, limit)
        for name, claimed_at, heartbeat_at, task in self.execute(SUPERVISORS_SQL, bindings):
            row = seen.get(name)
            if row is None:
                row = SupervisorRow(name, time_or_none(claimed_at), time_or_none(heartbeat_at))
                seen[name] = row
            if task is not None:
                row.tasks.append(task)
        for row in seen.values():
            row.tasks.sort()
        return sorted(seen.values(), key=lambda row: row.supervisor)

    def touch_heartbeat(self, supervisor: str) -> None:
        """Note that a supervisor sent a heartbeat now, in its claim row (made if missing)."""
        self.change(
            "INSERT INTO claims (supervisor, heartbeat_at) VALUES (?, ?) "
            "ON CONFLICT (supervisor) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            (supervisor, self.stamp),
        )
