"""The store's sessions and the serving lock they serve under.

A session opened after the others broke, or after a connection could not be
made, may reach a server that another control plane serves now (a failover, a
partition that outlived the lock's session): none serves before the serving lock
is known to be held. Sessions that stayed open are left to the clock's check,
once a second, rather than checked on each write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg

from stateous.control.errors import DatabaseBusy, NotServing
from stateous.control.store.locks import Lock, TenureLost
from stateous.control.store.postgres.connection import (
    CONNECT_SECONDS,
    Connection,
    Pool,
    Unreachable,
    connect,
)
from stateous.control.store.postgres.ids import Ids


class Sessions:
    """The pool of a store, whose new sessions serve only under the serving lock `lock`
    (none: no check); `fence` refuses the store's later requests once the lock is lost."""

    def __init__(
        self,
        url: str,
        limits: dict[str, int],
        size: int,
        lock: Lock | None,
        ids: Ids,
        fence: Callable[[Exception], None],
    ) -> None:
        self._url = url
        self._limits = limits
        self._lock = lock
        self._ids = ids
        self._fence = fence
        #: A session broke or could not be made: the others may be gone too, and the lock.
        self.lost = False
        self._reconnecting = threading.Lock()
        self.pool = Pool(self._connect, size)

    def _connect(self) -> Connection:
        """A new session for the pool, lent out only once the serving lock is known to be
        held. A connection that cannot be made marks the sessions lost, as a broken one
        does: what cut it may have cut the others, and the lock's, too."""
        try:
            connection = connect(self._url, **self._limits)
        except (Unreachable, psycopg.OperationalError):
            self.lost = True
            raise
        try:
            self.check()
        except BaseException:
            connection.close()
            raise
        return connection

    def check(self) -> None:
        """Make sure the serving lock is still held (`Lock.check`); when it is lost, fence the
        store and raise `NotServing`."""
        if self._lock is None:
            return
        try:
            self._lock.check()
        except TenureLost:
            gone = NotServing("this control plane no longer holds its database")
            self._fence(gone)
            raise gone from None

    def reconnect(self) -> None:
        """After a broken session or a failed connect: drop the idle ones, and make sure the
        serving lock is still held (taken again on the primary of now when its session broke
        too, where the row proves that nobody else served), before any session serves."""
        if not self._reconnecting.acquire(timeout=CONNECT_SECONDS):
            raise DatabaseBusy("the database is being connected to again; try again")
        try:
            if not self.lost:
                return
            self.pool.flush()
            self.check()
            # Ids taken from the sequences of a server that is gone may not have reached
            # the new primary: take new ones there.
            self._ids.forget()
            self.lost = False
        finally:
            self._reconnecting.release()
