"""Plans: bulk steering of an exact set of tokens, each acted on once, on both backends and
over HTTP.

A plan keeps the tokens its filter selected when it was made; an apply acts on each of
them in a change of its own that also marks it done, so an apply cut short and run again
acts on no token twice. The ledger row of each action names the plan.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from stateous.control.errors import (
    InvalidArgument,
    PlanMismatch,
    PlanNotFound,
)
from stateous.control.plans import Plans
from tests.control.conftest import serving
from tests.control.support import Backend, Plane, connected, counts_drift, plane_for
from tests.control.test_retry import fail_in, pipeline


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(pipeline(), backend)
    yield served
    served.store.close()  # a test that served the engine over HTTP closed it already
    store = backend.store()
    try:
        assert counts_drift(store) == {}, "the counts drifted from the rows"
    finally:
        store.close()


def failed_in(plane: Plane, state: str, *tokens: str) -> None:
    """Start the tokens, bring each to `state` and fail it there, in order."""
    for token in tokens:
        plane.engine.start(token, {"title": token})
        if state == "review":
            plane.engine.fire(token, "submitted")
    for token in tokens:
        fail_in(plane, token, state)


def retried(plane: Plane, token: str) -> list[dict]:
    """The data of each `retried` entry of a token."""
    return [data for kind, data in plane.entries(token) if kind == "retried"]


def test_a_plan_lists_exactly_the_tokens_its_filter_selects_and_changes_none(
    plane: Plane,
) -> None:
    failed_in(plane, "review", "A", "B")
    failed_in(plane, "draft", "C")
    plane.engine.start("D", {"title": "live"})

    made = Plans(plane.engine).make("retry", "status=failed state=review", by="alice")

    assert sorted(token.token for token in made.tokens) == ["A", "B"]
    assert {token.outcome for token in made.tokens} == {"pending"}
    assert (made.action, made.where, made.by, made.pending) == (
        "retry",
        {"status": "failed", "state": "review"},
        "alice",
        2,
    )
    assert [plane.engine.get(token).status for token in "ABC"] == ["failed"] * 3
    assert Plans(plane.engine).get(made.plan) == made


def test_apply_acts_once_on_each_planned_token_and_the_ledger_names_the_plan(
    plane: Plane,
) -> None:
    failed_in(plane, "review", "A", "B")
    plans = Plans(plane.engine)
    made = plans.make("retry", "status=failed state=review")
    failed_in(plane, "review", "LATE")  # it matches only after the plan was made

    applied = plans.apply(made.plan, "retry", by="bob")

    assert applied.pending == 0
    assert {(token.token, token.outcome) for token in applied.tokens} == {
        ("A", "done"),
        ("B", "done"),
    }
    for token in ("A", "B"):
        assert plane.engine.get(token).status == "active"
        assert retried(plane, token) == [
            {"state": "review", "was": "failed", "changes": {}, "by": "bob", "plan": made.plan}
        ]
    assert plane.engine.get("LATE").status == "failed"
    assert retried(plane, "LATE") == []


def test_an_apply_cut_short_and_run_again_acts_on_each_token_once(plane: Plane) -> None:
    for token in ("A", "B", "C"):
        plane.engine.start(token, {"title": token})
    plans = Plans(plane.engine)
    made = plans.make("pause", "status=active")

    half = plans.apply(made.plan, "pause", limit=1)
    assert (half.pending, [token.outcome for token in half.tokens].count("done")) == (2, 1)
    again = plans.apply(made.plan, "pause")
    once_more = plans.apply(made.plan, "pause")

    assert again.pending == once_more.pending == 0
    assert once_more.tokens == again.tokens
    for token in ("A", "B", "C"):
        paused = [data for kind, data in plane.entries(token) if kind == "paused"]
        assert paused == [{"plan": made.plan}]
        assert plane.engine.get(token).status == "paused"


def test_a_token_that_changed_since_the_plan_is_refused_and_the_others_go_on(
    plane: Plane,
) -> None:
    failed_in(plane, "review", "A", "B", "C")
    plans = Plans(plane.engine)
    made = plans.make("cancel", "status=failed")
    plane.engine.retry("B")  # active now: no longer failed
    history_of_b = plane.entries("B")

    applied = plans.apply(made.plan, "cancel")

    outcomes = {token.token: (token.outcome, token.reason) for token in applied.tokens}
    assert outcomes["B"] == (
        "refused",
        "token 'B' no longer matches status=failed: its status is active",
    )
    assert plane.entries("B") == history_of_b
    # A failed token cannot be cancelled: the engine's own refusal, kept as the reason.
    assert outcomes["A"] == ("refused", "token 'A' is failed; it cannot be cancelled")
    assert applied.pending == 0


@pytest.mark.parametrize(
    ("where", "said"),
    [
        (
            "colour=red",
            "where: 'colour' is no filter; use status, state, parent, checksum, since, until",
        ),
        ("status=sleeping", "status must be one of"),
        ("state=nowhere", "where: the graph has no state 'nowhere'"),
        ("status", "where: 'status' is not key=value"),
        ("status=failed status=paused", "where: 'status' is given twice"),
        ("", "where: name at least one filter"),
        ("since=yesterday", "since must be a time in ISO 8601"),
    ],
)
def test_a_bad_filter_is_refused_and_no_plan_is_kept(
    plane: Plane, backend: Backend, where: str, said: str
) -> None:
    failed_in(plane, "review", "A")
    with pytest.raises(InvalidArgument, match=said):
        Plans(plane.engine).make("retry", where)
    with connected(backend) as run:
        assert run("SELECT count(*) FROM plans") == [(0,)]


def test_an_apply_of_another_action_or_option_or_of_no_plan_is_refused_and_acts_on_nothing(
    plane: Plane,
) -> None:
    failed_in(plane, "review", "A")
    plans = Plans(plane.engine)
    made = plans.make("retry", "status=failed", "draft")
    before = plane.entries("A")

    with pytest.raises(PlanMismatch, match="was made to retry with from 'draft'"):
        plans.apply(made.plan, "cancel")
    with pytest.raises(PlanMismatch):
        plans.apply(made.plan, "retry")  # without its `from`
    with pytest.raises(PlanMismatch):
        plans.apply(made.plan, "retry", "review")
    with pytest.raises(InvalidArgument, match="action must be one of"):
        plans.apply(made.plan, "explode")
    for missing in ("0123456789abcdef", "no\x00such"):
        with pytest.raises(PlanNotFound):
            plans.apply(missing, "retry", "draft")
        with pytest.raises(PlanNotFound):
            plans.get(missing)

    assert plane.entries("A") == before
    assert plans.get(made.plan).pending == 1
    done = plans.apply(made.plan, "retry", "draft")
    assert [token.outcome for token in done.tokens] == ["done"]
    assert plane.engine.get("A").state == "draft"


def test_plans_over_http_with_their_refusals(plane: Plane) -> None:
    failed_in(plane, "review", "A", "B")
    with serving(plane.engine) as served:
        status, _, made = served.request(
            "POST", "/plans", {"action": "retry", "where": "status=failed"}
        )
        assert status == 201 and made["pending"] == 2 and made["from"] is None
        plan = made["plan"]

        assert served.request("GET", f"/plans/{plan}")[2] == made
        refusals = [
            ("POST", "/plans", {"action": "retry", "where": "colour=red"}, 422, "invalid_argument"),
            ("POST", "/plans", {"action": "retry", "where": "x", "limit": 1}, 422, "invalid_body"),
            ("GET", "/plans/nothing", None, 404, "plan_not_found"),
            ("POST", "/plans/nothing/apply", {"action": "retry"}, 404, "plan_not_found"),
            ("POST", f"/plans/{plan}/apply", {"action": "pause"}, 409, "plan_mismatch"),
            ("POST", f"/plans/{plan}/apply", {"action": "retry", "limit": 0}, 422,
             "invalid_argument"),
        ]  # fmt: skip
        for method, path, body, code, name in refusals:
            status, _, refused = served.request(method, path, body)
            assert (status, refused["code"]) == (code, name), (path, body, refused)
        assert served.request("GET", f"/plans/{plan}")[2] == made

        status, _, half = served.request(
            "POST", f"/plans/{plan}/apply", {"action": "retry", "limit": 1}
        )
        assert (status, half["pending"]) == (200, 1)
        status, _, done = served.request("POST", f"/plans/{plan}/apply", {"action": "retry"})
        assert (status, done["pending"]) == (200, 0)
        assert [token["outcome"] for token in done["tokens"]] == ["done", "done"]
        for token in ("A", "B"):
            history = served.request("GET", f"/tokens/{token}/history")[2]
            assert [
                entry["data"].get("plan") for entry in history if entry["kind"] == "retried"
            ] == [plan]


def test_two_applies_of_one_plan_at_once_act_on_each_token_once(plane: Plane) -> None:
    tokens = [f"T-{n}" for n in range(12)]
    for token in tokens:
        plane.engine.start(token, {"title": token})
    plans = Plans(plane.engine)
    made = plans.make("pause", "status=active")
    start = threading.Barrier(2)

    def apply() -> None:
        start.wait()
        plans.apply(made.plan, "pause")

    both = [threading.Thread(target=apply) for _ in range(2)]
    for thread in both:
        thread.start()
    for thread in both:
        thread.join(timeout=60)

    assert plans.get(made.plan).pending == 0
    for token in tokens:
        assert [kind for kind, _ in plane.entries(token)].count("paused") == 1
