"""The supervisor's outbox: `.stateous/outbox.db`, where every message waits until it lands.

A report, a note or a memory write is committed here before it is sent, and
leaves only when the control plane accepts or refuses it, so a network failure
or a killed process loses nothing. (WAL with `synchronous=NORMAL`: a commit does
not wait for the disk, which only an operating system crash could cost.) An OS
lock keeps a second supervisor off the folder. It knows nothing of HTTP: the
supervisor sends what it holds.
"""

from __future__ import annotations

import fcntl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw
import msgspec

from stateous.model.errors import Failure

SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    task INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    token TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('report', 'note', 'memory')),
    body TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


class OutboxTaken(Failure):
    """Another supervisor holds this folder's outbox."""


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
        """Every message that has not landed yet, oldest first."""
        with self._guard:
            rows = self._db.execute(
                "SELECT id, task, attempt, token, kind, body FROM messages ORDER BY id"
            ).fetchall()
        return [
            Message(ident, task, attempt, token, kind, msgspec.json.decode(body))
            for ident, task, attempt, token, kind, body in rows
        ]

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
