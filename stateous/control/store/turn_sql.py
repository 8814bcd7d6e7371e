"""The SQL of turns: when a queued task is due its turn, and the fairness keys' clocks.

A task's `turn_at` is its place in its queue (`tasks_queue` and `tasks_contract_queue` are
ordered by it), fixed when the task is queued: `stateous.control.turns` says how it is
reckoned. What it needs of the database is here: the head of a queue, and a key's clock,
moved forward and read in one statement, so that two transactions that queue tasks of
one key at once both move it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from stateous.control.store.columns import PREFERRED, Queues, json_text, word
from stateous.control.store.statements import Statements
from stateous.model.vocabulary import TaskStatus

#: The start of the task at the head of a queue: its turn plus its token's priority's due
#: (by the queue's own index, whose condition the first term spells).
_HEAD = (
    "SELECT t.turn_at + CAST(? AS DOUBLE PRECISION) * "
    "(SELECT priority FROM tokens k WHERE k.token = t.token) "
    f"FROM tasks t WHERE coalesce(t.waits_for, t.status) = {word(TaskStatus.QUEUED)} "
    "AND t.state = ? "
    "ORDER BY t.turn_at, t.id LIMIT 1"
)


class TaskTurn(NamedTuple):
    """Where a task queued now stands: its turn, and the label a claim must have to take it
    (`name=value`) until `prefer_until`, if its state `prefers` one."""

    turn_at: float
    prefers: str | None = None
    prefer_until: float | None = None


class TurnSql(Statements):
    """The verbs of `Tx` that turns need."""

    #: How the larger of two numbers is spelled (`max` on SQLite, `greatest` on Postgres).
    greatest = "max"

    def head_start(self, queue: str, age_per_level: float) -> float | None:
        """The start of the task at the head of the queue of state `queue` (its turn, its
        priority taken back out), or None when the queue is empty."""
        row = self.one(_HEAD, (age_per_level, queue))
        return None if row is None or row[0] is None else float(row[0])

    def fair_start(self, queue: str, key: str, start: float, quantum: float) -> float:
        """Move key `key`'s clock in `queue` to `start`, or one `quantum` past its last task's
        start if that is later, and answer where it moved to."""
        row = self.one(
            "INSERT INTO fair_clocks (queue, key, clock) VALUES (?, ?, ?) "
            "ON CONFLICT (queue, key) DO UPDATE SET clock = "
            f"{self.greatest}(excluded.clock, fair_clocks.clock + ?) RETURNING clock",
            (queue, key, start, quantum),
        )
        assert row is not None  # an upsert's RETURNING always gives its row
        return float(row[0])

    def prefer(self, task: int, turn: TaskTurn) -> None:
        """Keep the label that a task queued now is preferred for, if any."""
        if turn.prefers is not None:
            self.change(
                "INSERT INTO preferred (task, label, until) VALUES (?, ?, ?)",
                (task, turn.prefers, turn.prefer_until),
            )

    def taken(self, task: int) -> None:
        """Forget the preference of a task that a claim of preferring states took."""
        self.change("DELETE FROM preferred WHERE task = ?", (task,))

    def preferring(self, queues: Queues) -> tuple[Any, ...]:
        """The bindings of a claim's condition on preferred tasks (`columns.PREFERRED`), the
        claim's time and labels: none for a claim of states without `prefers`."""
        if queues.prefer is None:
            return ()
        return (self.now, json_text(queues.prefer))

    def preferred_elsewhere(self, task: int, queues: Queues) -> bool:
        """Whether a claim of `queues` passes over this queued task, preferred for a label
        the claim has not: the condition of a claim's statement (`columns.PREFERRED`), so
        that a report's `next` grants a task its own token just queued by the same rule."""
        if queues.prefer is None:
            return False
        sql = f"SELECT 1 FROM tasks queued WHERE queued.id = ? AND {PREFERRED}"
        row = self.one(sql.format(listed=self.listed), (task, *self.preferring(queues)))
        return row is None

    def set_turn(self, task: int, turn_at: float) -> None:
        """Give a task queued again (a retry) its new turn."""
        self.change("UPDATE tasks SET turn_at = ? WHERE id = ?", (turn_at, task))
