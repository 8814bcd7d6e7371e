"""Resources in the engine, on both backends: a task is let in when its key has a free
slot (and its rate a token), waits out of its queue otherwise, and each end of an attempt
lets the oldest waiter in, in the same transaction."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.control import resources
from stateous.control.clock import tick
from stateous.model.wire import ReportBody
from tests.control.support import Backend, Plane, counts_drift, plane_for


class Job(msgspec.Struct):
    repo: str


def coding(*, slots: int = 1, rate: str | None = None, retries: int = 0) -> Workflow:
    """One state, `code`, that takes a slot of the token's repo and one of `llm`."""
    flow = Workflow("coding", context=Job)
    flow.resource("repo", slots=slots)
    flow.resource("llm", slots=10, rate=rate)
    code = flow.state("code", uses={"repo": "ctx['repo']", "llm": 1}, retries=retries)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


def plane_of(flow: Workflow, backend: Backend) -> Plane:
    plane = plane_for(flow, backend, lease=60)
    plane.store.write(lambda tx: resources.declare(tx, plane.engine.graph.document.resources))
    return plane


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    plane = plane_of(coding(), backend)
    yield plane
    plane.store.close()


def claimed(plane: Plane, supervisor: str = "box") -> list[str]:
    """Claim until nothing is left; answer the tokens of the tasks claimed."""
    tokens = []
    while (grant := plane.engine.claim(supervisor, ["code"])) is not None:
        tokens.append(grant.token)
    return tokens


def task_of(plane: Plane, token: str) -> int:
    rows = plane.store.read(
        lambda tx: tx.execute("SELECT max(id) FROM tasks WHERE token = ?", (token,))
    )
    return int(rows[0][0])


def done(plane: Plane, token: str, supervisor: str = "box") -> None:
    body = ReportBody(kind="event", event="done", supervisor=supervisor)
    plane.engine.report(task_of(plane, token), body)


def waits_for(plane: Plane) -> dict[str, str | None]:
    rows = plane.store.read(lambda tx: tx.execute("SELECT token, waits_for FROM tasks"))
    return dict(rows)


def test_one_slot_per_key_lets_one_task_of_a_repo_in_and_the_next_at_its_report(
    plane: Plane,
) -> None:
    plane.engine.start("A1", {"repo": "acme/api"})
    plane.engine.start("A2", {"repo": "acme/api"})
    plane.engine.start("B1", {"repo": "acme/web"})
    assert waits_for(plane) == {"A1": None, "A2": "repo=acme/api", "B1": None}
    assert claimed(plane) == ["A1", "B1"]
    done(plane, "A1")
    assert waits_for(plane)["A2"] is None
    assert claimed(plane) == ["A2"]
    assert counts_drift(plane.store) == {}


def test_a_cancel_of_a_taker_lets_the_next_in_and_of_a_waiter_leaves_no_waiter(
    plane: Plane,
) -> None:
    for token in ("A1", "A2", "A3"):
        plane.engine.start(token, {"repo": "acme/api"})
    plane.engine.cancel("A2")
    plane.engine.cancel("A1")
    assert claimed(plane) == ["A3"]
    takers = plane.store.read(lambda tx: tx.takers("repo"))
    assert [(row.key, row.token, row.status) for row in takers] == [("acme/api", "A3", "claimed")]


def test_a_failed_attempt_and_an_ended_lease_give_the_slot_to_the_next(backend: Backend) -> None:
    plane = plane_of(coding(retries=1), backend)
    try:
        plane.engine.start("A1", {"repo": "acme/api"})
        plane.engine.start("A2", {"repo": "acme/api"})
        [first] = claimed(plane)
        body = ReportBody(kind="failed", error="no", supervisor="box")
        plane.engine.report(task_of(plane, first), body)
        assert claimed(plane) == ["A2"]  # A1 waits for its retry behind A2
        plane.clock.advance(61)
        assert tick(plane.engine) == (1, 0)  # A2's lease ended: A1 is let in again
        assert claimed(plane, "other") == ["A1"]
    finally:
        plane.store.close()


def test_a_paused_resource_grants_nothing_until_resumed(plane: Plane) -> None:
    plane.engine.start("A1", {"repo": "acme/api"})
    row = plane.store.read(lambda tx: tx.resource("llm"))
    assert row is not None
    row.paused = True
    plane.store.write(lambda tx: resources.pause(tx, row))
    plane.engine.start("B1", {"repo": "acme/web"})
    assert claimed(plane) == []
    assert waits_for(plane) == {"A1": "llm=", "B1": "llm="}
    row.paused = False
    plane.store.write(lambda tx: (tx.put_resource(row), resources.let_in_all(tx, "llm")))
    assert claimed(plane) == ["A1", "B1"]


def test_a_paused_token_gives_its_slot_back_until_its_resume(plane: Plane) -> None:
    plane.engine.start("A1", {"repo": "acme/api"})
    plane.engine.start("A2", {"repo": "acme/api"})
    plane.engine.pause("A1")
    assert claimed(plane) == ["A2"]
    plane.engine.resume("A1")
    assert waits_for(plane)["A1"] == "repo=acme/api"
    done(plane, "A2")
    assert claimed(plane) == ["A1"]


def test_a_paused_token_s_failed_attempt_is_queued_again_without_its_slot(
    backend: Backend,
) -> None:
    plane = plane_of(coding(retries=1), backend)
    try:
        plane.engine.start("A1", {"repo": "acme/api"})
        [first] = claimed(plane)
        plane.engine.pause("A1")
        body = ReportBody(kind="failed", error="no", supervisor="box")
        plane.engine.report(task_of(plane, first), body)
        plane.engine.start("A2", {"repo": "acme/api"})
        assert waits_for(plane) == {"A1": resources.TOKEN_RESUME, "A2": None}
        assert claimed(plane) == ["A2"]
        plane.engine.resume("A1")
        assert waits_for(plane)["A1"] == "repo=acme/api"
        done(plane, "A2")
        assert claimed(plane) == ["A1"]
    finally:
        plane.store.close()


def test_a_rate_lets_in_as_many_as_its_bucket_has_then_one_as_each_token_comes_back(
    backend: Backend,
) -> None:
    plane = plane_of(coding(slots=5, rate="2/second"), backend)
    try:
        for n in range(4):
            plane.engine.start(f"A{n}", {"repo": f"r{n}"})
        assert claimed(plane) == ["A0", "A1"]
        plane.clock.advance(0.5)
        resources.open_due(plane.store)
        assert claimed(plane) == ["A2"]
        plane.clock.advance(0.5)
        resources.open_due(plane.store)
        assert claimed(plane) == ["A3"]
    finally:
        plane.store.close()


def test_a_serve_with_the_same_file_keeps_an_operators_slots_and_a_new_declaration_wins(
    plane: Plane,
) -> None:
    from stateous.control import resource_steering
    from stateous.model.graph_file import ResourceSpec

    plane.engine.start("A1", {"repo": "acme/api"})
    plane.engine.start("A2", {"repo": "acme/api"})
    [view] = [row for row in resource_steering.set_slots(plane.engine, "repo", 2).keys]
    assert (view.key, view.in_use, view.waiting) == ("acme/api", 2, 0)  # A2 let in at once
    declared = plane.engine.graph.document.resources
    plane.store.write(lambda tx: resources.declare(tx, declared))
    assert plane.store.read(lambda tx: tx.resource("repo")).slots == 2  # type: ignore[union-attr]
    plane.store.write(lambda tx: resources.declare(tx, {"repo": ResourceSpec(slots=5)}))
    assert plane.store.read(lambda tx: tx.resource("repo")).slots == 5  # type: ignore[union-attr]
    [repo] = [row for row in resource_steering.views(plane.engine) if row.name == "repo"]
    assert [(t.token, t.status) for t in repo.keys[0].takers] == [
        ("A1", "queued"),
        ("A2", "queued"),
    ]


def test_a_token_whose_state_uses_other_resources_in_the_new_graph_is_not_migrated(
    backend: Backend,
) -> None:
    from stateous.control.errors import ContractChanged
    from stateous.control.migration import Migrations
    from stateous.control.serve import record_graph

    old = plane_of(coding(), backend)
    record_graph(old.store, old.engine.graphs)
    old.engine.start("A1", {"repo": "acme/api"})
    old.store.close()
    plane = plane_of(coding(slots=2), backend)  # `code` uses the same: slots are not uses
    other = Workflow("coding", context=Job)
    other.resource("repo", slots=1)
    code = other.state("code", uses={"repo": "ctx['repo']"})
    other.transition(START, code)
    other.transition(code, END, on=other.event("done"))
    try:
        record_graph(plane.store, plane.engine.graphs)
        assert Migrations(plane.engine).migrate("A1").moved[0].token == "A1"
    finally:
        plane.store.close()
    newer = plane_of(other, backend)
    try:
        record_graph(newer.store, newer.engine.graphs)
        with pytest.raises(ContractChanged, match="which uses other resources in the graph"):
            Migrations(newer.engine).migrate("A1")
    finally:
        newer.store.close()
