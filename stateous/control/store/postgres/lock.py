"""The serving lock on Postgres: an advisory lock on a connection of its own.

It ends with its connection, so a new control plane can start at once after the
holder's process dies (or, through the keepalives of both ends, about a minute
after its computer is gone). Its key is the schema's, so two schemas of one
database can each have a control plane.
"""

from __future__ import annotations

from contextlib import suppress

import psycopg

from stateous.control.errors import DatabaseBusy
from stateous.control.store.locks import TenureLost, TenureRefused
from stateous.control.store.migrations import SchemaError
from stateous.control.store.postgres.connection import (
    Connection,
    Unreachable,
    connect,
    first_line,
)

#: The first key of the advisory locks of Stateous (the letters "STAT").
LOCK_CLASS = 0x53544154


class AdvisoryLock:
    """The lock of `url`'s schema, held by a connection that lives as long as this process.

    A refused `take` keeps its connection for the next one, so a standby that asks
    again and again does so on one connection.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._connection: Connection | None = None
        self._asking: Connection | None = None

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
        """Raise `TenureLost` when another control plane took the lock. When only the lock's
        connection is gone (the database restarted, a proxy cut it), take the lock again
        on a new one: the tenure's row then shows whether anybody served in between. While
        the database cannot be reached, raise `DatabaseBusy`."""
        if self._connection is None:
            return
        try:
            self._connection.execute("SELECT 1")
            return
        except psycopg.Error:
            with suppress(psycopg.Error):
                self._connection.close()
        try:
            self.take()
        except TenureRefused:
            cause = "another control plane took the database while this one could not reach it"
            raise TenureLost(cause, cause) from None
        except (psycopg.Error, Unreachable) as ex:
            raise DatabaseBusy(f"the database cannot be reached ({first_line(ex)})") from None

    def release(self) -> None:
        for connection in (self._connection, self._asking):
            if connection is not None:
                with suppress(psycopg.Error):
                    connection.close()
        self._connection = self._asking = None
