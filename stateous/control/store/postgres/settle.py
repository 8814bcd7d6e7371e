"""A COMMIT whose answer never came: learn from the database whether it was kept.

A connection can break after the COMMIT left and before its answer arrived. The
change is then either kept or not, and the caller must not be told "try again"
if it was kept, nor "done" if it was not. The first ledger row of the
transaction tells: once the server session that ran it is over (waited for, or
ended if it waits inside the transaction, as one whose COMMIT never arrived
does), the row is there exactly when the change was kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from stateous.control.errors import DatabaseBusy, NotServing, OutcomeUnknown
from stateous.control.store.postgres.connection import Connection, Pool, Unreachable, first_line
from stateous.control.store.watchers import Watcher

log = logging.getLogger("stateous.control.store")

#: How long a session whose COMMIT went unanswered may take to end, and the database to be
#: reached again to tell, in seconds.
SETTLE_SECONDS = 10.0
#: The pause between two tries to reach the database, in seconds.
RETRY_SECONDS = 0.25


@dataclass(frozen=True, slots=True)
class FirstEntry:
    """The first ledger row a transaction wrote; `seq` is None when the database numbered it."""

    token: str
    seq: int | None
    at: str
    kind: str
    data: str


class FirstRow(Watcher):
    """Keeps the first ledger row that a transaction writes, whose time is `at`."""

    __slots__ = ("at", "entry")

    def __init__(self, at: str) -> None:
        self.at = at
        self.entry: FirstEntry | None = None

    def recorded(self, token: str, seq: int | None, kind: str, data: str) -> None:
        if self.entry is None:
            self.entry = FirstEntry(token, seq, self.at, kind, data)


class Unanswered(Exception):
    """The COMMIT of a transaction, sent on the server session `session`, went unanswered;
    `result` and `kept` are what its operation answered or kept to raise."""

    def __init__(
        self,
        first: FirstEntry | None,
        session: tuple[int, Any],
        result: Any,
        kept: Exception | None,
    ) -> None:
        super().__init__("a COMMIT went unanswered")
        self.first, self.session, self.result, self.kept = first, session, result, kept


def settle(pool: Pool, lost: Unanswered) -> Any:
    """Answer as the database decided: the operation's own answer when the change was kept,
    `DatabaseBusy` when it was not, `OutcomeUnknown` when the database cannot say now, or
    never can: a change that left no ledger row (a plan, a schedule, a heartbeat)."""
    first = lost.first
    if first is None:
        raise OutcomeUnknown(
            "the connection to the database was lost as a change was being committed, and "
            "the change leaves no row in any token's history to look for: it may have been "
            "kept; look before sending it again"
        )
    try:
        with reached(pool) as connection:
            ended(connection, lost.session)
            rows = connection.execute(
                "SELECT 1 FROM ledger WHERE token = %s AND at = %s AND kind = %s "
                "AND data::text = %s AND seq = coalesce(%s, seq)",
                (first.token, first.at, first.kind, first.data, first.seq),
            ).fetchall()
    except (psycopg.Error, Unreachable, DatabaseBusy, NotServing) as ex:
        # Not serving now does not say whether the COMMIT was kept: `not_serving` would
        # let a client send the change again to another control plane.
        raise OutcomeUnknown(
            "the connection to the database was lost as a change was being committed, "
            f"and the database cannot say now whether it was ({first_line(ex)}); look "
            "at the token's history before sending the request again"
        ) from None
    if not rows:
        raise DatabaseBusy(
            "the connection to the database was lost before the change was committed; "
            "nothing was written; try again"
        )
    log.info("a COMMIT went unanswered; the database kept it")
    if lost.kept is not None:
        raise lost.kept
    return lost.result


@contextmanager
def reached(pool: Pool) -> Iterator[Connection]:
    """A new connection to the database, tried for up to `SETTLE_SECONDS`: a COMMIT that
    went unanswered because the primary died is settled on the standby it fails over to."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            with pool.connection() as connection:
                yield connection
                return
        except Unreachable:
            if time.monotonic() > deadline:
                raise
        time.sleep(RETRY_SECONDS)


def ended(connection: psycopg.Connection[Any], session: tuple[int, Any]) -> None:
    """Wait until the transaction of a server session (its process id and start) is over:
    the session has ended or waits outside a transaction. A session that waits inside a
    transaction, as one whose COMMIT never arrived does, is ended; one that runs on, as
    one still committing does, is waited for."""
    deadline = time.monotonic() + SETTLE_SECONDS
    pid, started = session
    while True:
        row = connection.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s AND backend_start = %s",
            (pid, started),
        ).fetchone()
        if row is None or row[0] == "idle":
            return
        if (row[0] or "").startswith("idle in transaction"):
            log.info("ending server session %s: its COMMIT did not arrive", pid)
            connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
        if time.monotonic() > deadline:
            raise DatabaseBusy(f"the server session {pid} did not end")
        time.sleep(0.02)
