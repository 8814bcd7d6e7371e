"""The supervisor's outbox: `.stateous/outbox.db`, where every message waits until it lands.

A report, a note or a memory write is committed here before it is sent, and
leaves only when the control plane accepts or refuses it, so a network failure
or a killed process loses nothing. (WAL with `synchronous=NORMAL`: a commit does
not wait for the disk, which only an operating system crash could cost.) An OS
lock keeps a second supervisor off the folder. It knows nothing of HTTP: the
supervisor sends what it holds. A message that the control plane could never take
(a task id, an attempt, a token or a body of the wrong shape, as an older supervisor
could leave) is dropped with one log line when it is read.
"""

from __future__ import annotations

import fcntl
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import msgspec

from stateous.model.errors import Failure
from stateous.model.vocabulary import MessageKind
from stateous.model.wire import (
    Count,
    MemoryBody,
    NoteBody,
    ReportBody,
    SpendBody,
    TaskId,
    TokenId,
)

log = logging.getLogger("stateous.supervisor")

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    token TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('report', 'note', 'memory', 'spend')),
    body TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


#: The shape of the body of each kind of message, as the control plane reads it.
BODIES: dict[str, type[msgspec.Struct]] = {
    MessageKind.REPORT: ReportBody,
    MessageKind.NOTE: NoteBody,
    MessageKind.MEMORY: MemoryBody,
    MessageKind.SPEND: SpendBody,
}
#: What the log says of a message that is dropped unsent.
DROPPED: dict[str | None, str] = {
    MessageKind.REPORT: "dropped a report of task %r from the outbox, which the control "
    "plane can never take: %s",
    MessageKind.NOTE: "dropped a note of task %r from the outbox, which the control plane "
    "can never take: %s",
    MessageKind.MEMORY: "dropped a memory write of task %r from the outbox, which the "
    "control plane can never take: %s",
    MessageKind.SPEND: "dropped a spend of task %r from the outbox, which the control plane "
    "can never take: %s",
    None: "dropped a message of task %r from the outbox, which the control plane can never "
    "take: %s",
}


class OutboxTaken(Failure):
    """Another supervisor holds this folder's outbox."""


class Unsendable(Exception):
    """A message of the outbox that the control plane can never take; the message says why."""


class _Address(msgspec.Struct):
    """Where a message goes: the ids of its task, attempt and token, as the API has them."""

    task: TaskId
    attempt: Count
    token: TokenId
    kind: MessageKind


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    task: int
    attempt: int
    token: str
    kind: str
    body: dict[str, Any]


class Outbox:
    """The folder's outbox, locked for this process."""

    def __init__(self, folder: Path) -> None:
        place = folder / ".stateous"
        place.mkdir(parents=True, exist_ok=True)
        path = place / "outbox.db"
        self._lock_file = open(place / "outbox.lock", "a")  # noqa: SIM115 - held while running
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise OutboxTaken(
                f"another supervisor runs on {folder} now: stop it, or use another folder"
            ) from None
        self._db = apsw.Connection(str(path))
        self._db.setbusytimeout(30_000)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute(SCHEMA)
        _take_spends(self._db)
        self._guard = threading.Lock()

    def put(self, task: int, attempt: int, token: str, kind: str, body: dict[str, Any]) -> int:
        """Keep a message on disk; return its number in the order of sending."""
        with self._guard:
            self._db.execute(
                "INSERT INTO messages (task, attempt, token, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (task, attempt, token, kind, msgspec.json.encode(body).decode(), time.time()),
            )
            return int(self._db.last_insert_rowid())

    def pending(self) -> list[Message]:
        """Every message that has not landed yet, oldest first; drop those that never can."""
        with self._guard:
            rows: list[tuple[Any, ...]] = self._db.execute(
                "SELECT id, task, attempt, token, kind, body FROM messages ORDER BY id"
            ).fetchall()
        return [message for row in rows if (message := self._sendable(row)) is not None]

    def tasks(self) -> list[int]:
        """The tasks that have messages here, the one of the oldest message first."""
        with self._guard:
            rows: list[tuple[Any, ...]] = self._db.execute(
                "SELECT task FROM messages GROUP BY task ORDER BY min(id)"
            ).fetchall()
        return [task for (task,) in rows]

    def next_of(self, task: int) -> Message | None:
        """The oldest message of `task`, read as it is sent; drop those that never can be."""
        while True:
            with self._guard:
                # `+task`: SQLite (built with STAT4) would weigh each new value of `task`
                # in its plan and prepare the statement again at every call, which cost
                # three times the rest of the statement; the plan is the same for any task.
                row = self._db.execute(
                    "SELECT id, task, attempt, token, kind, body FROM messages "
                    "WHERE +task = ? ORDER BY id LIMIT 1",
                    (task,),
                ).fetchone()
            if row is None:
                return None
            if (message := self._sendable(row)) is not None:
                return message

    def _sendable(self, row: tuple[Any, ...]) -> Message | None:
        """The row as a message, or None when the control plane could never take it (the
        row is dropped, with one log line)."""
        try:
            return _message(*row)
        except Unsendable as ex:
            log.warning(DROPPED.get(row[4], DROPPED[None]), row[1], ex)
            self.remove(row[0])
            return None

    def reporting(self) -> dict[int, int]:
        """The tasks whose report waits here, with the attempt it reports: the supervisor
        still holds them until it lands."""
        with self._guard:
            rows: list[tuple[Any, ...]] = self._db.execute(
                "SELECT task, attempt FROM messages WHERE kind = ?", (MessageKind.REPORT,)
            ).fetchall()
        return {task: attempt for task, attempt in rows}

    def replace(self, message: int, kind: str, body: dict[str, Any]) -> None:
        """Turn a message into another one in the same place of the order."""
        with self._guard:
            self._db.execute(
                "UPDATE messages SET kind = ?, body = ? WHERE id = ?",
                (kind, msgspec.json.encode(body).decode(), message),
            )

    def remove(self, message: int) -> None:
        with self._guard:
            self._db.execute("DELETE FROM messages WHERE id = ?", (message,))

    def drop_attempt(self, task: int, attempt: int) -> int:
        """Drop the messages of an attempt that is lost; return how many."""
        with self._guard:
            self._db.execute("DELETE FROM messages WHERE task = ? AND attempt = ?", (task, attempt))
            return int(self._db.changes())

    def close(self) -> None:
        self._db.close()
        fcntl.flock(self._lock_file, fcntl.LOCK_UN)
        self._lock_file.close()


def _take_spends(db: apsw.Connection) -> None:
    """Let an outbox made before spends existed keep them too: its table is made anew with
    the kinds of today, its messages copied in their order."""
    made = db.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()
    if made is None or "'spend'" in str(made[0]):
        return
    with db:
        db.execute("ALTER TABLE messages RENAME TO messages_before")
        db.execute(SCHEMA)
        db.execute("INSERT INTO messages SELECT * FROM messages_before")
        db.execute("DROP TABLE messages_before")


def _message(ident: int, task: Any, attempt: Any, token: Any, kind: Any, body: Any) -> Message:
    """A row as a message; raise Unsendable for one that the control plane cannot take."""
    try:
        msgspec.convert({"task": task, "attempt": attempt, "token": token, "kind": kind}, _Address)
        data = msgspec.json.decode(body)
        msgspec.convert(data, BODIES[kind])
    except msgspec.ValidationError as ex:
        raise Unsendable(str(ex)) from None
    except (msgspec.DecodeError, TypeError):
        raise Unsendable("its body is not JSON") from None
    except RecursionError:
        raise Unsendable("its body nests too deep") from None
    return Message(ident, task, attempt, token, kind, data)
