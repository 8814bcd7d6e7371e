"""The SQL of retention and of the archive: whole token trees that ended, read and removed.

A tree is a top token (one without a parent) and every token below it by `parent`.
It may go once every token of it has ended (completed, failed or cancelled) and none
has moved since the cutoff; a tree with a live token, or a child token alone, is never
touched. Its rows are its tokens, their ledger rows (notes and idempotency keys among
them), their memory, budget, tasks and timers, and every row that names one of its
tasks (`OF_TASK`). A task or a timer is found by the ledger row that made it
(`task_queued` names its task, `timer_set` its timer): neither table indexes every row
by token, and an index more would cost every move a write more.

On Postgres the top tokens are locked `FOR UPDATE SKIP LOCKED`: a tree that a change
holds is left to a later batch, and a change that comes for a tree being removed
waits for this short transaction, then finds no token (every change locks the top
token of its family first). SQLite's single writer needs no lock. Nothing here writes
a ledger row, and nothing decides when to remove: `stateous.control.retention` does.
The largest position removed is kept (`ledger_removed`), so that a control plane that
starts later never hands a removed position out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stateous.control.store.columns import (
    ENTRY_COLUMNS,
    TASK_COLUMNS,
    TOKEN_COLUMNS,
    any_word,
    decode,
    entry_row,
    json_text,
    qualified,
    task_row,
    timer_row,
    token_row,
    word,
)
from stateous.control.store.rows import Entry, TaskRow, TimerRow, TokenRow
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import ENDING, Kind

#: The statuses of a token that ended.
ENDED = tuple(ENDING)
#: The most rows of a plan's token list that one batch removes.
PLAN_ROWS = 500
TIMER_COLUMNS = "id, token, state, visit, event, payload, set_at, due_at, status, kind"

#: Every table whose rows name a task, and the column that names it: its rows go with
#: the task (`tasks` last).
OF_TASK = (
    ("claim_requests", "task_id"),
    ("task_resources", "task"),
    ("preferred", "task"),
    ("budget_reservations", "task"),
    ("tasks", "id"),
)
#: The oldest occurrences of the schedules' history from before a time, at most so many;
#: each schedule's last one and its last skip, which `GET /schedules` shows, left out.
OLD_OCCURRENCES = (
    "SELECT h.schedule, h.at FROM schedule_history h WHERE h.at < ? AND h.at < "
    "(SELECT max(l.at) FROM schedule_history l WHERE l.schedule = h.schedule) "
    "AND (h.outcome <> 'skipped' OR h.at < (SELECT max(s.at) FROM schedule_history s "
    "WHERE s.schedule = h.schedule AND s.outcome = 'skipped')) "
    "ORDER BY h.at LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class Removed:
    """What one batch removed: whole trees, the tokens in them, rows of plans, rows of the
    schedules' history; and, of the trees asked for by name, how many were gone already
    (removed since they were read)."""

    trees: int = 0
    tokens: int = 0
    plan_rows: int = 0
    schedule_rows: int = 0
    gone: int = 0


@dataclass(slots=True)
class Tree:
    """An ended tree, whole: its tokens, the most recently moved first (as `GET /tokens`
    lists them), each with its `moved_at` column; their ledger rows, memory, tasks and
    timers; and `last`, the position of its last ledger row, which tells a tree that
    gained a row since it was read."""

    top: str
    ended_at: str
    last: int
    tokens: list[tuple[TokenRow, str]] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    memory: list[tuple[str, str, str, Any]] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    timers: list[TimerRow] = field(default_factory=list)


def _members(listed: str) -> str:
    """The tokens of the trees whose tops the JSON list `?` names: top, then the row and
    `moved_at` of each token."""
    return (
        "WITH RECURSIVE tree (top, token) AS ("
        f"SELECT token, token FROM tokens WHERE token IN (SELECT value FROM {listed}) "
        "UNION ALL SELECT tree.top, t.token FROM tokens t JOIN tree ON t.parent = tree.token) "
        f"SELECT tree.top, {qualified(TOKEN_COLUMNS, 'k')}, k.moved_at "
        "FROM tree JOIN tokens k ON k.token = tree.token "
        "ORDER BY tree.top, k.moved_at DESC, k.token"
    )


def _made_by(listed: str, kind: Kind, name: str) -> str:
    """The ids that the `kind` ledger rows of the listed tokens name under `name`."""
    return (
        f"SELECT CAST(data ->> '{name}' AS BIGINT) FROM ledger "
        f"WHERE token IN (SELECT value FROM {listed}) AND kind = {word(kind)}"
    )


class RetentionSql(Statements):
    """The retention and archive verbs of `Tx`, over the `execute` of a store's transaction."""

    def remove_ended(self, before: str, limit: int) -> Removed:
        """Remove up to `limit` trees that ended before `before` (a column time), whole,
        and some rows of plans made before it; answer what went."""
        skip = f"{self.for_update} SKIP LOCKED" if self.for_update else ""
        tops: list[str] = []
        for status in ENDED:
            rows = self.execute(
                f"SELECT token FROM tokens WHERE status = {word(status)} AND moved_at < ? "
                f"AND parent IS NULL ORDER BY moved_at LIMIT ?{skip}",
                (before, limit - len(tops)),
            )
            tops += [row[0] for row in rows]
            if len(tops) >= limit:
                break
        trees = self._removable(tops, before)
        removed = self._remove(trees)
        return Removed(
            len(trees),
            removed,
            self._remove_plan_rows(before),
            self._remove_schedule_rows(before),
        )

    def remove_trees(self, trees: dict[str, int], before: str) -> Removed:
        """Remove the trees whose tops `trees` names, each only while it is still ended
        before `before` and its last ledger position is the one given (it gained no row
        since it was read); answer what went, and how many had gone already (their top
        token is no more: a tree that stays is one that changed)."""
        if not trees:
            return Removed()
        listed = json_text(sorted(trees))
        tops = self.execute(
            f"SELECT token FROM tokens WHERE token IN (SELECT value FROM {self.listed}) "
            f"ORDER BY token{self.for_update}",
            (listed,),
        )
        found = self._removable(sorted(trees), before)
        last = self._last_positions(found)
        kept = {top: tokens for top, tokens in found.items() if last.get(top) == trees[top]}
        return Removed(len(kept), self._remove(kept), gone=len(trees) - len(tops))

    def ended_trees(self, before: str, after: tuple[str, str] | None, limit: int) -> list[Tree]:
        """Up to `limit` trees that ended before `before`, whole, in the order they ended,
        starting after the top's (`moved_at`, token) `after`."""
        cursor = "" if after is None else "AND (moved_at > ? OR (moved_at = ? AND token > ?)) "
        rows = self.execute(
            f"SELECT token, moved_at FROM tokens WHERE {any_word('status', ENDED)} "
            f"AND moved_at < ? AND parent IS NULL {cursor}ORDER BY moved_at, token LIMIT ?",
            (before, *(() if after is None else (after[0], *after)), limit),
        )
        members = self._removable([row[0] for row in rows], before)
        trees = {top: Tree(top, ended_at, 0) for top, ended_at in rows if top in members}
        self._fill(trees, members)
        return list(trees.values())

    def _removable(self, tops: list[str], before: str) -> dict[str, list[tuple[Any, ...]]]:
        """The rows (`_members`) of each tree of `tops` whose every token ended before
        `before`."""
        if not tops:
            return {}
        trees: dict[str, list[tuple[Any, ...]]] = {}
        for row in self.execute(_members(self.listed), (json_text(tops),)):
            trees.setdefault(row[0], []).append(row[1:])
        return {
            top: rows
            for top, rows in trees.items()
            if all(row[2] in ENDED and row[-1] < before for row in rows)
        }

    def _last_positions(self, trees: dict[str, list[tuple[Any, ...]]]) -> dict[str, int]:
        """The position of the last ledger row of each tree."""
        last: dict[str, int] = {}
        for top, rows in trees.items():
            found = self.execute(
                f"SELECT coalesce(max(pos), 0) FROM ledger "
                f"WHERE token IN (SELECT value FROM {self.listed})",
                (json_text([row[0] for row in rows]),),
            )
            last[top] = int(found[0][0])
        return last

    def _fill(self, trees: dict[str, Tree], members: dict[str, list[tuple[Any, ...]]]) -> None:
        """Read every row of each tree into it."""
        for top, tree in trees.items():
            rows = members[top]
            tree.tokens = [(token_row(row[:-1]), row[-1]) for row in rows]
            listed = (json_text([row[0] for row in rows]),)
            within = f"token IN (SELECT value FROM {self.listed})"
            entries = self.execute(
                f"SELECT pos, {ENTRY_COLUMNS} FROM ledger WHERE {within} ORDER BY token, seq",
                listed,
            )
            tree.entries = [entry_row(row[1:]) for row in entries]
            tree.last = max((int(row[0]) for row in entries), default=0)
            memory = self.execute(
                f"SELECT token, state, key, value FROM memory WHERE {within} "
                "ORDER BY token, state, key",
                listed,
            )
            tree.memory = [
                (token, state, key, decode(value)) for token, state, key, value in memory
            ]
            tasks = self.execute(
                f"SELECT {TASK_COLUMNS} FROM tasks "
                f"WHERE id IN ({_made_by(self.listed, Kind.TASK_QUEUED, 'task')}) ORDER BY id",
                listed,
            )
            tree.tasks = [task_row(row) for row in tasks]
            timers = self.execute(
                f"SELECT {TIMER_COLUMNS} FROM timers "
                f"WHERE id IN ({_made_by(self.listed, Kind.TIMER_SET, 'timer')}) ORDER BY id",
                listed,
            )
            tree.timers = [timer_row(row) for row in timers]

    def _remove(self, trees: dict[str, list[tuple[Any, ...]]]) -> int:
        """Delete every row of these trees; answer how many tokens went."""
        tokens = [row[0] for rows in trees.values() for row in rows]
        if not tokens:
            return 0
        listed = (json_text(tokens),)
        tasks = _made_by(self.listed, Kind.TASK_QUEUED, "task")
        for table, column in OF_TASK:
            self.change(f"DELETE FROM {table} WHERE {column} IN ({tasks})", listed)
        timers = _made_by(self.listed, Kind.TIMER_SET, "timer")
        self.change(f"DELETE FROM timers WHERE id IN ({timers})", listed)
        self._mark_removed(listed)
        for table in ("memory", "budgets", "ledger", "tokens"):
            self.change(
                f"DELETE FROM {table} WHERE token IN (SELECT value FROM {self.listed})", listed
            )
        # The preferences whose time is over, of tasks that stay (a timeout closed them).
        self.change("DELETE FROM preferred WHERE until <= ?", (self.now,))
        return len(tokens)

    def _mark_removed(self, listed: tuple[str]) -> None:
        """Raise `ledger_removed` to the largest position of the listed tokens' ledger rows,
        about to go: a control plane that starts later counts on after it, so that no stream
        id comes twice even when these were the newest rows (`positions.py`)."""
        self.change(
            "INSERT INTO ledger_removed (id, pos) SELECT 1, coalesce(max(pos), 0) FROM ledger "
            f"WHERE token IN (SELECT value FROM {self.listed}) ON CONFLICT (id) DO UPDATE "
            "SET pos = excluded.pos WHERE ledger_removed.pos < excluded.pos",
            listed,
        )

    def _remove_schedule_rows(self, before: str) -> int:
        """Remove up to `PLAN_ROWS` occurrences of the schedules' history from before
        `before`, but each schedule's last one and its last skip, which `GET /schedules`
        shows; answer how many went."""
        rows = self.execute(OLD_OCCURRENCES, (before, PLAN_ROWS))
        if rows:
            self.change(
                f"DELETE FROM schedule_history WHERE (schedule, at) IN ({OLD_OCCURRENCES})",
                (before, PLAN_ROWS),
            )
        return len(rows)

    def _remove_plan_rows(self, before: str) -> int:
        """Remove up to `PLAN_ROWS` rows of the oldest plan made before `before`, the plan
        itself once its list is empty; answer how many rows went."""
        plan = self.execute(
            "SELECT id FROM plans WHERE made_at < ? ORDER BY made_at LIMIT 1", (before,)
        )
        if not plan:
            return 0
        ident = plan[0][0]
        first, count = self.execute(
            "SELECT min(n), count(*) FROM plan_tokens WHERE plan = ?", (ident,)
        )[0]
        if first is None:
            self.change("DELETE FROM plans WHERE id = ?", (ident,))
            return 1
        self.change("DELETE FROM plan_tokens WHERE plan = ? AND n < ?", (ident, first + PLAN_ROWS))
        return min(int(count), PLAN_ROWS)
