"""Priorities and fairness, over real HTTP on both backends: a token's `priority` puts its
tasks ahead, a task's age brings it forward a level a minute, and a workflow's fairness
key makes the claims go round the keys that have queued work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.errors import DefinitionError
from stateous.model.limits import PRIORITY_LIMIT
from tests.control.conftest import Served, serving
from tests.control.support import Backend, Plane, plane_for


class Job(msgspec.Struct):
    team: str = ""


def jobs(fairness: str | None = None) -> Workflow:
    """One state, `work`, that `done` ends; its tasks are what the claims take."""
    flow = Workflow("jobs", context=Job, fairness=fairness)
    work = flow.state("work")
    flow.transition(START, work)
    flow.transition(work, END, on=flow.event("done"))
    return flow


@pytest.fixture
def plane(backend: Backend, request: pytest.FixtureRequest) -> Iterator[Plane]:
    fairness = getattr(request, "param", None)
    made = plane_for(jobs(fairness), backend)
    yield made


def start(served: Served, token: str, priority: int | None = None, team: str = "") -> Any:
    body: dict[str, Any] = {"token": token, "context": {"team": team}}
    if priority is not None:
        body["priority"] = priority
    status, _, answer = served.request("POST", "/tokens", body)
    assert status == 201, answer
    return answer


def claim(served: Served) -> str | None:
    """Claim one task of `work` and report it done; answer its token (None: none queued)."""
    status, _, grant = served.request(
        "POST", "/tasks/claim", {"supervisor": "s1", "states": ["work"]}
    )
    if status == 204:
        return None
    assert status == 200, grant
    report = {"supervisor": "s1", "kind": "event", "event": "done", "attempt": grant["attempt"]}
    assert served.request("POST", f"/tasks/{grant['task']}/report", report)[0] == 200
    return str(grant["token"])


def test_under_a_constant_stream_of_priority_0_work_a_priority_10_token_is_claimed_next(
    plane: Plane,
) -> None:
    with serving(plane.engine) as served:
        for index in range(20):
            start(served, f"low-{index}")
            plane.clock.advance(1)
        taken = [claim(served) for _ in range(3)]
        start(served, "urgent", priority=10)
        start(served, "low-20")
        assert claim(served) == "urgent"
        assert taken == ["low-0", "low-1", "low-2"]
        assert claim(served) == "low-3"  # then the oldest first again


def test_a_priority_0_task_queued_long_enough_is_claimed_under_priority_10_work(
    plane: Plane,
) -> None:
    with serving(plane.engine) as served:
        start(served, "old")
        claimed = []
        for index in range(15):  # a priority-10 token every minute, each claimed at once
            start(served, f"high-{index}", priority=10)
            claimed.append(claim(served))
            plane.clock.advance(60)
        # Ten levels are worth ten minutes: from the eleventh minute on, `old` goes first.
        assert claimed[:10] == [f"high-{index}" for index in range(10)]
        assert "old" in claimed[10:12]


def test_a_token_with_no_priority_is_claimed_oldest_first_as_before(plane: Plane) -> None:
    with serving(plane.engine) as served:
        for token in ("A", "B", "C"):
            start(served, token)
        start(served, "D", priority=0)
        assert [claim(served) for _ in range(5)] == ["A", "B", "C", "D", None]


@pytest.mark.parametrize("plane", ["ctx['team']"], indirect=True)
def test_fairness_key_b_with_10_queued_gets_all_within_the_first_20_claims_of_1000_of_a(
    plane: Plane,
) -> None:
    with serving(plane.engine) as served:
        for index in range(1000):
            start(served, f"A-{index}", team="a")
            if index % 100 == 0:
                plane.clock.advance(1)  # queued over ten seconds, as a backlog builds
        plane.clock.advance(5)
        for index in range(10):
            start(served, f"B-{index}", team="b")
        first = [claim(served) for _ in range(20)]
        assert sorted(token for token in first if token and token.startswith("B-")) == sorted(
            f"B-{index}" for index in range(10)
        )
        # Within a key, the oldest first.
        assert [token for token in first if token and token.startswith("A-")] == [
            f"A-{index}" for index in range(10)
        ]


@pytest.mark.parametrize("plane", ["ctx['team']"], indirect=True)
def test_fairness_stays_within_a_priority(plane: Plane) -> None:
    with serving(plane.engine) as served:
        for index in range(50):
            start(served, f"A-{index}", team="a")
        start(served, "B-urgent", priority=5, team="b")
        start(served, "A-urgent", priority=5, team="a")
        assert [claim(served) for _ in range(2)] == ["B-urgent", "A-urgent"]
        assert claim(served) == "A-0"


def test_children_inherit_their_parents_priority(backend: Backend) -> None:
    child = Workflow("check", context=Job)
    step = child.state("step")
    child.transition(START, step)
    child.transition(step, END, on=child.event("ok"))
    flow = Workflow("fan", context=Job)
    fan = flow.state("fan", parallel=[child])
    flow.transition(START, fan)
    flow.transition(fan, END, on="joined")
    plane = plane_for(flow, backend)
    with serving(plane.engine) as served:
        start(served, "P", priority=7)
        rows = plane.store.read(lambda tx: tx.children("P"))
        assert [(row.workflow, row.priority) for row in rows] == [("check", 7)]


@pytest.mark.parametrize("priority", [PRIORITY_LIMIT + 1, -PRIORITY_LIMIT - 1])
def test_a_priority_out_of_bounds_is_refused_with_its_code(plane: Plane, priority: int) -> None:
    with serving(plane.engine) as served:
        status, _, answer = served.request(
            "POST", "/tokens", {"token": "X", "context": {}, "priority": priority}
        )
        assert (status, answer["code"]) == (422, "invalid_priority")
        assert str(PRIORITY_LIMIT) in answer["error"]
        status, _, answer = served.request(
            "POST", "/tokens", {"token": "X", "context": {}, "priority": "high"}
        )
        assert (status, answer["code"]) == (422, "invalid_body")
        assert served.request("GET", "/tokens/X")[0] == 404


def test_the_fairness_key_is_in_the_graph_file_and_a_bad_one_is_refused() -> None:
    assert compile_workflow(jobs("ctx['team']")).fairness == "ctx['team']"
    assert compile_workflow(jobs()).fairness is None
    with pytest.raises(DefinitionError, match=r"fairness: .* is no key expression"):
        jobs("ctx['team'] == 'a'")
    with pytest.raises(DefinitionError, match="fairness"):
        jobs("ctx[")
