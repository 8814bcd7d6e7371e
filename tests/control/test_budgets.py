"""Spend and budgets per token tree, over real HTTP on both backends: what a routine spends
is a ledger row and shows in `GET /tokens/{id}`; parallel children whose reservations would
overrun their tree's budget are not granted together; a tree whose spend reaches its budget
sends `over_budget` to its top token, or pauses when its graph does not take it (also when
it went over while paused, at its resume, and when its budget is lowered below what it
spent); a raise lets the work go on; a spend sent again with its key counts once; bad input
is refused, nothing lost."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.errors import DefinitionError
from stateous.model.graph_file import dump, structure
from tests.control.conftest import Served, serving
from tests.control.support import Backend, plane_for

CHILDREN = [f"job{number}/call" for number in range(1, 5)]


def job(number: int, reserve: dict[str, float] | None) -> Workflow:
    """A child workflow of one task, `call`, that reserves `reserve`."""
    child = Workflow(f"job{number}")
    call = child.state("call", reserve=reserve)
    child.transition(START, call)
    child.transition(call, END, on=child.event("done"))
    return child


def fanout(*, routed: bool, budget: dict[str, float] | None = None) -> Workflow:
    """Four children in parallel, each reserving 0.3 usd; with `routed`, `over_budget` moves
    the top token to `over`, a state whose task a person answers."""
    flow = Workflow("fanout", budget=budget)
    work = flow.state("work", parallel=[job(number, {"usd": 0.3}) for number in range(1, 5)])
    flow.transition(START, work)
    flow.transition(work, END, on="joined")
    if routed:
        over = flow.state("over")
        flow.transition(work, over, on="over_budget")
        flow.transition(over, END, on=flow.event("close"))
    return flow


@pytest.fixture
def routed(backend: Backend) -> Iterator[Served]:
    with serving(plane_for(fanout(routed=True), backend).engine) as served:
        yield served


@pytest.fixture
def unrouted(backend: Backend) -> Iterator[Served]:
    with serving(plane_for(fanout(routed=False), backend).engine) as served:
        yield served


def claim(served: Served, states: list[str] = CHILDREN) -> dict[str, Any] | None:
    status, _, body = served.request(
        "POST", "/tasks/claim", {"supervisor": "box", "states": states}
    )
    assert status in (200, 204), body
    return body if status == 200 else None


def claim_all(served: Served, states: list[str] = CHILDREN) -> list[dict[str, Any]]:
    grants = []
    while (grant := claim(served, states)) is not None:
        grants.append(grant)
    return grants


def report(served: Served, grant: dict[str, Any], **fields: Any) -> tuple[int, Any]:
    body = {"kind": "event", "event": "done", "supervisor": "box", "attempt": grant["attempt"]}
    status, _, answer = served.request("POST", f"/tasks/{grant['task']}/report", {**body, **fields})
    return status, answer


def token(served: Served, name: str) -> dict[str, Any]:
    status, _, body = served.request("GET", f"/tokens/{name}")
    assert status == 200, body
    return body


def kinds(served: Served, name: str) -> list[str]:
    _, _, rows = served.request("GET", f"/tokens/{name}/history")
    return [row["kind"] for row in rows]


def entries(served: Served, name: str, kind: str) -> list[dict[str, Any]]:
    _, _, rows = served.request("GET", f"/tokens/{name}/history")
    return [row["data"] for row in rows if row["kind"] == kind]


def start(served: Served, name: str, budget: Any) -> tuple[int, Any]:
    status, _, body = served.request("POST", "/tokens", {"token": name, "budget": budget})
    return status, body


def test_spend_is_a_ledger_row_on_the_attempt_and_shows_for_the_token_and_its_tree(
    routed: Served,
) -> None:
    assert start(routed, "T", {"usd": 5})[0] == 201
    first, second = claim(routed), claim(routed)
    assert first is not None and second is not None
    status, _, _ = routed.request(
        "POST",
        f"/tasks/{first['task']}/spend",
        {"spent": {"usd": 0.12, "tokens": 3400}, "supervisor": "box", "attempt": 1},
    )
    assert status == 204
    assert report(routed, first, spent={"usd": 0.08})[0] == 200
    assert report(routed, second, spent={"usd": 0.5, "tokens": 100})[0] == 200
    child = first["token"]
    assert entries(routed, child, "spent") == [
        {"task": first["task"], "attempt": 1, "spent": {"usd": 0.12, "tokens": 3400}},
        {"task": first["task"], "attempt": 1, "spent": {"usd": 0.08}},
    ]
    assert token(routed, child)["spent"]["token"] == {"usd": 0.2, "tokens": 3400}
    top = token(routed, "T")["spent"]
    assert (top["token"], top["tree"]) == ({}, {"usd": 0.7, "tokens": 3500})
    assert top["budget"] == {
        "token": "T",
        "limits": {"usd": 5},
        "spent": {"usd": 0.7, "tokens": 3500},
        "reserved": {},
        "warn": 0.8,
        "over": False,
    }


def test_four_children_reserving_0_3_of_1_usd_run_three_at_once_and_over_budget_is_routed(
    routed: Served,
) -> None:
    assert start(routed, "T", {"usd": 1})[0] == 201
    grants = claim_all(routed)
    assert len(grants) == 3
    assert report(routed, grants[0], spent={"usd": 0.25})[0] == 200
    assert claim(routed) is None  # 0.25 spent and 0.6 held leave 0.15: not 0.3
    assert report(routed, grants[1], spent={"usd": 0.6})[0] == 200
    assert entries(routed, "T", "budget_warned") == [{"unit": "usd", "spent": 0.85, "limit": 1}]
    assert report(routed, grants[2], spent={"usd": 0.2})[0] == 200
    shown = token(routed, "T")
    assert (shown["state"], shown["status"]) == ("over", "active")
    assert shown["spent"]["budget"]["over"] is True
    over = entries(routed, "T", "over_budget")
    assert over == [{"reason": "the tree spent usd=1.05 of its budget of usd=1", "routed": True}]
    assert claim(routed) is None
    assert claim(routed, ["over"]) is not None  # the top token's own work, where it routed
    _, _, text = routed.request("GET", "/metrics")
    lines = text.decode().splitlines()
    assert "stateous_budget_warnings_total 1" in lines
    assert "stateous_budgets_spent_total 1" in lines


def test_a_tree_whose_graph_does_not_take_over_budget_pauses_and_a_raise_lets_it_finish(
    unrouted: Served,
) -> None:
    assert start(unrouted, "T", {"usd": 1})[0] == 201
    grants = claim_all(unrouted)
    assert len(grants) == 3
    for grant in grants:
        assert report(unrouted, grant, spent={"usd": 0.4})[0] == 200
    shown = token(unrouted, "T")
    assert shown["status"] == "paused"
    assert entries(unrouted, "T", "over_budget") == [
        {"reason": "the tree spent usd=1.2 of its budget of usd=1", "routed": False}
    ]
    assert kinds(unrouted, "T")[-2:] == ["over_budget", "paused"]
    assert claim(unrouted) is None
    status, _, raised = unrouted.request("POST", "/tokens/T/budget", {"budget": {"usd": 3}})
    assert status == 200, raised
    assert (raised["limits"], raised["over"]) == ({"usd": 3}, False)
    assert entries(unrouted, "T", "budget_raised")[0]["budget"] == {"usd": 3}
    assert token(unrouted, "T")["status"] == "active"
    last = claim(unrouted)
    assert last is not None
    assert report(unrouted, last, spent={"usd": 0.3})[0] == 200
    assert token(unrouted, "T")["status"] == "completed"


def test_a_tree_whose_budget_left_fits_no_reservation_and_holds_none_is_over_budget(
    unrouted: Served,
) -> None:
    assert start(unrouted, "T", {"usd": 1})[0] == 201
    first, second = claim(unrouted), claim(unrouted)
    assert first is not None and second is not None
    assert report(unrouted, first, spent={"usd": 0.4})[0] == 200
    assert report(unrouted, second, spent={"usd": 0.4})[0] == 200
    assert token(unrouted, "T")["status"] == "active"
    assert claim(unrouted) is None  # 0.2 is left for 0.3, and no task holds any
    assert token(unrouted, "T")["status"] == "paused"
    assert entries(unrouted, "T", "over_budget") == [
        {"reason": "the tree spent usd=0.8 of its budget of usd=1", "routed": False}
    ]


def test_a_workflow_budget_applies_to_a_token_started_without_one(backend: Backend) -> None:
    engine = plane_for(fanout(routed=True, budget={"usd": 0.6}), backend).engine
    with serving(engine) as served:
        assert start(served, "T", None)[0] == 201
        assert len(claim_all(served)) == 2
        assert token(served, "T")["spent"]["budget"]["limits"] == {"usd": 0.6}


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/spend", {"spent": {"usd": -1}}, "invalid_spend"),
        ("/spend", {"spent": {"usd": "a lot"}}, "invalid_spend"),
        ("/spend", {"spent": {"US D": 1}}, "invalid_spend"),
        ("/report", {"kind": "event", "event": "done", "spent": {"usd": -0.1}}, "invalid_spend"),
    ],
    ids=["negative", "not-a-number", "not-a-unit", "report"],
)
def test_a_bad_spend_is_refused_and_nothing_is_lost(
    routed: Served, path: str, body: dict[str, Any], code: str
) -> None:
    start(routed, "T", {"usd": 5})
    grant = claim(routed)
    assert grant is not None
    status, _, answer = routed.request(
        "POST", f"/tasks/{grant['task']}{path}", {**body, "supervisor": "box"}
    )
    assert (status, answer["code"]) == (422, code)
    assert "spent" not in kinds(routed, grant["token"])
    assert report(routed, grant, spent={"usd": 0.1})[0] == 200


@pytest.mark.parametrize(
    ("budget", "words"),
    [
        ({"usd": 0}, "budget: usd is 0; it must be a number above 0"),
        ({"usd": "five"}, "budget: usd is 'five', not a number"),
        ({"Dollars!": 5}, "budget: 'Dollars!' is not a unit name"),
        ({"usd": 0.2}, "states.call.reserve: usd 0.3 is more than the budget's 0.2"),
    ],
    ids=["zero", "not-a-number", "not-a-unit", "smaller-than-a-reservation"],
)
def test_a_bad_budget_at_start_is_refused_and_no_token_starts(
    routed: Served, budget: Any, words: str
) -> None:
    status, body = start(routed, "T", budget)
    assert (status, body["code"]) == (422, "invalid_budget")
    assert words in body["error"]
    assert routed.request("GET", "/tokens/T")[0] == 404


def test_a_raise_is_refused_for_an_unknown_unit_and_for_a_tree_without_a_budget(
    routed: Served,
) -> None:
    start(routed, "T", {"usd": 1})
    start(routed, "U", None)
    status, _, body = routed.request("POST", "/tokens/T/budget", {"budget": {"eur": 3}})
    assert (status, body["code"]) == (422, "invalid_budget")
    assert "has no unit 'eur'" in body["error"]
    status, _, body = routed.request("POST", "/tokens/U/budget", {"budget": {"usd": 3}})
    assert (status, body["code"]) == (409, "no_budget")


def test_flow_py_refuses_a_reservation_larger_than_its_workflow_budget() -> None:
    flow = Workflow("costly", budget={"usd": 1})
    with pytest.raises(DefinitionError, match=r"reserve: usd 2 is more than the budget's 1"):
        flow.state("call", reserve={"usd": 2})
    with pytest.raises(DefinitionError, match=r"budget: usd is -1"):
        Workflow("negative", budget={"usd": -1})
    with pytest.raises(DefinitionError, match=r"budget_warn is 2"):
        Workflow("warned", budget={"usd": 1}, budget_warn=2)


def test_the_graph_file_keeps_the_budget_and_reservations_outside_the_structure() -> None:
    plain, budgeted = fanout(routed=True), fanout(routed=True, budget={"usd": 5})
    budgeted.budget_warn = 0.5
    document = compile_workflow(budgeted)
    assert (document.budget, document.budget_warn) == ({"usd": 5}, 0.5)
    assert document.workflows["job1"].states["call"].reserve == {"usd": 0.3}
    assert structure(document) == structure(compile_workflow(plain))
    unbudgeted = fanout(routed=True)
    assert '"budget' not in dump(compile_workflow(unbudgeted)).decode()


def test_a_spend_sent_again_with_its_key_counts_once(routed: Served) -> None:
    assert start(routed, "T", {"usd": 5})[0] == 201
    grant = claim(routed)
    assert grant is not None
    body = {"spent": {"usd": 1.5}, "supervisor": "box", "attempt": 1, "key": "spend-1"}
    path = f"/tasks/{grant['task']}/spend"
    assert routed.request("POST", path, body)[0] == 204
    status, _, again = routed.request("POST", path, body)
    assert (status, again) == (200, {"duplicate": True})
    assert routed.request("POST", path, {**body, "key": "spend-2"})[0] == 204
    status, _, refused = routed.request("POST", path, {**body, "key": ""})
    assert (status, refused["code"]) == (422, "invalid_spend")
    unkeyed = {"spent": {"usd": 1}, "supervisor": "box", "attempt": 1}
    assert routed.request("POST", path, unkeyed)[0] == 204
    assert routed.request("POST", path, unkeyed)[0] == 204
    assert len(entries(routed, grant["token"], "spent")) == 4
    assert token(routed, "T")["spent"]["tree"] == {"usd": 5.0}


def test_a_tree_that_went_over_while_paused_meets_over_budget_at_its_resume(
    routed: Served,
) -> None:
    assert start(routed, "T", {"usd": 1})[0] == 201
    grants = claim_all(routed)
    assert routed.request("POST", "/tokens/T/pause", {})[0] == 200
    assert report(routed, grants[0], spent={"usd": 1.2})[0] == 200
    assert token(routed, "T")["status"] == "paused"
    assert routed.request("POST", "/tokens/T/resume", {})[0] == 200
    shown = token(routed, "T")
    assert (shown["state"], shown["status"]) == ("over", "active")
    over = entries(routed, "T", "over_budget")
    assert over == [{"reason": "the tree spent usd=1.2 of its budget of usd=1", "routed": True}]
    assert routed.request("POST", "/tokens/T/pause", {})[0] == 200
    assert routed.request("POST", "/tokens/T/resume", {})[0] == 200
    assert len(entries(routed, "T", "over_budget")) == 1


def test_a_budget_lowered_below_the_spend_is_over_budget_at_once(unrouted: Served) -> None:
    assert start(unrouted, "T", {"usd": 2})[0] == 201
    grant = claim(unrouted)
    assert grant is not None
    assert report(unrouted, grant, spent={"usd": 0.5})[0] == 200
    status, _, lowered = unrouted.request("POST", "/tokens/T/budget", {"budget": {"usd": 0.4}})
    assert (status, lowered["over"]) == (200, True)
    assert token(unrouted, "T")["status"] == "paused"
    assert entries(unrouted, "T", "over_budget") == [
        {"reason": "the tree spent usd=0.5 of its budget of usd=0.4", "routed": False}
    ]
    assert claim(unrouted) is None
