"""How many times a move waits for the Postgres server: each wait is a round trip, which
costs a request more than the work of its statements on a loaded machine.

A round trip is one `Pipeline.sync`: everything sent since the last one goes out,
and its answers come back together. The counts are those of the real store on the
real server; the test only counts the waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stateous.control.store.postgres.pipeline import Pipeline
from stateous.model.wire import Duplicate, ReportBody
from tests.control.support import Backend, Plane, orders, plane_for


class Waits:
    """The round trips of the store's transactions while the test counts them."""

    def __init__(self) -> None:
        self.count = 0

    def of(self, move: Callable[[], Any]) -> int:
        """How many round trips `move` takes."""
        self.count = 0
        move()
        return self.count


@pytest.fixture
def counted(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Plane, Waits]]:
    waits = Waits()
    sync = Pipeline.sync

    def counting(pipeline: Pipeline) -> list[list[tuple[Any, ...]]]:
        waits.count += 1
        return sync(pipeline)

    monkeypatch.setattr(Pipeline, "sync", counting)
    plane = plane_for(orders(), backend, lease=60.0)
    yield plane, waits
    plane.store.close()


def test_a_claim_waits_once_for_its_reads_and_once_for_its_commit(
    counted: tuple[Plane, Waits],
) -> None:
    plane, waits = counted
    engine = plane.engine
    for token in ("A", "B"):
        engine.start(token, {"title": "x"})
    # The first claim of a supervisor writes its claim row; the next ones find it.
    first = engine.claim("box", ["draft"], "req-1")
    assert first is not None
    granted = []
    assert waits.of(lambda: granted.append(engine.claim("box", ["draft"], "req-2"))) == 2
    assert granted[0] is not None and granted[0].token == "B"


def test_a_claim_sent_again_gets_its_grant_and_leaves_the_queue_as_it_was(
    counted: tuple[Plane, Waits],
) -> None:
    engine = counted[0].engine
    for token in ("A", "B"):
        engine.start(token, {"title": "x"})
    first = engine.claim("box", ["draft"], "req-1")
    again = engine.claim("box", ["draft"], "req-1")
    assert first is not None and again is not None
    assert (again.task, again.attempt, again.token) == (first.task, first.attempt, "A")
    after = engine.claim("box", ["draft"], "req-2")
    assert after is not None and after.token == "B" and after.attempt == 1


def test_a_fire_a_start_and_a_report_wait_twice_each(counted: tuple[Plane, Waits]) -> None:
    plane, waits = counted
    engine = plane.engine
    engine.start("warm", {"title": "x"})
    engine.claim("box", ["draft"], "req-0")
    assert waits.of(lambda: engine.start("A", {"title": "x"})) == 2
    assert waits.of(lambda: engine.fire("A", "remind")) == 2
    grant = engine.claim("box", ["draft"], "req-1")
    assert grant is not None and grant.token == "A"
    body = ReportBody(kind="event", event="submitted", supervisor="box")
    # A report's timer may take a block of ids first: at most once in `ID_BLOCK` reports.
    engine.report(grant.task, body)
    engine.start("B", {"title": "x"})
    second = engine.claim("box", ["draft"], "req-2")
    assert second is not None
    assert waits.of(lambda: engine.report(second.task, body)) == 2


def test_a_fire_with_an_idempotency_key_reads_the_key_with_the_token(
    counted: tuple[Plane, Waits],
) -> None:
    plane, waits = counted
    engine = plane.engine
    engine.start("A", {"title": "x"})
    assert waits.of(lambda: engine.fire("A", "remind", key="k-1")) == 2
    kinds = plane.kinds("A")
    again = []
    assert waits.of(lambda: again.append(engine.fire("A", "remind", key="k-1"))) == 2
    assert isinstance(again[0], Duplicate)
    assert plane.kinds("A") == kinds
