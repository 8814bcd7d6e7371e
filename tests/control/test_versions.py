"""Versions side by side: every graph file served is kept, and each token (with its
children) moves by the graph it started on, on both backends."""

from __future__ import annotations

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.errors import EventNotAllowed
from stateous.control.serve import ServeError, record_graph
from stateous.model.graph_file import checksum
from tests.control.conftest import serving
from tests.control.support import Backend, Item, Plane, plane_for
from tests.control.test_migrations import run_sql


def review(*, with_rework: bool) -> Workflow:
    """draft, then review; version 1 (`with_rework`) can send a review back to draft on
    `rework`, version 2 cannot."""
    flow = Workflow("review", context=Item)
    draft, checking = flow.state("draft"), flow.state("checking")
    flow.transition(START, draft)
    flow.transition(draft, checking, on=flow.event("submitted"))
    flow.transition(checking, END, on=flow.event("approved"))
    if with_rework:
        flow.transition(checking, draft, on=flow.event("rework"))
    return flow


def parent(child: Workflow) -> Workflow:
    """One parallel state that starts `child` and ends when it has ended."""
    flow = Workflow("parent", context=Item)
    fan = flow.state("fan", parallel=[child], inputs=["title"])
    flow.transition(START, fan)
    flow.transition(fan, END, on="joined")
    return flow


def served(flow: Workflow, backend: Backend, *, after: float = 0.0) -> Plane:
    """An engine on the backend's database that keeps its graph, as `serve` does, `after`
    seconds past the test's start."""
    plane = plane_for(flow, backend)
    plane.clock.advance(after)
    record_graph(plane.store, plane.engine.graphs)
    return plane


V1 = checksum(compile_workflow(review(with_rework=True)))
V2 = checksum(compile_workflow(review(with_rework=False)))


def test_tokens_of_two_versions_move_each_by_the_graph_it_started_on(backend: Backend) -> None:
    first = served(review(with_rework=True), backend)
    first.engine.start("OLD", {"title": "x"})
    first.engine.fire("OLD", "submitted")
    first.store.close()

    second = plane_for(review(with_rework=False), backend)
    second.clock.advance(60)
    try:
        older = record_graph(second.store, second.engine.graphs)
        assert [(v.checksum, v.live) for v in older] == [(V1, 1)]
        second.engine.start("NEW", {"title": "y"})
        second.engine.fire("NEW", "submitted")

        assert second.engine.fire("OLD", "rework").state == "draft"
        with pytest.raises(EventNotAllowed):
            second.engine.fire("NEW", "rework")
        assert second.engine.get("NEW").state == "checking"
        assert (second.engine.get("OLD").checksum, second.engine.get("NEW").checksum) == (V1, V2)
        rows = run_sql(backend, "SELECT checksum FROM graphs ORDER BY first_served_at")
        assert rows == [(V1,), (V2,)]
    finally:
        second.store.close()


def test_a_child_moves_by_its_parents_graph(backend: Backend) -> None:
    first = served(parent(review(with_rework=True)), backend)
    first.engine.start("P", {"title": "x"})
    child = "P.fan.1.review"
    first.engine.fire(child, "submitted")
    first.store.close()

    second = served(parent(review(with_rework=False)), backend)
    try:
        assert second.engine.get(child).checksum == second.engine.get("P").checksum
        assert second.engine.get("P").checksum != second.engine.graph.checksum
        assert second.engine.fire(child, "rework").state == "draft"
    finally:
        second.store.close()


def test_a_version_ends_its_use_when_its_last_token_ends(backend: Backend) -> None:
    first = served(review(with_rework=True), backend)
    first.engine.start("OLD", {"title": "x"})
    first.engine.cancel("OLD")
    first.store.close()

    second = plane_for(review(with_rework=False), backend)
    try:
        assert record_graph(second.store, second.engine.graphs) == []
    finally:
        second.store.close()


def test_live_tokens_of_a_graph_not_kept_and_of_another_structure_refuse_the_start(
    backend: Backend,
) -> None:
    first = served(review(with_rework=True), backend)
    first.engine.start("OLD", {"title": "x"})
    first.store.close()
    run_sql(
        backend,
        "DELETE FROM graphs",
        f"INSERT INTO control_plane (id, structure, checksum) VALUES (1, 'before', '{V1}')",
    )

    second = plane_for(review(with_rework=False), backend)
    try:
        with pytest.raises(ServeError, match=r"1 token\(s\) are active or paused on a graph"):
            record_graph(second.store, second.engine.graphs)
        assert run_sql(backend, "SELECT count(*) FROM graphs") == [(0,)]
    finally:
        second.store.close()


def test_the_api_lists_the_versions_and_answers_an_old_graph_file(backend: Backend) -> None:
    first = served(review(with_rework=True), backend)
    first.engine.start("OLD", {"title": "x"})
    old_file = first.engine.graph.raw
    first.store.close()

    second = served(review(with_rework=False), backend, after=60)
    with serving(second.engine) as api:
        status, _, listing = api.request("GET", "/workflows")
        assert status == 200
        assert [(v["checksum"], v["workflow"], v["live"], v["served"]) for v in listing] == [
            (V1, "review", 1, False),
            (V2, "review", 0, True),
        ]
        assert all(v["first_served_at"] <= v["last_served_at"] for v in listing)

        status, _, old = api.request("GET", f"/workflow?checksum={V1}")
        assert (status, old) == (200, msgspec.json.decode(old_file))
        assert (
            api.request("GET", f"/workflow?checksum={V2}")[2]["transitions"]
            == (api.request("GET", "/workflow")[2]["transitions"])
        )
        status, _, missing = api.request("GET", "/workflow?checksum=sha256:00")
        assert (status, missing["code"]) == (404, "graph_not_found")
        assert "sha256:00" in missing["error"]
        assert api.request("GET", "/workflow?checksum=a%00b")[2]["code"] == "graph_not_found"

        status, _, token = api.request("GET", "/tokens/OLD")
        assert (status, token["checksum"]) == (200, V1)
