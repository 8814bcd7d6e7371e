"""Claims by contract: a claim that names the graph its supervisor was built for is granted
a task of another version only when the task's state has the same contract there; a claim
that names none is granted any version's task, as before. On both backends, through the
engine and over real HTTP.

Two versions of `review` are kept: in version 2, `checking` can no longer emit `rework`
(its contract changed); `draft` is the same in both.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stateous.control.errors import GraphNotFound
from tests.control.conftest import serving
from tests.control.support import Backend, Plane
from tests.control.test_migrations import run_sql
from tests.control.test_versions import V1, V2, review, served


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    """Version 2 served; OLD (in `checking`) and OLD-DRAFT started on version 1, then NEW
    (in `checking`) and NEW-DRAFT on version 2, in that order."""
    first = served(review(with_rework=True), backend)
    first.engine.start("OLD-DRAFT", {"title": "a"})
    first.engine.start("OLD", {"title": "b"})
    first.engine.fire("OLD", "submitted")
    first.store.close()
    second = served(review(with_rework=False), backend, after=60)
    second.engine.start("NEW-DRAFT", {"title": "c"})
    second.engine.start("NEW", {"title": "d"})
    second.engine.fire("NEW", "submitted")
    try:
        yield second
    finally:
        second.store.close()


def claimed(plane: Plane, state: str, checksum: str | None) -> list[str]:
    """The tokens whose tasks of `state` one supervisor claims, naming `checksum`, until it
    is granted none."""
    tokens = []
    while (grant := plane.engine.claim("s1", [state], checksum=checksum)) is not None:
        tokens.append(grant.token)
    return tokens


def test_a_state_whose_contract_changed_goes_only_to_a_supervisor_of_its_version(
    plane: Plane,
) -> None:
    assert claimed(plane, "checking", V2) == ["NEW"]
    assert claimed(plane, "checking", V1) == ["OLD"]


def test_a_supervisor_of_the_older_version_takes_only_its_own_tasks_too(plane: Plane) -> None:
    assert claimed(plane, "checking", V1) == ["OLD"]
    assert claimed(plane, "checking", V2) == ["NEW"]


def test_a_state_with_the_same_contract_goes_to_a_supervisor_of_either_version(
    plane: Plane,
) -> None:
    assert claimed(plane, "draft", V2) == ["OLD-DRAFT", "NEW-DRAFT"]
    plane.engine.start("NEXT", {"title": "e"})
    assert claimed(plane, "draft", V1) == ["NEXT"]


def test_a_claim_that_names_no_graph_is_granted_the_tasks_of_every_version(
    plane: Plane,
) -> None:
    assert claimed(plane, "checking", None) == ["OLD", "NEW"]


def test_the_tasks_are_granted_as_their_tokens_move_each_by_its_own_graph(
    plane: Plane,
) -> None:
    old = plane.engine.claim("v1", ["checking"], checksum=V1)
    assert old is not None and old.token == "OLD"
    plane.engine.fire("OLD", "rework")  # version 1 sends it back to draft
    assert plane.engine.get("OLD").state == "draft"
    assert claimed(plane, "draft", V2) == ["OLD-DRAFT", "NEW-DRAFT", "OLD"]


def test_a_claim_naming_a_graph_the_database_does_not_keep_is_refused_and_changes_nothing(
    plane: Plane, backend: Backend
) -> None:
    before = run_sql(backend, "SELECT id, status, attempt FROM tasks ORDER BY id")
    for checksum in ("sha256:" + "0" * 64, "sha256:\x00"):
        with pytest.raises(GraphNotFound, match="keeps no graph file of checksum"):
            plane.engine.claim("s1", ["checking"], checksum=checksum)
    assert run_sql(backend, "SELECT id, status, attempt FROM tasks ORDER BY id") == before
    assert run_sql(backend, "SELECT count(*) FROM claims") == [(0,)]


def test_a_waiting_claim_is_woken_only_by_a_task_of_its_contract(plane: Plane) -> None:
    assert claimed(plane, "checking", V2) == ["NEW"]
    waiting = plane.engine.claim_or_wait("v2", ["checking"], checksum=V2, wait=5.0)
    assert waiting.grant is None and waiting.waiter is not None
    try:
        plane.engine.fire("OLD-DRAFT", "submitted")  # a version 1 task in `checking`
        assert not waiting.waiter.woken
        plane.engine.fire("NEW-DRAFT", "submitted")
        assert waiting.waiter.woken
    finally:
        waiting.waiter.leave()
    assert claimed(plane, "checking", V2) == ["NEW-DRAFT"]


def test_over_http_the_tasks_say_their_version_and_a_claim_names_its_graph(
    plane: Plane,
) -> None:
    with serving(plane.engine) as api:
        _, _, tasks = api.request("GET", "/tasks?status=queued&state=checking")
        assert [(task["token"], task["checksum"]) for task in tasks] == [
            ("OLD", V1),
            ("NEW", V2),
        ]
        claim = {"supervisor": "v1", "states": ["checking", "draft"], "checksum": V1}
        status, _, grant = api.request("POST", "/tasks/claim", {**claim, "states": ["checking"]})
        assert (status, grant["token"]) == (200, "OLD")
        status, _, _ = api.request("POST", "/tasks/claim", {**claim, "states": ["checking"]})
        assert status == 204
        unknown = {**claim, "checksum": "sha256:" + "1" * 64}
        status, _, refusal = api.request("POST", "/tasks/claim", unknown)
        assert (status, refusal["code"]) == (404, "graph_not_found")
        status, _, refusal = api.request("POST", "/tasks/claim", {**claim, "checksum": 7})
        assert (status, refusal["code"]) == (422, "invalid_body")
        status, _, grant = api.request(
            "POST", "/tasks/claim", {"supervisor": "p", "states": ["checking"]}
        )
        assert (status, grant["token"]) == (200, "NEW")
