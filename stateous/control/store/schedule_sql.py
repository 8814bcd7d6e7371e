"""The SQL of schedules: one row per schedule, and one row per occurrence handled.

A schedule's row holds where its occurrences stand: `next_at`, the next one (NULL while
paused), `last_at` and `last_token`, the last one handled and the token it started, and
`waiting_at`, the one start that waits while the last token is live (`queue_one`). Each
occurrence handled leaves a row of `schedule_history` (started, waiting or skipped, with
the reason of a skip and how many missed occurrences it stood for). Nothing here decides
when an occurrence is due or what it does: `stateous.control.schedules` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.store.columns import decode, json_text, time_or_none
from stateous.control.store.rows import from_column, to_column
from stateous.control.store.statements import Statements

SCHEDULE_COLUMNS = (
    "name, source, cron, tz, context, overlap, catch_up, paused, next_at, last_at, last_token,"
    " waiting_at, added_at, added_by"
)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True, slots=True)
class ScheduleRow:
    """A schedule and where its occurrences stand; times are UTC seconds."""

    name: str
    source: str
    cron: str
    tz: str
    context: dict[str, Any]
    overlap: str
    catch_up: str
    paused: bool
    next_at: float | None
    last_at: float | None
    last_token: str | None
    waiting_at: float | None
    added_at: float
    added_by: str | None


def schedule_row(row: tuple[Any, ...]) -> ScheduleRow:
    name, source, cron, tz, context, overlap, catch_up, paused = row[:8]
    next_at, last_at, last_token, waiting_at, added_at, added_by = row[8:]
    return ScheduleRow(
        name,
        source,
        cron,
        tz,
        decode(context),
        overlap,
        catch_up,
        bool(paused),
        time_or_none(next_at),
        time_or_none(last_at),
        last_token,
        time_or_none(waiting_at),
        from_column(added_at),
        added_by,
    )


def _column(moment: float | None) -> str | None:
    return None if moment is None else to_column(moment)


class ScheduleSql(Statements):
    """The schedule verbs of `Tx`, over the `execute` of a store's transaction."""

    def schedules(self) -> list[ScheduleRow]:
        rows = self.execute(f"SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY name")
        return [schedule_row(row) for row in rows]

    def schedule(self, name: str) -> ScheduleRow | None:
        """One schedule (in a write on Postgres, locked until the commit)."""
        rows = self.execute(
            f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE name = ?{self.for_update}", (name,)
        )
        return schedule_row(rows[0]) if rows else None

    def due_schedules(self, now: float) -> list[str]:
        """The schedules not paused whose next occurrence is due, or that have one waiting."""
        rows = self.execute(
            "SELECT name FROM schedules WHERE paused = 0 "
            "AND (next_at <= ? OR waiting_at IS NOT NULL) ORDER BY name",
            (to_column(now),),
        )
        return [name for (name,) in rows]

    def add_schedule(self, row: ScheduleRow) -> None:
        """Keep a new schedule: one of the same name that another transaction added since
        this one read makes it clash, so it runs again and finds that one."""
        self.change(INSERT_SCHEDULE, _schedule_values(row))

    def put_schedule(self, row: ScheduleRow) -> None:
        """Keep a schedule: a new one, or all of an existing one's columns."""
        self.change(
            f"{INSERT_SCHEDULE} ON CONFLICT (name) DO UPDATE SET "
            "source = excluded.source, cron = excluded.cron, tz = excluded.tz, "
            "context = excluded.context, overlap = excluded.overlap, "
            "catch_up = excluded.catch_up, paused = excluded.paused, "
            "next_at = excluded.next_at, last_at = excluded.last_at, "
            "last_token = excluded.last_token, waiting_at = excluded.waiting_at",
            _schedule_values(row),
        )

    def delete_schedule(self, name: str) -> None:
        """Remove a schedule; the history of its occurrences stays."""
        self.change("DELETE FROM schedules WHERE name = ?", (name,))

    def record_occurrence(
        self, schedule: str, at: float, outcome: str, token: str | None, missed: int, reason: str
    ) -> None:
        """Keep what an occurrence did; a waiting one that starts later is marked again."""
        self.change(
            "INSERT INTO schedule_history "
            "(schedule, at, outcome, token, missed, reason, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (schedule, at) DO UPDATE SET "
            "outcome = excluded.outcome, token = excluded.token, reason = excluded.reason, "
            "recorded_at = excluded.recorded_at",
            (schedule, to_column(at), outcome, token, missed, reason or None, self.stamp),
        )

    def last_skips(self) -> dict[str, tuple[float, str]]:
        """The last skipped occurrence of each schedule, with its reason."""
        rows = self.execute(
            "SELECT schedule, at, reason FROM schedule_history AS h WHERE outcome = 'skipped' "
            "AND at = (SELECT MAX(at) FROM schedule_history "
            "WHERE schedule = h.schedule AND outcome = 'skipped')"
        )
        return {name: (from_column(at), reason or "") for name, at, reason in rows}


def _schedule_values(row: ScheduleRow) -> tuple[Any, ...]:
    """A schedule's columns, as the database keeps them."""
    return (
        row.name,
        row.source,
        row.cron,
        row.tz,
        json_text(row.context),
        row.overlap,
        row.catch_up,
        int(row.paused),
        _column(row.next_at),
        _column(row.last_at),
        row.last_token,
        _column(row.waiting_at),
        to_column(row.added_at),
        row.added_by,
    )
