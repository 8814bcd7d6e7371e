"""The serving lock on Postgres: an advisory lock on a connection of its own.

It ends with its connection, so a new control plane can start at once after the
holder's process dies (or, through the keepalives of both ends, about a minute
after its computer is gone). Its key is the schema's, so two schemas of one
database can each have a control plane.

An advisory lock is not replicated: after a failover the new primary holds none,
and the lock's connection is gone with the old one. The lock is then taken again
on whichever host the URL finds as the primary, and kept only when the
`control_plane` row there still names this control plane: another that served
meanwhile would have written its own name.
"""

from __future__ import annotations

import logging
import selectors
import threading
import time
from contextlib import suppress

import psycopg
from psycopg.pq import ExecStatus

from stateous.control.errors import DatabaseBusy
from stateous.control.store.locks import TenureLost, TenureRefused
from stateous.control.store.migrations import SchemaError
from stateous.control.store.postgres.connection import (
    Connection,
    Unreachable,
    connect,
    first_line,
)

log = logging.getLogger("stateous.control.store")

#: The first key of the advisory locks of Stateous (the letters "STAT").
LOCK_CLASS = 0x53544154
#: How long the clock's check waits for the lock's connection to answer, in seconds.
CHECK_SECONDS = 5.0
#: Why a lock taken again is given up: the row names another control plane, or none.
SERVED_MEANWHILE = "another control plane served the database while this one could not reach it"


class AdvisoryLock:
    """The lock of `url`'s schema, held by a connection that lives as long as this process.

    A refused `take` keeps its connection for the next one, so a standby that asks
    again and again does so on one connection.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: Connection | None = None
        self._asking: Connection | None = None
        #: The name on the `control_plane` row while this control plane serves.
        self._holder: str | None = None
        #: Why the lock is lost for good, once it is.
        self._lost: TenureLost | None = None
        #: The clock and a request that met a dead session may both check.
        self._checking = threading.Lock()

    def serve_as(self, holder: str) -> None:
        self._holder = holder

    def take(self) -> None:
        connection = self._asking or connect(self.url)
        self._asking = None
        try:
            schema, taken = connection.execute(
                "SELECT current_schema(), pg_try_advisory_lock(%s, hashtext(current_schema()))",
                (LOCK_CLASS,),
            ).fetchone() or (None, None)
        except psycopg.Error as ex:
            connection.close()
            raise Unreachable(f"the database did not answer: {first_line(ex)}") from None
        if schema is None:
            connection.close()
            raise SchemaError(
                "no schema named by the connection's search_path exists; create one or name another"
            )
        if not taken:
            self._asking = connection
            raise TenureRefused("another control plane serves this database; stop it first")
        self._connection = connection

    def check(self) -> None:
        """Raise `TenureLost` when another control plane took the lock or served meanwhile.
        When only the lock's connection is gone (the database restarted or failed over, a
        proxy cut it), take the lock again on a new one, and keep it only when the row
        still names this control plane. While no primary can be reached, raise
        `DatabaseBusy`."""
        with self._checking:
            if self._lost is not None:
                raise self._lost
            if self._connection is None:
                return
            with suppress(psycopg.Error):
                if answers(self._connection, CHECK_SECONDS):
                    return
            with suppress(psycopg.Error):
                self._connection.close()
            try:
                self.take()
                self._prove()
            except TenureRefused:
                cause = "another control plane took the database while this one could not reach it"
                self._lost = TenureLost(cause, cause)
                raise self._lost from None
            except (psycopg.Error, Unreachable) as ex:
                raise DatabaseBusy(f"the database cannot be reached ({first_line(ex)})") from None

    def _prove(self) -> None:
        """Keep the lock just taken again only if the row names this control plane: a
        control plane that served meanwhile, gone now or not, wrote its own name there."""
        assert self._connection is not None
        if self._holder is None:
            return
        try:
            row = self._connection.execute("SELECT serving FROM control_plane").fetchone()
        except psycopg.Error:
            self.release()
            raise
        if row is None or row[0] != self._holder:
            self.release()
            self._lost = TenureLost(SERVED_MEANWHILE, SERVED_MEANWHILE)
            raise self._lost
        info = self._connection.info
        log.info(
            "took the serving lock again on %s:%s; the control_plane row still names this "
            "control plane",
            info.host,
            info.port,
        )

    def release(self) -> None:
        for connection in (self._connection, self._asking):
            if connection is not None:
                with suppress(psycopg.Error):
                    connection.close()
        self._connection = self._asking = None


def answers(connection: Connection, seconds: float) -> bool:
    """Whether `connection` answers a `SELECT 1` within `seconds`.

    The wait is bounded here, not by the server or TCP: a server process that stopped,
    or a network that drops every packet, would keep it waiting until TCP gives up,
    minutes later, while another control plane may take the lock.
    """
    pgconn = connection.pgconn
    deadline = time.monotonic() + seconds
    pgconn.send_query(b"SELECT 1")
    unsent = pgconn.flush()
    with selectors.DefaultSelector() as selector:
        selector.register(pgconn.socket, selectors.EVENT_READ)
        while unsent or pgconn.is_busy():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if unsent:
                selector.modify(pgconn.socket, selectors.EVENT_READ | selectors.EVENT_WRITE)
            for _, events in selector.select(left):
                if events & selectors.EVENT_WRITE:
                    unsent = pgconn.flush()
                    if not unsent:
                        selector.modify(pgconn.socket, selectors.EVENT_READ)
                if events & selectors.EVENT_READ:
                    pgconn.consume_input()
    results = []
    while (result := pgconn.get_result()) is not None:
        results.append(result.status)
    return results == [ExecStatus.TUPLES_OK]
