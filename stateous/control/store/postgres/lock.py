"""The serving lock on Postgres: an advisory lock on a connection of its own.

It ends with its connection, so a new control plane can start at once after the
holder's process dies (or, through the keepalives of both ends, about a minute
after its computer is gone). Its key is the schema's, so two schemas of one
database can each have a control plane.
"""

from __future__ import annotations

from contextlib import suppress

import psycopg

from stateous.control.store.locks import HoldLost, HoldRefused
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
            raise HoldRefused("another control plane serves this database; stop it first")
        self._connection = connection

    def check(self) -> None:
        """Raise `HoldLost` when the connection that holds the lock is gone."""
        if self._connection is None:
            return
        try:
            self._connection.execute("SELECT 1")
        except psycopg.Error as ex:
            cause = "the connection that held the database was lost"
            raise HoldLost(f"{cause} ({first_line(ex)})", cause) from None

    def release(self) -> None:
        for connection in (self._connection, self._asking):
            if connection is not None:
                with suppress(psycopg.Error):
                    connection.close()
        self._connection = self._asking = None
