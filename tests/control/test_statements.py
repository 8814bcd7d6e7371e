"""What SQLite does with the statements of the control plane's moves: each is compiled once
and run again for new values as it is, and none builds a temporary table.

Both cost a move far more than running its statement: a statement compiled again at every
new value (as SQLite does when a plan may depend on a bound value) took ten times as long as
one run, and every `x IN (three words or more)` of a CHECK or of a partial index's condition,
and every `RETURNING`, builds and drops a table at each insert or update of a row.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from stateous.control import clock
from stateous.control.store.columns import LISTED, NEXT_QUEUED
from stateous.control.store.lease_sql import renewal_sql
from stateous.model.wire import ReportBody
from tests.control.support import Plane, open_backend, orders, plane_for

HOUR = 3600.0
#: The statements that cancel a token's pending timers (all of them, or those of a kind).
CANCELLING = {
    "UPDATE timers SET status = 'cancelled' WHERE token = ? AND status = 'pending'",
    "UPDATE timers SET status = 'cancelled' WHERE token = ? AND status = 'pending' AND kind = ?",
}


class Watch:
    """Every statement that SQLite compiles or runs on the connections opened while it lasts."""

    def __init__(self) -> None:
        #: How many times SQLite asked whether a statement may read or write something: it
        #: asks while it compiles a statement, never while it runs one.
        self.compilations = 0
        self.run: set[str] = set()

    def hook(self, connection: apsw.Connection) -> None:
        connection.authorizer = self.authorize
        connection.trace_v2(apsw.SQLITE_TRACE_STMT, self.trace)

    def authorize(self, *_: object) -> int:
        self.compilations += 1
        return apsw.SQLITE_OK

    def trace(self, event: dict) -> None:
        self.run.add(event["sql"])


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[Plane, Watch]]:
    watch = Watch()
    apsw.connection_hooks.append(watch.hook)
    try:
        with open_backend("sqlite", tmp_path) as backend:
            plane = plane_for(orders(), backend, lease=60.0)
            watch.run.clear()  # the schema made, the store opened
            try:
                yield plane, watch
            finally:
                plane.store.close()
    finally:
        apsw.connection_hooks.remove(watch.hook)


def moves(plane: Plane, round_: int) -> None:
    """A token through each kind of move: start, fire, claim, heartbeat, note, memory,
    report (an event, waiting, a failed attempt), pause, resume, cancel, a lease that ends
    and a timeout that fires; and the reads of a token and its history."""
    engine, box = plane.engine, f"box-{round_}"
    worked, paused, cancelled, timed = (f"R{round_}-{name}" for name in ("w", "p", "c", "t"))
    for token in (worked, paused, cancelled, timed):
        engine.start(token, {"title": "x"})
    engine.fire(worked, "remind")
    engine.cancel(cancelled)
    engine.pause(paused)
    engine.fire(paused, "remind")
    engine.resume(paused)
    grant = engine.claim(box, ["draft"], f"{box}-1")
    assert grant is not None and grant.token == timed
    engine.heartbeat(box, [grant.task])
    engine.note(grant.task, "working")
    engine.memory(grant.task, "session", {"id": round_})
    engine.report(grant.task, ReportBody(kind="event", event="submitted", supervisor=box))
    failing = engine.claim(box, ["draft"], f"{box}-2")
    assert failing is not None and failing.token == worked
    engine.report(failing.task, ReportBody(kind="failed", error="boom", supervisor=box))
    waiting = engine.claim(box, ["draft"], f"{box}-3")
    assert waiting is not None and waiting.token == paused
    engine.report(waiting.task, ReportBody(kind="waiting", supervisor=box))
    engine.fire(paused, "submitted")
    # A claimed review's lease ends, and the timeout of the other review fires.
    assert engine.claim(box, ["review"], f"{box}-4") is not None
    plane.clock.now += 2 * HOUR
    ended, fired = clock.tick(engine)
    assert ended == 1 and fired >= 1
    engine.history(worked)
    engine.get(timed)


def explained(connection: apsw.Connection, sql: str) -> list[tuple]:
    """The program that SQLite compiles `sql` to, one instruction a row (its `?` unbound:
    the store's statements hold no `?` in their text but their parameters)."""
    return connection.execute(f"EXPLAIN {sql}", (None,) * sql.count("?")).fetchall()


def test_a_move_made_again_with_other_values_compiles_no_statement_again(
    watched: tuple[Plane, Watch],
) -> None:
    plane, watch = watched
    engine = plane.engine

    def moved(token: str) -> None:
        engine.start(token, {"title": "x"})
        engine.fire(token, "remind")
        grant = engine.claim("box", ["draft"], f"req-{token}")
        assert grant is not None and grant.token == token
        engine.report(grant.task, ReportBody(kind="event", event="submitted", supervisor="box"))
        engine.get(token)
        engine.history(token)

    moved("first")
    assert watch.compilations > 0
    watch.compilations = 0
    moved("second")
    assert watch.compilations == 0


def test_no_statement_of_a_move_builds_a_temporary_table(
    watched: tuple[Plane, Watch], tmp_path: Path
) -> None:
    plane, watch = watched
    moves(plane, 1)
    connection = apsw.Connection(str(tmp_path / "db.sqlite"))
    temporary = {
        sql for sql in watch.run if any("Ephemeral" in row[1] for row in explained(connection, sql))
    }
    connection.close()
    assert len(watch.run) > 30
    # A claim takes the oldest of the heads of its states' queues: it sorts those, one row
    # for each state it lists, never the queues. An UPDATE that changes the condition of the
    # index it finds its rows by collects them first: a token's few pending timers. A
    # heartbeat looks its supervisor's tasks up in the list it names (1,000 at most).
    assert temporary == {NEXT_QUEUED, *CANCELLING, renewal_sql(LISTED)}
