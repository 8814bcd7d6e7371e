"""The SQL that both stores run: every `Tx` verb, written once for SQLite and Postgres.

The statements use only what both databases understand (`?` placeholders, `->>`
on JSON, `RETURNING`, `ON CONFLICT`, `rowid` for the order of insertion), so each
store only adds how a statement reaches its connection, and, on Postgres, the row
locks that let many transactions run at once. Nothing here decides what happens
to a token: the engine does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import msgspec

from stateous.control.store import (
    LIVE_TASK,
    ControlRow,
    Entry,
    TaskRow,
    TimerRow,
    TokenRow,
    from_column,
    to_column,
)

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _json(value: Any) -> str:
    return _encode(value).decode()


def _time(value: str | None) -> float | None:
    return None if value is None else from_column(value)


def token_row(row: tuple[Any, ...]) -> TokenRow:
    token, state, status, visit, context, entered_at, parent, workflow = row
    return TokenRow(
        token, state, status, visit, _decode(context), from_column(entered_at), parent, workflow
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
        _time(lease_until),
        from_column(queued_at),
    )


def _entry(row: tuple[Any, ...]) -> Entry:
    token, seq, at, kind, key, data = row
    return Entry(token, seq, from_column(at), kind, key, _decode(data))


_TOKEN = "token, state, status, visit, context, entered_at, parent, workflow"
_TASK = "id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at"
_ENTRY = "token, seq, at, kind, key, data"


def next_queued_sql(states: int, lock: str) -> str:
    """The oldest queued task of `states` states whose token is active, then `lock`."""
    marks = ", ".join("?" for _ in range(states))
    return (
        f"SELECT {', '.join('t.' + name for name in _TASK.split(', '))} FROM tasks t "
        "JOIN tokens k ON k.token = t.token "
        f"WHERE t.status = 'queued' AND t.state IN ({marks}) AND k.status = 'active' "
        f"ORDER BY t.queued_at, t.id LIMIT 1{lock}"
    )


class SqlTx(ABC):
    """One transaction: the verbs of `Tx` over `execute`, which each store provides.

    `for_update` ends every read of a token row in a transaction that may change
    it: empty on SQLite, whose single writer needs no row locks; `FOR UPDATE` in
    a Postgres write, so that each token moves one step at a time.
    """

    for_update = ""

    def __init__(self, now: float) -> None:
        self.now = now
        self.stamp = to_column(now)
        self._next_seq: dict[str, int] = {}
        self._new: set[str] = set()

    @abstractmethod
    def execute(self, sql: str, bindings: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement with `?` placeholders and return its rows."""

    def change(self, sql: str, bindings: tuple[Any, ...] = ()) -> None:
        """Run one statement whose rows are not read; a store may send it without waiting."""
        self.execute(sql, bindings)

    def one(self, sql: str, bindings: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        rows = self.execute(sql, bindings)
        return rows[0] if rows else None

    # tokens

    def token(self, token: str) -> TokenRow | None:
        row = self.one(f"SELECT {_TOKEN} FROM tokens WHERE token = ?{self.for_update}", (token,))
        return None if row is None else token_row(row)

    def token_any_case(self, token: str) -> TokenRow | None:
        row = self.one(
            f"SELECT {_TOKEN} FROM tokens WHERE lower(token) = lower(?){self.for_update}", (token,)
        )
        return None if row is None else token_row(row)

    def insert_token(self, row: TokenRow) -> None:
        self._next_seq[row.token] = 1
        self._new.add(row.token)
        self.change(
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
        self.change(
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
            f"SELECT {_TOKEN} FROM tokens WHERE parent = ? ORDER BY rowid{self.for_update}",
            (parent,),
        )
        return [token_row(row) for row in rows]

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
        return [token_row(row) for row in rows]

    def live_tokens(self) -> int:
        row = self.one("SELECT count(*) FROM tokens WHERE status IN ('active', 'paused')")
        return int(row[0]) if row else 0

    # ledger

    def record(self, token: str, kind: str, data: dict[str, Any], key: str | None = None) -> None:
        """Add a ledger row, numbered after the token's last one.

        The database numbers it, so nothing is read back and a store may send the
        row without waiting; only a token made in this transaction is numbered here.
        """
        seq = self._next_seq.get(token)
        if seq is not None:
            self._next_seq[token] = seq + 1
            self.change(
                "INSERT INTO ledger (token, seq, at, kind, key, data) VALUES (?, ?, ?, ?, ?, ?)",
                (token, seq, self.stamp, kind, key, _json(data)),
            )
            return
        self.change(
            "INSERT INTO ledger (token, seq, at, kind, key, data) "
            "SELECT ?, coalesce(max(seq), 0) + 1, ?, ?, ?, ? FROM ledger WHERE token = ?",
            (token, self.stamp, kind, key, _json(data), token),
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
            "SELECT data ->> 'event', count(*) FROM ledger "
            "WHERE token = ? AND kind = 'event_accepted' GROUP BY 1",
            (token,),
        )
        return {event: count for event, count in rows}

    def visits(self, token: str, state: str) -> int:
        if token in self._new:
            return 0
        row = self.one(
            "SELECT count(*) FROM ledger WHERE token = ? AND kind = 'entered' "
            "AND data ->> 'state' = ?",
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
            "SELECT max(CAST(data ->> 'arrival' AS INTEGER)) FROM ledger "
            "WHERE kind = 'event_deferred'"
        )
        return int(row[0] or 0) if row else 0

    # tasks

    def insert_task(self, token: str, state: str, visit: int) -> int:
        rows = self.execute(
            "INSERT INTO tasks (token, state, visit, status, attempt, queued_at) "
            "VALUES (?, ?, ?, 'queued', 0, ?) RETURNING id",
            (token, state, visit, self.stamp),
        )
        return int(rows[0][0])

    def task(self, task: int) -> TaskRow | None:
        row = self.one(f"SELECT {_TASK} FROM tasks WHERE id = ?", (task,))
        return None if row is None else task_row(row)

    def save_task(self, row: TaskRow) -> None:
        self.change(
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
        return None if row is None else task_row(row)

    def next_queued(self, states: list[str]) -> TaskRow | None:
        """The oldest queued task of these states whose token is active.

        One writer runs at a time on SQLite, so the first such task is free to take.
        """
        row = self.one(next_queued_sql(len(states), ""), tuple(states))
        return None if row is None else task_row(row)

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
        rows = self.execute(
            "INSERT INTO timers (token, state, visit, event, payload, set_at, due_at, status, kind)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?) RETURNING id",
            (token, state, visit, event, _json(payload), self.stamp, to_column(due_at), kind),
        )
        return int(rows[0][0])

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
        self.change("UPDATE timers SET status = ? WHERE id = ?", (status, timer))

    def cancel_timers(self, token: str, kind: str | None = None) -> None:
        if kind is None:
            self.change(
                "UPDATE timers SET status = 'cancelled' WHERE token = ? AND status = 'pending'",
                (token,),
            )
        else:
            self.change(
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
            self.change("UPDATE timers SET due_at = ? WHERE id = ?", (moved, ident))

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
        self.change(
            "INSERT INTO memory (token, state, key, value) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (token, state, key) DO UPDATE SET value = excluded.value",
            (token, state, key, _json(value)),
        )

    def delete_memory(self, token: str, state: str, key: str) -> None:
        self.change(
            "DELETE FROM memory WHERE token = ? AND state = ? AND key = ?", (token, state, key)
        )

    def drop_memory(self, token: str) -> None:
        self.change("DELETE FROM memory WHERE token = ?", (token,))

    # claims

    def last_claim(self, supervisor: str) -> tuple[str | None, int | None, int | None] | None:
        row = self.one(
            "SELECT request, task_id, attempt FROM claims WHERE supervisor = ?", (supervisor,)
        )
        return None if row is None else (row[0], row[1], row[2])

    def put_claim(
        self, supervisor: str, request: str | None, task: int | None, attempt: int | None
    ) -> None:
        self.change(
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
        self.change(
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
