"""One control plane per database: the hold.

A control plane holds its database two ways. A lock that lives exactly as long
as the process (an OS lock on the SQLite file; on Postgres an advisory lock on a
connection of its own, in `postgres.py`), so a second `serve` is refused at once
and a new one can start at once after a kill -9. The `control_plane` row names
the holder as `host:pid:id`; the clock checks it and the lock every second, so a
holder that finds another name there, or lost its lock, knows it lost the database.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import socket
from pathlib import Path
from typing import BinaryIO, Protocol

from stateous.control.store import ControlRow, Store, Tx
from stateous.model.errors import Failure


class HoldRefused(Failure):
    """Another control plane serves this database now."""


class HoldLost(Exception):
    """This control plane no longer holds its database; `cause` says why in a few words."""

    def __init__(
        self, message: str, cause: str = "another control plane took the database"
    ) -> None:
        super().__init__(message)
        self.cause = cause


class Lock(Protocol):
    """The lock that keeps a second control plane off a database while this process lives."""

    def take(self) -> None: ...
    def check(self) -> None: ...
    def release(self) -> None: ...


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
            handle = open(self.path, "ab")  # noqa: SIM115 - held open for the life of the process
        except OSError as ex:
            raise HoldRefused(f"cannot open the database {self.path}: {ex.strerror}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise HoldRefused("another control plane serves this database; stop it first") from None
        self._file = handle

    def check(self) -> None:
        """An OS lock cannot be lost while its process lives: nothing to check."""

    def release(self) -> None:
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


class Hold:
    """This control plane's claim on the `control_plane` row."""

    #: How often the row's `since` is written again, in seconds.
    RENEW_EVERY = 10.0

    def __init__(self, store: Store, lock: Lock) -> None:
        self.store = store
        self.lock = lock
        self.name = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._renewed = 0.0

    def take(self, structure: str, checksum: str) -> None:
        """Write this control plane and the graph on record into the row."""

        def operation(tx: Tx) -> None:
            tx.put_control(ControlRow(structure, checksum, self.name, tx.now))
            self._renewed = tx.now

        self.store.write(operation)

    def renew(self) -> None:
        """Check the lock, and that the row still names this control plane; refresh `since`
        now and then."""
        self.lock.check()

        def operation(tx: Tx) -> None:
            row = tx.control()
            if row is None or row.serving != self.name:
                holder = "nobody" if row is None or row.serving is None else row.serving
                raise HoldLost(f"another control plane took this database ({holder} holds it)")
            if tx.now - self._renewed >= self.RENEW_EVERY:
                tx.put_control(ControlRow(row.structure, row.checksum, self.name, tx.now))
                self._renewed = tx.now

        self.store.write(operation)

    def give_up(self) -> None:
        """Clear the row's holder at a graceful stop."""

        def operation(tx: Tx) -> None:
            row = tx.control()
            if row is not None and row.serving == self.name:
                tx.put_control(ControlRow(row.structure, row.checksum, None, row.since))

        self.store.write(operation)
