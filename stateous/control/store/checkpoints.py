"""Checkpoints of a SQLite store's WAL, run beside the writes instead of inside one.

SQLite's own automatic checkpoint runs in the connection that commits, after its
commit: with a big database it copies thousands of pages while every write waits.
Here the writing connection only reports, after each commit, how many frames its
WAL holds (SQLite's WAL hook, which replaces the automatic checkpoint); past
`pages` it wakes a thread of its own with its own connection. That thread copies
the WAL into the database with PASSIVE checkpoints, which wait for no reader and
no writer, in rounds while the writes go on: each round copies what the last
left, so the rounds shrink. Once what is left is at most `LAST_FRAMES` frames, it
pauses writes for one last round of those few frames: then the whole WAL is in the
database and no write is under way, so the next write starts the WAL over from
its beginning (truncated to the size of `pages` frames), and the file stays
bounded. (SQLite starts the WAL over only in a write that began once the whole
WAL was copied; under a steady load of writes, one is always under way.) A reader that holds an
old snapshot (a backup in progress) keeps its frames from being copied; the
rounds then stop without the pause and try again a little later. After `ROUNDS`
rounds the writes wait for the rest anyway, which bounds the WAL when the writes
outrun the copy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

import apsw

log = logging.getLogger("stateous.control.store")

#: The WAL frames (pages) past which a checkpoint starts: 16 MiB with 4 KiB pages.
CHECKPOINT_PAGES = 4000
#: The most frames the last round copies while writes wait.
LAST_FRAMES = 64
#: The most rounds beside the writes before the last one.
ROUNDS = 8
#: The pause before trying again after rounds that could not copy everything, in seconds.
RETRY_SECONDS = 0.1


class Checkpointer:
    """A thread that checkpoints the WAL of one database on its own `connection`.

    `pause` is a context manager during which no write runs; `pages` the size of
    the WAL in frames that wakes it.
    """

    def __init__(
        self,
        connection: apsw.Connection,
        pause: Callable[[], AbstractContextManager[None]],
        pages: int = CHECKPOINT_PAGES,
    ) -> None:
        self.connection = connection
        self.pause = pause
        self.pages = pages
        #: How many times the whole WAL was copied into the database.
        self.completed = 0
        self._due = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="stateous-checkpointer", daemon=True
        )
        self._thread.start()

    def committed(self, connection: apsw.Connection, name: str, frames: int) -> int:
        """The writing connection's WAL hook, called after each commit: wake the thread
        once the WAL holds `pages` frames or more. Cheap, since it runs in every commit."""
        if frames >= self.pages:
            self._due.set()
        return apsw.SQLITE_OK

    def close(self) -> None:
        """Stop the thread (after the round in progress) and close its connection."""
        self._stopped.set()
        self._due.set()
        self._thread.join()
        self.connection.close()

    def _loop(self) -> None:
        while True:
            self._due.wait()
            if self._stopped.is_set():
                return
            self._due.clear()
            try:
                done = self.checkpoint()
            except apsw.Error as ex:
                log.warning("a checkpoint failed (%s); a later commit tries again", ex)
                done = False
            if not done:
                # A reader holds old frames: give it time rather than try at every commit.
                self._stopped.wait(RETRY_SECONDS)

    def checkpoint(self) -> bool:
        """Copy the WAL into the database: rounds beside the writes, then the last few
        frames with writes paused. True when the whole WAL is in the database.

        After `ROUNDS` rounds the writes wait for the rest anyway: that bounds the
        WAL when the writes outrun the copy.
        """
        before = -1
        for _ in range(ROUNDS):
            counts = self._round()
            if counts is None:
                return False
            left, copied = counts
            if left <= LAST_FRAMES:
                break
            if copied <= before:
                # Nothing more could be copied: a reader holds the frames that are left.
                return False
            before = copied
        # Even with nothing left, a write that began before this round may be appending:
        # only a round while no write runs lets the next write start the WAL over.
        with self.pause():
            counts = self._round()
        if counts is None:
            return False
        left = counts[0]
        if left == 0:
            self.completed += 1
        return left == 0

    def _round(self) -> tuple[int, int] | None:
        """One PASSIVE checkpoint: the frames it left in the WAL and those copied so far;
        None when another connection's checkpoint runs now."""
        try:
            frames, copied = self.connection.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.BusyError:
            return None
        return frames - copied, copied
