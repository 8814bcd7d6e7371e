"""The archive: ended token trees, whole, as lines of JSON, read from the database.

Each line is one tree: its top token's id, when it ended, the position of its last
ledger row, then every token as `GET /tokens/{id}` shows it (the most recently
moved first, as `GET /tokens?parent=` lists children) with its history as `GET
/tokens/{id}/history` shows it, and the tree's tasks, timers and memory. So
`stateous archive show` prints a tree as `token show` printed it before it was
removed, from the file alone. Trees are read a page at a time, each page one read
transaction, oldest ended first; nothing here writes to the database.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from stateous.control.store import Store, TaskRow, TimerRow, Tree, to_iso
from stateous.control.store.rows import from_column
from stateous.control.views import detail, history_entries

#: How many trees one read of the archive takes.
PAGE = 100


def ended_trees(store: Store, before: str, page: int = PAGE) -> Iterator[Tree]:
    """Every tree that ended before `before` (a column time), whole, oldest ended first."""
    after: tuple[str, str] | None = None
    while True:
        trees = _page(store, before, after, page)
        yield from trees
        if len(trees) < page:
            return
        after = (trees[-1].ended_at, trees[-1].top)


def _page(store: Store, before: str, after: tuple[str, str] | None, page: int) -> list[Tree]:
    """One page of trees, in one read transaction."""
    return store.read(lambda tx: tx.ended_trees(before, after, page))


def _moment(moment: float | None) -> str | None:
    return None if moment is None else to_iso(moment)


def _task(task: TaskRow) -> dict[str, Any]:
    return {
        "id": task.id,
        "token": task.token,
        "state": task.state,
        "visit": task.visit,
        "status": task.status,
        "attempt": task.attempt,
        "claimed_by": task.claimed_by,
        "queued_at": to_iso(task.queued_at),
    }


def _timer(timer: TimerRow) -> dict[str, Any]:
    return {
        "id": timer.id,
        "token": timer.token,
        "state": timer.state,
        "visit": timer.visit,
        "event": timer.event,
        "payload": timer.payload,
        "kind": timer.kind,
        "status": timer.status,
        "set_at": to_iso(timer.set_at),
        "due_at": to_iso(timer.due_at),
    }


def tree_line(tree: Tree) -> bytes:
    """One tree as a line of the archive, newline included."""
    entries: dict[str, list[Any]] = {}
    for entry in tree.entries:
        entries.setdefault(entry.token, []).append(entry)
    document = {
        "tree": tree.top,
        "ended_at": to_iso(from_column(tree.ended_at)),
        "last": tree.last,
        "tokens": [
            {
                "token": detail(row),
                "moved_at": _moment(from_column(moved_at)),
                "history": history_entries(entries.get(row.token, [])),
            }
            for row, moved_at in tree.tokens
        ],
        "tasks": [_task(task) for task in tree.tasks],
        "timers": [_timer(timer) for timer in tree.timers],
        "memory": [
            {"token": token, "state": state, "key": key, "value": value}
            for token, state, key, value in tree.memory
        ],
    }
    return msgspec.json.encode(document) + b"\n"
