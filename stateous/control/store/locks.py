"""The serving lock: one control plane per database, for as long as its process lives.

A lock that ends with its process (an OS lock on the SQLite file here; on
Postgres an advisory lock on a connection of its own, in `postgres/lock.py`)
keeps a second `serve` off the database at once, and lets a new one start at
once after a kill -9.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import BinaryIO, Protocol

from stateous.model.errors import Failure


class TenureRefused(Failure):
    """Another control plane serves this database now."""


class TenureLost(Exception):
    """This control plane no longer holds its database; `cause` says why in a few words."""

    def __init__(
        self, message: str, cause: str = "another control plane took the database"
    ) -> None:
        super().__init__(message)
        self.cause = cause


class Lock(Protocol):
    """The lock that keeps a second control plane off a database while this process lives."""

    def take(self) -> None:
        """Take the lock, or raise `TenureRefused`."""

    def check(self) -> None:
        """Raise `TenureLost` when the lock is no longer held."""

    def serve_as(self, holder: str) -> None:
        """Learn the name that the `control_plane` row gives this control plane: a lock
        that must be taken again is kept only where the row still shows it."""

    def release(self) -> None: ...


def private(path: str, flags: int) -> int:
    """Open `path` as `open` would, but make a new file readable by its owner only (0600):
    the database holds the webhooks' HMAC keys as they are."""
    return os.open(path, flags, 0o600)


class FileLock:
    """An exclusive OS lock on the database file itself, given up when the process ends.

    It is taken on the file, not on its name, so a symlink or a hard link to the
    same database meets the same lock. SQLite's own locks are of another kind
    (fcntl byte ranges) and do not interfere with it.
    """

    def __init__(self, database: str) -> None:
        self.path = Path(database)
        self._file: BinaryIO | None = None

    def take(self) -> None:
        try:
            handle = open(self.path, "ab", opener=private)  # noqa: SIM115 - held open for the life of the process
        except OSError as ex:
            raise TenureRefused(f"cannot open the database {self.path}: {ex.strerror}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise TenureRefused(
                "another control plane serves this database; stop it first"
            ) from None
        self._file = handle

    def check(self) -> None:
        """An OS lock cannot be lost while its process lives: nothing to check."""

    def serve_as(self, holder: str) -> None:
        """It is never taken again: the name is not needed."""

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None
