"""Writes that start from the state this control plane committed last: the database proves it.

Each test changes a token from a connection of its own, behind the control
plane's back, or races writes on one token, and checks that every move follows
what the database holds.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from stateous.control.errors import AttemptOver
from stateous.model.wire import ReportBody
from tests.control.support import Backend, Plane, orders, plane_for
from tests.control.test_races import together


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(orders(), backend)
    yield served
    served.store.close()


def test_a_token_changed_elsewhere_moves_from_what_the_database_holds(
    plane: Plane, url: str
) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "remind")
    with psycopg.connect(url, autocommit=True) as other:
        other.execute(
            'UPDATE tokens SET context = \'{"title":"changed","amount":0,"tags":[]}\' '
            "WHERE token = 'ORDER-1'"
        )

    view = plane.engine.fire("ORDER-1", "remind")

    assert view.context["title"] == "changed"  # type: ignore[union-attr]
    assert plane.engine.get("ORDER-1").context["title"] == "changed"


def test_a_ledger_row_written_elsewhere_is_followed_not_overwritten(plane: Plane, url: str) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "remind")
    with psycopg.connect(url, autocommit=True) as other:
        other.execute(
            "INSERT INTO ledger (token, seq, at, kind, data) SELECT token, max(seq) + 1, "
            "max(at), 'note', '{\"text\":\"from elsewhere\"}' FROM ledger "
            "WHERE token = 'ORDER-1' GROUP BY token"
        )

    plane.engine.fire("ORDER-1", "remind")

    history = plane.engine.history("ORDER-1")
    assert [entry.seq for entry in history] == list(range(1, len(history) + 1))
    kinds = [entry.kind for entry in history]
    assert kinds[-5:] == ["note", "event_accepted", "task_cancelled", "entered", "task_queued"]


def test_a_report_on_an_attempt_ended_elsewhere_is_refused(plane: Plane, url: str) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    grant = plane.engine.claim("box-1", ["draft"])
    assert grant is not None
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("UPDATE tasks SET attempt = attempt + 1 WHERE id = %s", (grant.task,))

    with pytest.raises(AttemptOver):
        plane.engine.report(
            grant.task,
            ReportBody(kind="event", event="submitted", supervisor="box-1", attempt=1),
        )
    assert plane.engine.get("ORDER-1").state == "draft"


def test_fires_racing_on_one_token_each_move_it_once(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    fires = 6

    def fire_all(index: int) -> None:
        for _ in range(fires):
            plane.engine.fire("ORDER-1", "remind")

    results = together(fire_all)

    assert results == [None] * len(results)
    history = plane.engine.history("ORDER-1")
    assert [entry.seq for entry in history] == list(range(1, len(history) + 1))
    reminders = [entry for entry in history if entry.data.get("event") == "remind"]
    assert len(reminders) == fires * len(results)
    token = plane.engine.get("ORDER-1")
    assert token.visit == 1 + fires * len(results)
    queued = [entry for entry in history if entry.kind == "task_queued"]
    cancelled = [entry.data["task"] for entry in history if entry.kind == "task_cancelled"]
    assert cancelled == [entry.data["task"] for entry in queued[:-1]]


def test_a_refusal_is_decided_on_what_the_database_holds(plane: Plane, url: str) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.pause("ORDER-1")
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("UPDATE tokens SET status = 'active' WHERE token = 'ORDER-1'")

    # Kept, the token is paused and a pause is refused; in the database it is active.
    view = plane.engine.pause("ORDER-1")

    assert view.status == "paused"
