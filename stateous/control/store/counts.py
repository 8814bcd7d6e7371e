"""Counts kept beside the rows they count, and the cheap reads behind the metrics.

A change counts what it does as it writes its rows (`Counts`, a watcher that its
transaction holds: `watchers.py`): each counted kind of ledger entry bumps its
counter (`BY_KIND`), and the engine names the two things that the ledger does not
tell apart (a report's outcome, a lease that ended). The counts go out in one
statement at the end of the change, in its transaction, so they are kept exactly
when the change is, and a change run again (Postgres, after a conflict) counts once.
Each writer that runs at once bumps rows of its own `shard`, so no writer waits for
another's row; a read adds the shards up.

The live tokens and tasks by status and state, and the pending timers, are
counts too, moved up and down as a change saves a token or a task or sets,
fires or cancels a timer (a gauge kept, not counted at each read: counting a
hundred thousand index entries takes longer than a scrape may). The reads
answer from the counts table and the queue's index, never from the ended rows
or the ledger, so they stay cheap however long the database has served.
"""

from __future__ import annotations

import heapq
import threading
from enum import StrEnum
from itertools import chain
from typing import Any

from stateous.control.store.columns import insert_rows, word
from stateous.control.store.rows import TaskRow, from_column
from stateous.control.store.statements import Statements
from stateous.control.store.watchers import Watcher
from stateous.model.codes import RefusalCode
from stateous.model.vocabulary import LIVE_TASK, LIVE_TOKEN, Kind, TaskStatus, TimerStatus


class Counter(StrEnum):
    """A name of the counts table: most counters follow from the kinds of the ledger entries
    that a change writes; the engine names a report's outcome and a lease that ended."""

    TOKENS_STARTED = "tokens_started"
    TOKENS_ENDED = "tokens_ended"
    EVENTS_FIRED = "events_fired"
    EVENTS_REFUSED = "events_refused"
    TASKS_CLAIMED = "tasks_claimed"
    REPORTS = "reports"
    ATTEMPTS_FAILED = "attempts_failed"
    LEASES_ENDED = "leases_ended"
    #: Tasks whose retries `stop_on_repeat` ended: the same failure on the same context.
    RETRIES_STOPPED = "retries_stopped"
    TIMERS_FIRED = "timers_fired"
    #: Tokens that retention removed, children included (`stateous.control.retention`).
    TOKENS_REMOVED = "tokens_removed"
    #: Keys parked by a quota report or a breaker, labelled `resource cause`.
    PARKINGS = "parkings"
    #: Trees whose spend crossed the warning share of a budget's unit, and reached a limit.
    BUDGET_WARNINGS = "budget_warnings"
    BUDGETS_SPENT = "budgets_spent"
    #: Gauges, kept as counts that go up and down: live tokens by status and state, and
    #: live tasks by status and state, each labelled `status state`; pending timers.
    LIVE_TOKENS = "live_tokens"
    LIVE_TASKS = "live_tasks"
    TIMERS_PENDING = "timers_pending"


#: The counter and label that each counted kind of ledger entry bumps; a refused event's
#: label is the code of its refusal, known once the change ends.
BY_KIND: dict[str, tuple[Counter, str]] = {
    Kind.STARTED: (Counter.TOKENS_STARTED, ""),
    Kind.EVENT_ACCEPTED: (Counter.EVENTS_FIRED, ""),
    Kind.TASK_CLAIMED: (Counter.TASKS_CLAIMED, ""),
    Kind.TASK_FAILED: (Counter.ATTEMPTS_FAILED, ""),
    Kind.RETRIES_STOPPED: (Counter.RETRIES_STOPPED, ""),
    Kind.TIMER_FIRED: (Counter.TIMERS_FIRED, ""),
    Kind.COMPLETED: (Counter.TOKENS_ENDED, Kind.COMPLETED.value),
    Kind.FAILED: (Counter.TOKENS_ENDED, Kind.FAILED.value),
    Kind.CANCELLED: (Counter.TOKENS_ENDED, Kind.CANCELLED.value),
    Kind.BUDGET_WARNED: (Counter.BUDGET_WARNINGS, ""),
    Kind.OVER_BUDGET: (Counter.BUDGETS_SPENT, ""),
}
#: The counters that also keep a ring of the last sixty minutes, for `/stats`.
HOURLY = frozenset({Counter.EVENTS_FIRED, Counter.LEASES_ENDED, Counter.ATTEMPTS_FAILED})
#: The code of an event turned away without a refusal to answer (a timer's event that no
#: transition takes): the code the same event would have been refused with.
TURNED_AWAY = RefusalCode.EVENT_NOT_ALLOWED
#: The slot and minute of a count since the database was made.
TOTAL = -1
COLUMNS = "name, label, slot, shard, minute, n"
BUMP = (
    "ON CONFLICT (name, label, slot, shard) DO UPDATE SET n = CASE "
    "WHEN counts.minute = excluded.minute THEN counts.n + excluded.n ELSE excluded.n END, "
    "minute = excluded.minute"
)


def token_label(workflow: str | None, state: str, status: str) -> str | None:
    """The label of a token in the gauge of live tokens (None: an ended token is not in it):
    its status, then its state as a supervisor claims it."""
    if status not in LIVE_TOKEN:
        return None
    return f"{status} {state if workflow is None else f'{workflow}/{state}'}"


def task_label(state: str, status: str) -> str | None:
    """The label of a task in the gauge of live tasks (None: an ended task is not in it)."""
    return f"{status} {state}" if status in LIVE_TASK else None


class Counts(Watcher):
    """What one change counts, from the rows its transaction writes; written in one statement
    as the change ends (`finished`), so kept exactly when the change is."""

    __slots__ = ("_counts", "_now", "_refused", "shard")

    def __init__(self, now: float) -> None:
        self._now = now
        self._counts: dict[tuple[str, str], int] = {}
        self._refused = 0
        #: The rows of the counts table that this change bumps; one per writer at a time.
        self.shard = 0

    def count(self, name: str, label: str = "", added: int = 1) -> None:
        """Count `added` more `name` (with `label`) when this change is kept."""
        key = (name, label)
        self._counts[key] = self._counts.get(key, 0) + added

    def moved(self, name: str, before: str | None, after: str | None) -> None:
        """Move one row of a gauge from the label `before` to `after` (None: not counted)."""
        if before == after:
            return
        if before is not None:
            self.count(name, before, -1)
        if after is not None:
            self.count(name, after)

    # what a change does to the live rows and the ledger

    def token_written(self, before: tuple[Any, ...] | None, after: tuple[Any, ...]) -> None:
        was = None if before is None else token_label(before[7], before[1], before[2])
        self.moved(Counter.LIVE_TOKENS, was, token_label(after[7], after[1], after[2]))

    def task_queued(self, state: str, contract: str | None) -> None:
        self.moved(Counter.LIVE_TASKS, None, task_label(state, TaskStatus.QUEUED))

    def task_saved(self, row: TaskRow) -> None:
        before = task_label(row.state, row.was)
        self.moved(Counter.LIVE_TASKS, before, task_label(row.state, row.status))

    def timer_set(self) -> None:
        self.count(Counter.TIMERS_PENDING)

    def timer_settled(self, status: str) -> None:
        """A pending timer ends (the engine sets no timer pending again)."""
        if status != TimerStatus.PENDING:
            self.count(Counter.TIMERS_PENDING, "", -1)

    def recorded(self, token: str, seq: int | None, kind: str, data: str) -> None:
        counted = BY_KIND.get(kind)
        if counted is not None:
            self.count(*counted)
        elif kind == Kind.EVENT_REJECTED:
            self._refused += 1

    def finished(self, tx: Statements, refused: Exception | None) -> None:
        """Write this change's counts in one statement; the code of `refused` labels its
        refused events."""
        counts = dict(self._counts)
        if self._refused:
            refusal = TURNED_AWAY if refused is None else getattr(refused, "code", TURNED_AWAY)
            key = (Counter.EVENTS_REFUSED.value, refusal)
            counts[key] = counts.get(key, 0) + self._refused
        minute = int(self._now // 60)
        rows: list[tuple[Any, ...]] = []
        for (name, label), added in counts.items():
            if not added:
                continue
            rows.append((name, label, TOTAL, self.shard, TOTAL, added))
            if name in HOURLY:
                rows.append((name, label, minute % 60, self.shard, minute, added))
        if not rows:
            return
        tx.change(
            insert_rows(f"INSERT INTO counts ({COLUMNS})", 6, len(rows), f" {BUMP}"),
            tuple(chain.from_iterable(rows)),
        )


class CountSql(Statements):
    """The verbs of `Tx` that read the counts and the queue's index: the metrics' reads."""

    def counters(self) -> dict[tuple[str, str], int]:
        """Every count since the database was made, by counter and label."""
        rows = self.execute(
            "SELECT name, label, CAST(sum(n) AS BIGINT) FROM counts WHERE slot = ? "
            "GROUP BY name, label",
            (TOTAL,),
        )
        return {(name, label): int(total) for name, label, total in rows}

    def last_hour(self) -> dict[str, int]:
        """The counts of the last sixty minutes (this one included), by counter."""
        minute = int(self.now // 60)
        rows = self.execute(
            "SELECT name, CAST(sum(n) AS BIGINT) FROM counts WHERE slot >= 0 AND minute > ? "
            "GROUP BY name",
            (minute - 60,),
        )
        return {name: int(total) for name, total in rows}

    def oldest_queued(self, states: list[str]) -> dict[str, float]:
        """When the oldest queued task of each of `states` was queued, for those that have one:
        one look into the queue's index per state."""
        found = self.reads(
            [
                (
                    "SELECT min(queued_at) FROM tasks "
                    f"WHERE status = {word(TaskStatus.QUEUED)} AND state = ?",
                    (state,),
                )
                for state in states
            ]
        )
        return {
            state: from_column(rows[0][0])
            for state, rows in zip(states, found, strict=True)
            if rows and rows[0][0] is not None
        }


class Shards:
    """Shard numbers for the writers that run at once, the lowest free one first, so that
    the counts table keeps a few rows per counter, not one per transaction ever run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free: list[int] = []
        self._made = 0

    def take(self) -> int:
        with self._lock:
            if self._free:
                return heapq.heappop(self._free)
            self._made += 1
            return self._made - 1

    def give(self, shard: int) -> None:
        with self._lock:
            heapq.heappush(self._free, shard)
