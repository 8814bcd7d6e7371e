"""Writes that start from the state this control plane committed last: the database proves it.

Each test changes a token from a connection of its own, behind the control
plane's back, then checks that the next request follows what the database holds.
Fires racing on one token are in tests/control/test_races.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from stateous.control.errors import AttemptOver
from stateous.model.wire import ReportBody
from tests.control.support import Backend, Plane, orders, plane_for


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(orders(), backend)
    yield served
    served.store.close()


def change_elsewhere(url: str, sql: str) -> None:
    """Run `sql` on a connection of the test's own: a change the control plane did not make."""
    with psycopg.connect(url, autocommit=True) as other:
        other.execute(sql)


def kept_order(plane: Plane) -> None:
    """Start ORDER-1 and fire at it once, so that the control plane keeps its state."""
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "remind")


def test_a_token_changed_elsewhere_moves_from_what_the_database_holds(
    plane: Plane, url: str
) -> None:
    kept_order(plane)
    change_elsewhere(
        url,
        'UPDATE tokens SET context = \'{"title":"changed","amount":0,"tags":[]}\' '
        "WHERE token = 'ORDER-1'",
    )

    view = plane.engine.fire("ORDER-1", "remind")

    assert view.context["title"] == "changed"  # type: ignore[union-attr]
    assert plane.engine.get("ORDER-1").context["title"] == "changed"


def test_a_ledger_row_written_elsewhere_is_followed_not_overwritten(plane: Plane, url: str) -> None:
    kept_order(plane)
    change_elsewhere(
        url,
        "INSERT INTO ledger (token, seq, at, kind, data, pos) SELECT token, max(seq) + 1, "
        "max(at), 'note', '{\"text\":\"from elsewhere\"}', -1 FROM ledger "
        "WHERE token = 'ORDER-1' GROUP BY token",
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
    change_elsewhere(url, f"UPDATE tasks SET attempt = attempt + 1 WHERE id = {grant.task}")

    with pytest.raises(AttemptOver):
        plane.engine.report(
            grant.task,
            ReportBody(kind="event", event="submitted", supervisor="box-1", attempt=1),
        )
    assert plane.engine.get("ORDER-1").state == "draft"


def test_a_refusal_is_decided_on_what_the_database_holds(plane: Plane, url: str) -> None:
    kept_order(plane)
    plane.engine.pause("ORDER-1")
    change_elsewhere(url, "UPDATE tokens SET status = 'active' WHERE token = 'ORDER-1'")

    # Kept, the token is paused and a pause is refused; in the database it is active.
    view = plane.engine.pause("ORDER-1")

    assert view.status == "paused"
