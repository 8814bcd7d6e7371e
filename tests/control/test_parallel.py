"""Parallel states in the engine: child tokens, the join, steering a family."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.control.clock import tick
from stateous.control.errors import ChildToken, EventNotAllowed, InvalidTokenId
from stateous.control.stats import stats
from stateous.model.wire import ReportBody, Schedule
from tests.control.support import Backend, Plane, counts_drift, plane_for
from tests.control.test_races import together


class Ticket(msgspec.Struct):
    repo: str
    branch: str = "main"


class Review(msgspec.Struct):
    repo: str
    branch: str


class Verdict(msgspec.Struct):
    ok: bool


def review_workflow(name: str) -> Workflow:
    review = Workflow(name, context=Review)
    triage = review.state("triage")
    approved = review.state("approved")
    rejected = review.state("rejected")
    judged = review.event("judged", payload=Verdict)
    close = review.event("close")
    review.transition(START, triage)
    review.transition(triage, approved, on=judged, when="payload.ok == true")
    review.transition(triage, rejected, on=judged, otherwise=True)
    review.transition(approved, END, on=close)
    review.transition(rejected, END, on=close)
    return review


def sdlc(join: str = "all", timeout: str | None = None) -> Workflow:
    security, design = review_workflow("security-review"), review_workflow("design-review")
    flow = Workflow("sdlc", context=Ticket)
    coding = flow.state("coding")
    options = {"timeout": timeout} if timeout else {}
    reviews = flow.state(
        "reviews", parallel=[security, design], join=join, inputs=["repo", "branch"], **options
    )
    merging = flow.state("merging")
    done = flow.event("done")
    merged = flow.event("merged")
    flow.transition(START, coding)
    flow.transition(coding, reviews, on=done)
    flow.transition(
        reviews,
        merging,
        on="joined",
        when="branches.all(status == 'completed' and final == 'approved')",
    )
    flow.transition(reviews, coding, on="joined", otherwise=True)
    flow.transition(reviews, coding, on="timeout")
    flow.transition(merging, END, on=merged)
    return flow


SECURITY = "T-1.reviews.1.security-review"
DESIGN = "T-1.reviews.1.design-review"


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(sdlc(), backend)
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "the counts drifted from the rows"


def to_reviews(plane: Plane) -> None:
    plane.engine.start("T-1", {"repo": "acme/api", "branch": "feature"})
    assert plane.engine.fire("T-1", "done").state == "reviews"


def finish(plane: Plane, child: str, ok: bool) -> None:
    plane.engine.fire(child, "judged", {"ok": ok})
    plane.engine.fire(child, "close")


def test_entering_a_parallel_state_starts_one_child_per_workflow(plane: Plane) -> None:
    to_reviews(plane)
    assert plane.entries("T-1")[-3:] == [
        ("entered", {"state": "reviews", "visit": 1}),
        ("branch_started", {"workflow": "security-review", "token": SECURITY}),
        ("branch_started", {"workflow": "design-review", "token": DESIGN}),
    ]
    child = plane.engine.get(SECURITY)
    assert (child.state, child.status, child.parent) == ("triage", "active", "T-1")
    assert child.context == {"repo": "acme/api", "branch": "feature"}
    assert [token.token for token in plane.engine.list_tokens(parent="T-1")] == [DESIGN, SECURITY]


def test_a_childs_task_is_claimed_by_workflow_and_state(plane: Plane) -> None:
    to_reviews(plane)
    grant = plane.engine.claim("box-1", ["design-review/triage"])
    assert grant is not None
    assert (grant.token, grant.state) == (DESIGN, "design-review/triage")
    token = plane.engine.report(
        grant.task,
        ReportBody(kind="event", event="judged", payload={"ok": True}, supervisor="box-1"),
    )
    assert token.state == "approved"


def test_join_all_waits_for_every_child_and_routes_on_the_branches(plane: Plane) -> None:
    to_reviews(plane)
    finish(plane, SECURITY, True)
    assert plane.engine.get("T-1").state == "reviews"
    finish(plane, DESIGN, True)
    parent = plane.engine.get("T-1")
    assert parent.state == "merging"
    accepted = [data for kind, data in plane.entries("T-1") if kind == "event_accepted"][-1]
    assert accepted["event"] == "joined"
    assert {branch["token"] for branch in accepted["payload"]["branches"]} == {SECURITY, DESIGN}
    assert accepted["payload"]["branches"][0]["status"] == "completed"
    assert accepted["payload"]["branches"][0]["final"] == "approved"


def test_one_rejection_sends_the_parent_back(plane: Plane) -> None:
    to_reviews(plane)
    finish(plane, SECURITY, True)
    finish(plane, DESIGN, False)
    assert plane.engine.get("T-1").state == "coding"


def test_join_any_goes_on_with_the_first_and_cancels_the_others(backend: Backend) -> None:
    served = plane_for(sdlc(join="any"), backend)
    to_reviews(served)
    finish(served, SECURITY, True)
    assert served.engine.get("T-1").state == "merging"
    other = served.engine.get(DESIGN)
    assert other.status == "cancelled"
    assert served.entries(DESIGN)[-1] == (
        "cancelled",
        {"reason": "the parent left 'reviews' on 'joined'"},
    )
    served.store.close()


def test_a_timeout_of_the_parallel_state_cancels_the_children(backend: Backend) -> None:
    served = plane_for(sdlc(timeout="1h"), backend)
    to_reviews(served)
    served.clock.advance(3600)
    tick(served.engine)
    assert served.engine.get("T-1").state == "coding"
    assert served.engine.get(SECURITY).status == "cancelled"
    assert served.engine.get(DESIGN).status == "cancelled"
    served.store.close()


def test_cancelling_the_parent_cancels_its_children(plane: Plane) -> None:
    to_reviews(plane)
    plane.engine.cancel("T-1")
    assert plane.engine.get(SECURITY).status == "cancelled"
    assert plane.engine.get(DESIGN).status == "cancelled"


def test_children_cannot_be_steered_alone(plane: Plane) -> None:
    to_reviews(plane)
    for steer in (plane.engine.pause, plane.engine.resume, plane.engine.cancel):
        with pytest.raises(ChildToken, match="its top token"):
            steer(SECURITY)


def test_pausing_the_parent_pauses_the_children_and_held_events_apply_in_arrival_order(
    backend: Backend,
) -> None:
    served = plane_for(sdlc(join="any"), backend)
    to_reviews(served)
    served.engine.pause("T-1")
    assert served.engine.get(SECURITY).status == "paused"
    assert served.engine.claim("box-1", ["security-review/triage"]) is None
    served.engine.fire(DESIGN, "judged", {"ok": False})
    served.engine.fire(SECURITY, "judged", {"ok": True})
    served.engine.fire(DESIGN, "close")
    served.engine.fire(SECURITY, "close")
    served.engine.resume("T-1")
    # the design review ended first, so join="any" goes on with it: rejected, back to coding
    assert served.engine.get("T-1").state == "coding"
    assert served.engine.get(SECURITY).status == "cancelled"
    served.store.close()


LONG = "T" * 110


@pytest.fixture
def long_plane(backend: Backend) -> Iterator[Plane]:
    """`sdlc` with a token whose children's ids would be longer than 128 characters."""
    served = plane_for(sdlc(), backend)
    served.engine.start(LONG, {"repo": "r"})
    yield served
    served.store.close()


def stayed_in_coding(plane: Plane) -> None:
    token = plane.engine.get(LONG)
    assert (token.state, token.status, token.visit) == ("coding", "active", 1)
    assert plane.engine.list_tokens(parent=LONG) == []


def test_a_child_id_longer_than_128_characters_refuses_the_event(long_plane: Plane) -> None:
    with pytest.raises(EventNotAllowed, match="more than 128"):
        long_plane.engine.fire(LONG, "done")
    kind, data = long_plane.entries(LONG)[-1]
    assert (kind, data["event"]) == ("event_rejected", "done")
    assert "more than 128" in data["reason"]
    stayed_in_coding(long_plane)


def test_a_report_whose_event_would_start_too_long_a_child_is_refused(long_plane: Plane) -> None:
    grant = long_plane.engine.claim("box-1", ["coding"])
    assert grant is not None
    with pytest.raises(EventNotAllowed, match="more than 128"):
        long_plane.engine.report(
            grant.task, ReportBody(kind="event", event="done", supervisor="box-1", attempt=1)
        )
    assert long_plane.kinds(LONG)[-1] == "event_rejected"
    stayed_in_coding(long_plane)
    assert long_plane.engine.claim("box-1", ["coding"], None) is None


def test_a_timer_whose_event_would_start_too_long_a_child_is_rejected(long_plane: Plane) -> None:
    grant = long_plane.engine.claim("box-1", ["coding"])
    assert grant is not None
    later = Schedule(event="done", after="1m")
    long_plane.engine.report(
        grant.task, ReportBody(kind="waiting", schedules=[later], supervisor="box-1", attempt=1)
    )
    long_plane.clock.advance(60)
    tick(long_plane.engine)
    assert long_plane.kinds(LONG)[-2:] == ["timer_fired", "event_rejected"]
    stayed_in_coding(long_plane)


def test_a_token_whose_first_state_would_start_too_long_a_child_is_not_started(
    backend: Backend,
) -> None:
    flow = Workflow("straight", context=Ticket)
    reviews = flow.state(
        "reviews", parallel=[review_workflow("security-review")], inputs=["repo", "branch"]
    )
    flow.transition(START, reviews)
    flow.transition(reviews, END, on="joined")
    served = plane_for(flow, backend)
    with pytest.raises(InvalidTokenId, match="more than 128"):
        served.engine.start("S" * 110, {"repo": "r"})
    assert served.engine.list_tokens() == []
    served.store.close()


def test_siblings_that_end_at_once_join_their_parent_once(plane: Plane) -> None:
    parents = [f"T-{index}" for index in range(1, 7)]
    for parent in parents:
        plane.engine.start(parent, {"repo": "acme/api"})
        plane.engine.fire(parent, "done")
    children = [
        f"{parent}.reviews.1.{review}"
        for parent in parents
        for review in ("security-review", "design-review")
    ]

    answers = together(lambda index: finish(plane, children[index], True), threads=len(children))
    assert answers == [None] * len(children)
    for parent in parents:
        assert plane.engine.get(parent).state == "merging"
        joined = [data for kind, data in plane.entries(parent) if kind == "event_accepted"]
        assert [data["event"] for data in joined].count("joined") == 1


def test_stats_name_the_states_of_children_as_supervisors_claim_them(plane: Plane) -> None:
    to_reviews(plane)
    found = stats(plane.engine)
    assert found.tokens == {
        "reviews": {"active": 1},
        "security-review/triage": {"active": 1},
        "design-review/triage": {"active": 1},
    }
    assert found.tasks == {
        "security-review/triage": {"queued": 1},
        "design-review/triage": {"queued": 1},
    }
    assert set(found.oldest_queued) == {"security-review/triage", "design-review/triage"}


# the results of a build matrix


class Built(msgspec.Struct):
    ok: bool
    log: str


def build_workflow(name: str) -> Workflow:
    """A build on one platform: it ends with `built`, whose payload says how it went."""
    build = Workflow(name, context=Review)
    building = build.state("building")
    build.transition(START, building)
    build.transition(building, END, on=build.event("built", payload=Built))
    return build


def matrix() -> Workflow:
    """Two builds side by side; the parent ships only when every build says ok."""
    flow = Workflow("matrix", context=Ticket)
    builds = flow.state(
        "builds",
        parallel=[build_workflow("linux"), build_workflow("mac")],
        inputs=["repo", "branch"],
    )
    shipping = flow.state("shipping")
    fixing = flow.state("fixing")
    flow.transition(START, builds)
    flow.transition(builds, shipping, on="joined", when="branches.all(result.ok == true)")
    flow.transition(builds, fixing, on="joined", otherwise=True)
    flow.transition(shipping, END, on=flow.event("shipped"))
    flow.transition(fixing, END, on=flow.event("fixed"))
    return flow


LINUX, MAC = "M-1.builds.1.linux", "M-1.builds.1.mac"


@pytest.fixture
def matrix_plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(matrix(), backend)
    served.engine.start("M-1", {"repo": "acme/api"})
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "the counts drifted from the rows"


def build(plane: Plane, child: str, ok: bool) -> None:
    """Report the child's build task with `built`, as its supervisor would."""
    grant = plane.engine.claim("box-1", [f"{child.rsplit('.', 1)[1]}/building"])
    assert grant is not None and grant.token == child
    body = ReportBody(
        kind="event",
        event="built",
        payload={"ok": ok, "log": f"{child}: {'green' if ok else 'red'}"},
        supervisor="box-1",
    )
    plane.engine.report(grant.task, body)


def joined_branches(plane: Plane, token: str = "M-1") -> list[dict]:
    [accepted] = [
        data
        for kind, data in plane.entries(token)
        if kind == "event_accepted" and data["event"] == "joined"
    ]
    return accepted["payload"]["branches"]  # type: ignore[no-any-return]


def test_each_branch_carries_the_result_that_ended_its_child(matrix_plane: Plane) -> None:
    build(matrix_plane, LINUX, True)
    build(matrix_plane, MAC, True)
    assert matrix_plane.engine.get("M-1").state == "shipping"
    assert joined_branches(matrix_plane) == [
        {
            "workflow": "linux",
            "token": LINUX,
            "status": "completed",
            "final": "building",
            "payload": None,
            "result": {"ok": True, "log": f"{LINUX}: green"},
        },
        {
            "workflow": "mac",
            "token": MAC,
            "status": "completed",
            "final": "building",
            "payload": None,
            "result": {"ok": True, "log": f"{MAC}: green"},
        },
    ]


def test_a_build_that_is_not_ok_routes_the_parent_by_its_result(matrix_plane: Plane) -> None:
    build(matrix_plane, LINUX, True)
    build(matrix_plane, MAC, False)
    assert matrix_plane.engine.get("M-1").state == "fixing"
    results = [branch["result"] for branch in joined_branches(matrix_plane)]
    assert results == [
        {"ok": True, "log": f"{LINUX}: green"},
        {"ok": False, "log": f"{MAC}: red"},
    ]


def test_a_failed_child_has_no_result(matrix_plane: Plane) -> None:
    build(matrix_plane, LINUX, True)
    grant = matrix_plane.engine.claim("box-1", ["mac/building"])
    assert grant is not None
    matrix_plane.engine.report(
        grant.task, ReportBody(kind="failed", error="disk full", supervisor="box-1")
    )
    assert matrix_plane.engine.get(MAC).status == "failed"
    assert matrix_plane.engine.get("M-1").state == "fixing"
    branches = joined_branches(matrix_plane)
    assert [(branch["status"], branch["result"]) for branch in branches] == [
        ("completed", {"ok": True, "log": f"{LINUX}: green"}),
        ("failed", None),
    ]


def test_a_child_ended_by_a_fired_event_keeps_that_events_payload(matrix_plane: Plane) -> None:
    matrix_plane.engine.fire(LINUX, "built", {"ok": True, "log": "by hand"})
    matrix_plane.engine.fire(MAC, "built", {"ok": True, "log": "by hand too"})
    assert matrix_plane.engine.get("M-1").state == "shipping"
    assert [branch["result"]["log"] for branch in joined_branches(matrix_plane)] == [
        "by hand",
        "by hand too",
    ]
