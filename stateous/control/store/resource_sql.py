"""The SQL of resources: each resource, each key's slots in use and rate bucket, and each
task's uses of them.

`resources` holds one row per resource: its slots per key (as last declared by a graph
file, `declared_slots`, or set by an operator since), its rate, and whether it is
paused. `resource_keys` holds one row per key that a task has used: its slots `in_use`, the
rate bucket (`bucket` tokens as of `filled_at`), and `closed_until`, a time before which
the key lets nothing in (an empty bucket). `task_resources` holds the uses of each task:
`taken` while the task has their slots, `waiting` on the one use it waits for; such a
task has `tasks.waits_for`, so it is out of the queues' indexes. Nothing here decides who
is let in: `stateous.control.resources` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.store.columns import time_or_none, word
from stateous.control.store.rows import from_column, to_column
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import TaskStatus

RESOURCE_COLUMNS = "name, slots, rate, declared_slots, paused, changed_at, changed_by"
KEY_COLUMNS = "resource, key, in_use, bucket, filled_at, closed_until"
USE_COLUMNS = "task, resource, key, count, taken, waiting"


@dataclass(slots=True)
class ResourceRow:
    """A resource: `slots` per key, its `rate` (`N/unit`) if any, and whether it is paused."""

    name: str
    slots: int
    rate: str | None
    declared_slots: int | None
    paused: bool
    changed_at: float
    changed_by: str | None


@dataclass(slots=True)
class KeyRow:
    """A key of a resource: its slots `in_use`, its rate bucket, and when it opens again."""

    resource: str
    key: str
    in_use: int
    bucket: float | None
    filled_at: float | None
    closed_until: float | None
    #: Its parking lets it open again step by step (`parking.py`): read with the row, so that
    #: a key that was never parked costs a take or a release no read of its parking.
    reopening: bool = False


@dataclass(frozen=True, slots=True)
class UseRow:
    """A task's use of a resource: `count` slots of `key`, taken or waited for."""

    task: int
    resource: str
    key: str
    count: int
    taken: bool
    waiting: bool


@dataclass(frozen=True, slots=True)
class TakerRow:
    """A task that has taken slots of a key, with its token and its status."""

    resource: str
    key: str
    task: int
    token: str
    status: str
    count: int


def _resource(row: tuple[Any, ...]) -> ResourceRow:
    name, slots, rate, declared, paused, changed_at, changed_by = row
    return ResourceRow(
        name, slots, rate, declared, bool(paused), from_column(changed_at), changed_by
    )


def _key(row: tuple[Any, ...]) -> KeyRow:
    resource, key, in_use, bucket, filled_at, closed_until, *reopening = row
    return KeyRow(
        resource,
        key,
        in_use,
        bucket,
        time_or_none(filled_at),
        time_or_none(closed_until),
        bool(reopening and reopening[0]),
    )


def _or_none(at: float | None) -> str | None:
    return None if at is None else to_column(at)


class ResourceSql(Statements):
    """The verbs of resources."""

    def resource(self, name: str) -> ResourceRow | None:
        row = self.one(f"SELECT {RESOURCE_COLUMNS} FROM resources WHERE name = ?", (name,))
        return None if row is None else _resource(row)

    def resources(self) -> list[ResourceRow]:
        rows = self.execute(f"SELECT {RESOURCE_COLUMNS} FROM resources ORDER BY name")
        return [_resource(row) for row in rows]

    def put_resource(self, row: ResourceRow) -> None:
        self.change(
            f"INSERT INTO resources ({RESOURCE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET slots = excluded.slots, rate = excluded.rate, "
            "declared_slots = excluded.declared_slots, paused = excluded.paused, "
            "changed_at = excluded.changed_at, changed_by = excluded.changed_by",
            (
                row.name,
                row.slots,
                row.rate,
                row.declared_slots,
                int(row.paused),
                to_column(row.changed_at),
                row.changed_by,
            ),
        )

    def resource_key(self, resource: str, key: str) -> KeyRow | None:
        """A key's row, locked to the end of a write (the slots and the bucket change under it)."""
        row = self.one(
            f"SELECT {KEY_COLUMNS}, EXISTS (SELECT 1 FROM key_parkings p "
            "WHERE p.resource = resource_keys.resource AND p.key = resource_keys.key "
            "AND p.step IS NOT NULL) FROM resource_keys WHERE resource = ? AND key = ?"
            f"{self.for_update}",
            (resource, key),
        )
        return None if row is None else _key(row)

    def lock_key(self, resource: str, key: str) -> KeyRow:
        """A key's row, made first if it is new, then locked to the end of a write: a lock
        on a row not there yet holds nothing, and two takers of a new key would both count
        its first slot (sent together, in one round trip where a store pipelines)."""
        self.change(
            f"INSERT INTO resource_keys ({KEY_COLUMNS}) VALUES (?, ?, 0, NULL, NULL, NULL) "
            "ON CONFLICT (resource, key) DO NOTHING",
            (resource, key),
        )
        row = self.resource_key(resource, key)
        assert row is not None
        return row

    def resource_keys(self, resource: str) -> list[KeyRow]:
        rows = self.execute(
            f"SELECT {KEY_COLUMNS} FROM resource_keys WHERE resource = ? ORDER BY key",
            (resource,),
        )
        return [_key(row) for row in rows]

    def put_key(self, row: KeyRow) -> None:
        self.change(
            f"INSERT INTO resource_keys ({KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (resource, key) DO UPDATE SET in_use = excluded.in_use, "
            "bucket = excluded.bucket, filled_at = excluded.filled_at, "
            "closed_until = excluded.closed_until",
            (
                row.resource,
                row.key,
                row.in_use,
                row.bucket,
                _or_none(row.filled_at),
                _or_none(row.closed_until),
            ),
        )

    def add_uses(
        self,
        task: int,
        uses: list[tuple[str, str, int]],
        *,
        taken: bool,
        waiting: str | None = None,
    ) -> None:
        """Keep a task's uses, (resource, key, count) each: all taken, or the use of resource
        `waiting` waited for."""
        marks = ", ".join("(?, ?, ?, ?, ?, ?)" for _ in uses)
        self.change(
            f"INSERT INTO task_resources ({USE_COLUMNS}) VALUES {marks}",
            tuple(
                value
                for resource, key, count in uses
                for value in (task, resource, key, count, int(taken), int(resource == waiting))
            ),
        )

    def uses(self, task: int) -> list[UseRow]:
        """A task's uses, by resource name: the order in which their keys are locked."""
        rows = self.execute(
            f"SELECT {USE_COLUMNS} FROM task_resources WHERE task = ? ORDER BY resource",
            (task,),
        )
        return [UseRow(t, r, k, c, bool(h), bool(w)) for t, r, k, c, h, w in rows]

    def mark_uses(self, task: int, *, taken: bool, waiting: str | None = None) -> None:
        """Mark all of a task's uses taken (or not), and the use of resource `waiting` (if
        any) as the one it waits for; `tasks.waits_for` is set by `wait_for`."""
        self.change(
            "UPDATE task_resources SET taken = ?, "
            "waiting = CASE WHEN resource = ? THEN 1 ELSE 0 END WHERE task = ?",
            (int(taken), waiting, task),
        )

    def wait_for(self, task: int, waits_for: str | None) -> None:
        """Take a task out of its queue's index while it waits for `waits_for`, or put it back
        (None)."""
        self.change("UPDATE tasks SET waits_for = ? WHERE id = ?", (waits_for, task))

    def waits_for(self, tasks: list[int]) -> dict[int, str]:
        """What each of these tasks waits for, for those that wait."""
        if not tasks:
            return {}
        marks = ", ".join("?" for _ in tasks)
        rows = self.execute(
            f"SELECT id, waits_for FROM tasks WHERE id IN ({marks}) AND waits_for IS NOT NULL",
            tuple(tasks),
        )
        return {task: text for task, text in rows}

    def still_queued(self, task: int) -> bool:
        """Whether a task is queued, its row locked to the end of a write (a waiter let in by
        another token's change must not be moved by its own token meanwhile)."""
        row = self.one(f"SELECT status FROM tasks WHERE id = ?{self.for_update}", (task,))
        return row is not None and row[0] == TaskStatus.QUEUED

    def waiters(self, resource: str, key: str, limit: int) -> list[int]:
        """The tasks that wait for a key, oldest first."""
        rows = self.execute(
            "SELECT task FROM task_resources WHERE resource = ? AND key = ? AND waiting = 1 "
            "ORDER BY task LIMIT ?",
            (resource, key, limit),
        )
        return [row[0] for row in rows]

    def waiting_keys(self, resource: str) -> list[str]:
        """The keys of a resource that some task waits for."""
        rows = self.execute(
            "SELECT DISTINCT key FROM task_resources WHERE resource = ? AND waiting = 1 "
            "ORDER BY key",
            (resource,),
        )
        return [row[0] for row in rows]

    def waiting_counts(self, resource: str) -> dict[str, int]:
        """How many tasks wait for each key of a resource."""
        rows = self.execute(
            "SELECT key, count(*) FROM task_resources WHERE resource = ? AND waiting = 1 "
            "GROUP BY key",
            (resource,),
        )
        return {key: n for key, n in rows}

    def takers(self, resource: str, key: str | None = None) -> list[TakerRow]:
        """The tasks that have taken slots of a resource (of one key), oldest first."""
        sql = (
            "SELECT u.resource, u.key, u.task, t.token, t.status, u.count "
            "FROM task_resources u JOIN tasks t ON t.id = u.task "
            "WHERE u.resource = ? AND u.taken = 1"
        )
        bindings: tuple[Any, ...] = (resource,)
        if key is not None:
            sql, bindings = sql + " AND u.key = ?", (resource, key)
        rows = self.execute(sql + " ORDER BY u.key, u.task", bindings)
        return [TakerRow(*row) for row in rows]

    def unclaimed_takers(self, resource: str, key: str | None = None) -> list[int]:
        """The queued tasks that have taken slots of a resource (of one key): let in, not
        claimed yet."""
        sql = (
            "SELECT u.task FROM task_resources u JOIN tasks t ON t.id = u.task "
            f"WHERE u.resource = ? AND u.taken = 1 AND t.status = {word(TaskStatus.QUEUED)}"
        )
        bindings: tuple[Any, ...] = (resource,)
        if key is not None:
            sql, bindings = sql + " AND u.key = ?", (resource, key)
        rows = self.execute(sql + " ORDER BY u.task", bindings)
        return [row[0] for row in rows]

    def unclaimed(self, resource: str, key: str, limit: int) -> int:
        """How many tasks were let in to a key and are not claimed yet, counted up to `limit`."""
        row = self.one(
            "SELECT count(*) FROM (SELECT 1 FROM task_resources u JOIN tasks t ON t.id = u.task "
            f"WHERE u.resource = ? AND u.key = ? AND u.taken = 1 "
            f"AND t.status = {word(TaskStatus.QUEUED)} LIMIT ?) n",
            (resource, key, limit),
        )
        return 0 if row is None else int(row[0])

    def opened_keys(self, limit: int) -> list[tuple[str, str]]:
        """The keys closed until a time that has come, in that order (by their index)."""
        rows = self.execute(
            "SELECT resource, key FROM resource_keys WHERE closed_until IS NOT NULL "
            "AND closed_until <= ? ORDER BY closed_until LIMIT ?",
            (self.stamp, limit),
        )
        return [(resource, key) for resource, key in rows]
