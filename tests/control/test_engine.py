"""The engine, card by card: each operation's answer and the exact ledger entries it writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stateous import END, START, Workflow
from stateous.control.clock import tick
from stateous.control.errors import (
    AttemptOver,
    ChildToken,
    EventNotAllowed,
    InvalidArgument,
    InvalidContext,
    InvalidPayload,
    InvalidTokenId,
    TaskNotFound,
    TaskNotHeld,
    TokenNotActive,
    TokenNotFound,
)
from stateous.model.wire import Duplicate, ReportBody, Schedule
from tests.control.support import (
    Backend,
    Item,
    Plane,
    counts_drift,
    failure,
    fan_out,
    one_step,
    orders,
    plane_for,
)


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(orders(), backend)
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "the counts drifted from the rows"


def report(kind: str = "event", **fields) -> ReportBody:
    return ReportBody(kind=kind, **fields)  # type: ignore[arg-type]


def to_review(plane: Plane, token: str = "ORDER-1") -> int:
    """Start a token and bring it to `review`; return the review task's id."""
    plane.engine.start(token, {"title": "first order"})
    plane.engine.fire(token, "submitted")
    return plane.engine.claim("box-1", ["review"]).task  # type: ignore[union-attr]


# Start a token


def test_start_writes_the_token_its_first_move_and_its_task(plane: Plane) -> None:
    token, created = plane.engine.start("ORDER-1", {"title": "first order"})
    assert created
    assert (token.token, token.state, token.status, token.visit) == (
        "ORDER-1",
        "draft",
        "active",
        1,
    )
    assert token.context == {"title": "first order", "amount": 0, "tags": []}
    assert plane.entries("ORDER-1") == [
        ("started", {"context": {"title": "first order", "amount": 0, "tags": []}}),
        ("event_accepted", {"event": "__started__", "payload": None, "state": "__start__"}),
        ("entered", {"state": "draft", "visit": 1}),
        ("task_queued", {"task": 1, "state": "draft"}),
    ]


def test_text_that_looks_like_sql_is_kept_as_it_was_given(plane: Plane) -> None:
    tricky = "it's a \\ back'slash; $1 %s ? -- DROP TABLE tokens; \u00e9\u4e2d \u2603"
    plane.engine.start("QUOTE-1", {"title": tricky, "tags": [tricky, "'", '"']})
    plane.engine.fire("QUOTE-1", "remind", key=tricky)
    assert plane.engine.get("QUOTE-1").context["title"] == tricky
    assert plane.engine.get("QUOTE-1").context["tags"] == [tricky, "'", '"']
    # The same key again is a duplicate: it was kept as given.
    assert plane.engine.fire("QUOTE-1", "remind", key=tricky).token.visit == 2


def test_start_of_an_existing_token_answers_it_and_changes_nothing(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "first"})
    token, created = plane.engine.start("ORDER-1", {"title": "other"})
    assert not created
    assert token.context["title"] == "first"
    assert len(plane.kinds("ORDER-1")) == 4


@pytest.mark.parametrize("bad", ["", "-x", ".x", "a b", "x" * 129, "ü", "a/b"])
def test_a_bad_token_id_is_refused(plane: Plane, bad: str) -> None:
    with pytest.raises(InvalidTokenId):
        plane.engine.start(bad, {"title": "x"})


def test_an_id_of_128_characters_is_accepted(plane: Plane) -> None:
    assert plane.engine.start("A" * 128, {"title": "x"})[1]


def test_an_id_that_differs_only_in_case_is_refused(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    with pytest.raises(InvalidTokenId, match="differs only in case from the token 'ORDER-1'"):
        plane.engine.start("order-1", {"title": "x"})


def test_a_context_that_does_not_fit_names_the_field(plane: Plane) -> None:
    with pytest.raises(InvalidContext, match=r"context\.amount"):
        plane.engine.start("ORDER-1", {"title": "x", "amount": "ten"})
    with pytest.raises(InvalidContext, match=r"context\.title"):
        plane.engine.start("ORDER-1", {})
    with pytest.raises(TokenNotFound):
        plane.engine.get("ORDER-1")


def test_guards_from_start_choose_the_first_state(backend: Backend) -> None:
    flow = Workflow("split", context=Item)
    small = flow.state("small")
    large = flow.state("large")
    flow.transition(START, large, when="ctx['amount'] > 100")
    flow.transition(START, small, when="ctx['amount'] <= 10")
    flow.transition(small, END, on="timeout")
    flow.transition(large, END, on="timeout")
    served = plane_for(flow, backend)
    assert served.engine.start("A", {"title": "x", "amount": 500})[0].state == "large"
    assert served.engine.start("B", {"title": "x", "amount": 5})[0].state == "small"
    with pytest.raises(InvalidContext, match="no transition from START holds"):
        served.engine.start("C", {"title": "x", "amount": 50})
    served.store.close()


# Fire an event


def test_fire_moves_the_token_and_cancels_the_queued_task(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    token = plane.engine.fire("ORDER-1", "submitted", None, "delivery-1")
    assert token.state == "review"
    assert plane.entries("ORDER-1")[4:] == [
        ("event_accepted", {"event": "submitted", "payload": None, "state": "draft"}),
        ("task_cancelled", {"task": 1}),
        ("entered", {"state": "review", "visit": 1}),
        ("task_queued", {"task": 2, "state": "review"}),
        (
            "timer_set",
            {"timer": 1, "event": "timeout", "due_at": "2027-01-15T09:00:00Z", "kind": "timeout"},
        ),
    ]


def test_a_second_delivery_of_a_key_is_a_duplicate_and_changes_nothing(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "submitted", None, "delivery-1")
    rows = len(plane.kinds("ORDER-1"))
    again = plane.engine.fire("ORDER-1", "submitted", None, "delivery-1")
    assert isinstance(again, Duplicate)
    assert again.token.state == "review"
    assert len(plane.kinds("ORDER-1")) == rows


def test_a_key_stays_used_across_a_pause(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.pause("ORDER-1")
    plane.engine.fire("ORDER-1", "submitted", None, "delivery-1")
    assert isinstance(plane.engine.fire("ORDER-1", "submitted", None, "delivery-1"), Duplicate)
    plane.engine.resume("ORDER-1")
    assert isinstance(plane.engine.fire("ORDER-1", "submitted", None, "delivery-1"), Duplicate)


@pytest.mark.parametrize("key", ["", "k" * 257, "a\nb", "tab\there"])
def test_a_bad_idempotency_key_is_refused(plane: Plane, key: str) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    with pytest.raises(InvalidPayload, match="idempotency key"):
        plane.engine.fire("ORDER-1", "submitted", None, key)
    assert len(plane.kinds("ORDER-1")) == 4


def test_an_event_that_the_state_has_no_transition_for_is_rejected_and_recorded(
    plane: Plane,
) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    with pytest.raises(EventNotAllowed, match="'draft' has no transition on 'reviewed'"):
        plane.engine.fire("ORDER-1", "reviewed", {"approved": True})
    assert plane.entries("ORDER-1")[-1] == (
        "event_rejected",
        {"event": "reviewed", "reason": "'draft' has no transition on 'reviewed'"},
    )
    assert plane.engine.get("ORDER-1").state == "draft"


@pytest.mark.parametrize("event", ["timeout", "error", "joined", "shipped"])
def test_events_of_stateous_and_undeclared_events_cannot_be_fired(plane: Plane, event: str) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    with pytest.raises(EventNotAllowed):
        plane.engine.fire("ORDER-1", event)
    assert plane.kinds("ORDER-1")[-1] == "event_rejected"


def test_a_payload_that_does_not_fit_is_refused_without_a_ledger_entry(plane: Plane) -> None:
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "submitted")
    rows = len(plane.kinds("ORDER-1"))
    with pytest.raises(InvalidPayload, match=r"payload\.approved"):
        plane.engine.fire("ORDER-1", "reviewed", {"approved": "yes"})
    with pytest.raises(InvalidPayload, match="'submitted' has no payload"):
        plane.engine.fire("ORDER-1", "submitted", {"x": 1})
    assert len(plane.kinds("ORDER-1")) == rows


def test_a_guard_on_the_payload_chooses_and_the_fallback_catches_the_rest(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    plane.engine.fire("A", "submitted")
    assert plane.engine.fire("A", "reviewed", {"approved": False}).state == "draft"
    assert plane.engine.get("A").visit == 2
    plane.engine.fire("A", "submitted")
    done = plane.engine.fire("A", "reviewed", {"approved": True})
    assert (done.state, done.status, done.visit) == ("review", "completed", 2)
    assert plane.kinds("A")[-1] == "completed"


def test_an_event_on_an_ended_token_is_refused_and_recorded(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    plane.engine.cancel("A")
    with pytest.raises(TokenNotActive, match="token 'A' is cancelled; it takes no events"):
        plane.engine.fire("A", "submitted")
    assert plane.kinds("A")[-1] == "event_rejected"


def test_fire_on_an_unknown_token(plane: Plane) -> None:
    with pytest.raises(TokenNotFound, match="no token has the id 'NOPE'"):
        plane.engine.fire("NOPE", "submitted")


def test_count_counts_the_event_over_the_life_of_the_token(backend: Backend) -> None:
    flow = Workflow("sdlc", context=Item)
    coding = flow.state("coding")
    testing = flow.state("testing")
    done = flow.event("done")
    failed = flow.event("failed")
    flow.transition(START, coding)
    flow.transition(coding, testing, on=done)
    flow.transition(testing, coding, on=failed, when="count('failed') < 3")
    flow.transition(testing, END, on=failed, otherwise=True)
    served = plane_for(flow, backend)
    served.engine.start("T", {"title": "x"})
    for _ in range(2):
        served.engine.fire("T", "done")
        assert served.engine.fire("T", "failed").state == "coding"
    served.engine.fire("T", "done")
    assert served.engine.fire("T", "failed").status == "completed"
    served.store.close()


# Claim, heartbeat and report


def test_a_claim_grants_the_oldest_queued_task_with_its_lease(plane: Plane) -> None:
    plane.engine.start("A", {"title": "a"})
    plane.engine.start("B", {"title": "b"})
    grant = plane.engine.claim("box-1", ["draft"], "req-1")
    assert grant is not None
    assert (grant.task, grant.token, grant.state, grant.visit, grant.attempt) == (
        1,
        "A",
        "draft",
        1,
        1,
    )
    assert grant.context == {"title": "a", "amount": 0, "tags": []}
    assert grant.memory == {}
    assert grant.entered_by.name == "__started__"
    assert grant.lease == 120
    assert plane.entries("A")[-1] == (
        "task_claimed",
        {"task": 1, "supervisor": "box-1", "attempt": 1},
    )


def test_a_repeated_claim_gets_the_same_grant_and_a_new_lease(plane: Plane) -> None:
    plane.engine.start("A", {"title": "a"})
    plane.engine.start("B", {"title": "b"})
    first = plane.engine.claim("box-1", ["draft"], "req-1")
    plane.clock.advance(100)
    again = plane.engine.claim("box-1", ["draft"], "req-1")
    assert again == first
    assert plane.kinds("A").count("task_claimed") == 1
    plane.clock.advance(100)  # 200 s after the claim, 100 s after the renewal
    tick(plane.engine)
    assert "task_failed" not in plane.kinds("A")
    other = plane.engine.claim("box-1", ["draft"], "req-2")
    assert other is not None and other.token == "B"


def test_a_claim_with_nothing_queued_answers_none(plane: Plane) -> None:
    assert plane.engine.claim("box-1", ["draft", "review"], "req-1") is None


def test_a_paused_tokens_tasks_are_not_claimed(plane: Plane) -> None:
    plane.engine.start("A", {"title": "a"})
    plane.engine.pause("A")
    assert plane.engine.claim("box-1", ["draft"]) is None
    plane.engine.resume("A")
    assert plane.engine.claim("box-1", ["draft"]) is not None


@pytest.mark.parametrize(
    ("supervisor", "states", "request_id"),
    [
        ("", ["draft"], None),
        ("x" * 257, ["draft"], None),
        ("box\x00one", ["draft"], None),
        ("box\tone", ["draft"], None),
        ("box", ["s" * 130], None),
        ("box", ["draft"] * 1001, None),
        ("box", ["draft"], "bad id"),
        ("box", ["draft"], "r" * 65),
    ],
)
def test_a_bad_claim_is_refused(
    plane: Plane, supervisor: str, states: list[str], request_id: str | None
) -> None:
    with pytest.raises(InvalidArgument):
        plane.engine.claim(supervisor, states, request_id)


def test_a_heartbeat_renews_held_tasks_and_names_the_lost_ones(plane: Plane) -> None:
    task = to_review(plane)
    plane.clock.advance(100)
    assert plane.engine.heartbeat("box-1", [task, 999]) == [999]
    assert plane.engine.heartbeat("box-2", [task]) == [task]
    plane.clock.advance(100)
    tick(plane.engine)
    assert "task_failed" not in plane.kinds("ORDER-1")


def test_a_report_of_an_event_moves_the_token(plane: Plane) -> None:
    task = to_review(plane)
    before = len(plane.kinds("ORDER-1"))
    token = plane.engine.report(
        task,
        report(
            event="reviewed",
            payload={"approved": True},
            context={"amount": 3},
            attempt=1,
            supervisor="box-1",
        ),
    )
    assert (token.status, token.context["amount"]) == ("completed", 3)
    assert plane.entries("ORDER-1")[before:] == [
        ("context_changed", {"changes": {"amount": 3}}),
        (
            "event_accepted",
            {"event": "reviewed", "payload": {"approved": True, "note": ""}, "state": "review"},
        ),
        ("task_done", {"task": task}),
        ("completed", {}),
    ]


def test_a_report_of_an_event_the_state_cannot_emit_is_rejected(plane: Plane) -> None:
    task = to_review(plane)
    with pytest.raises(EventNotAllowed, match="'review' cannot emit 'submitted'"):
        plane.engine.report(task, report(event="submitted", supervisor="box-1"))
    assert plane.kinds("ORDER-1")[-1] == "event_rejected"


def test_a_bad_context_change_is_refused_and_saves_nothing(plane: Plane) -> None:
    task = to_review(plane)
    rows = len(plane.kinds("ORDER-1"))
    with pytest.raises(InvalidContext, match=r"context\.amount"):
        plane.engine.report(
            task,
            report(
                event="reviewed",
                payload={"approved": True},
                context={"amount": "x"},
                supervisor="box-1",
            ),
        )
    assert len(plane.kinds("ORDER-1")) == rows
    assert plane.engine.get("ORDER-1").context["amount"] == 0


def test_waiting_keeps_the_task_for_a_report_from_outside(plane: Plane) -> None:
    task = to_review(plane)
    waiting = plane.engine.report(
        task,
        report(
            kind="waiting",
            context={"tags": ["ci"]},
            schedules=[Schedule(event="reviewed", after="2h", payload={"approved": False})],
            supervisor="box-1",
        ),
    )
    assert waiting.context["tags"] == ["ci"]
    assert plane.kinds("ORDER-1")[-3:] == ["context_changed", "timer_set", "task_waiting"]
    with pytest.raises(TaskNotHeld):
        plane.engine.report(
            task, report(event="reviewed", payload={"approved": True}, supervisor="box-1")
        )
    done = plane.engine.report(
        task, report(event="reviewed", payload={"approved": True}, attempt=1)
    )
    assert done.status == "completed"


def test_a_routines_timer_fires_its_event_later(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    task = plane.engine.claim("box-1", ["draft"]).task  # type: ignore[union-attr]
    plane.engine.report(
        task,
        report(
            kind="waiting", schedules=[Schedule(event="submitted", after="10m")], supervisor="box-1"
        ),
    )
    plane.clock.advance(599)
    tick(plane.engine)
    assert plane.engine.get("A").state == "draft"
    plane.clock.advance(1)
    tick(plane.engine)
    assert plane.engine.get("A").state == "review"
    assert "timer_fired" in plane.kinds("A")


def test_a_timer_cannot_fire_an_event_of_stateous(plane: Plane) -> None:
    task = to_review(plane)
    with pytest.raises(InvalidPayload, match="a timer cannot fire 'timeout'"):
        plane.engine.report(
            task,
            report(
                kind="waiting",
                schedules=[Schedule(event="timeout", after="1m")],
                supervisor="box-1",
            ),
        )
    with pytest.raises(InvalidPayload, match="is not a duration"):
        plane.engine.report(
            task,
            report(
                kind="waiting",
                schedules=[Schedule(event="remind", after="soon")],
                supervisor="box-1",
            ),
        )


def test_a_failed_attempt_with_retries_left_is_tried_again(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.report(task, report(kind="failed", error="boom", attempt=1, supervisor="box-1"))
    assert plane.entries("ORDER-1")[-2:] == [
        ("task_failed", failure(task, "boom")),
        ("task_retrying", {"task": task, "attempt": 2}),
    ]
    again = plane.engine.claim("box-2", ["review"])
    assert again is not None and (again.task, again.attempt) == (task, 2)


def test_the_last_failed_attempt_delivers_error(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.report(task, report(kind="failed", error="boom", supervisor="box-1"))
    plane.engine.claim("box-1", ["review"])
    token = plane.engine.report(task, report(kind="failed", error="boom again", supervisor="box-1"))
    assert token.state == "held"
    assert plane.entries("ORDER-1")[-4:] == [
        ("task_failed", failure(task, "boom again")),
        ("event_accepted", {"event": "error", "payload": None, "state": "review"}),
        ("entered", {"state": "held", "visit": 1}),
        ("task_queued", {"task": task + 1, "state": "held"}),
    ]


def test_without_a_transition_on_error_the_token_fails(backend: Backend) -> None:
    served = plane_for(orders(), backend)
    served.engine.start("A", {"title": "x"})
    task = served.engine.claim("box-1", ["draft"]).task  # type: ignore[union-attr]
    token = served.engine.report(task, report(kind="failed", error="boom", supervisor="box-1"))
    assert token.status == "failed"
    assert served.entries("A")[-2:] == [
        ("task_failed", failure(task, "boom")),
        (
            "failed",
            {"reason": "'draft' failed, and has no transition on 'error': boom"},
        ),
    ]
    served.store.close()


def test_a_report_for_an_attempt_that_is_over_is_refused(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.report(task, report(kind="failed", error="boom", supervisor="box-1"))
    with pytest.raises(TaskNotHeld):
        plane.engine.report(
            task, report(kind="event", event="reviewed", attempt=1, supervisor="box-1")
        )
    plane.engine.claim("box-2", ["review"])
    with pytest.raises(AttemptOver, match=f"task {task} has moved on from attempt 1"):
        plane.engine.report(
            task,
            report(event="reviewed", payload={"approved": True}, attempt=1, supervisor="box-1"),
        )
    with pytest.raises(AttemptOver):
        plane.engine.note(task, "late", attempt=1)
    with pytest.raises(TaskNotFound):
        plane.engine.report(12345, report(kind="failed"))


def test_notes_and_memory_go_to_the_ledger_without_the_value(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.note(task, "  working on it  ", 1)
    plane.engine.memory(task, "dev", {"session": "abc"}, 1)
    plane.engine.memory(task, "dev", None, 1)
    assert plane.entries("ORDER-1")[-3:] == [
        ("note", {"task": task, "text": "working on it"}),
        ("memory_set", {"task": task, "state": "review", "memory_key": "dev"}),
        ("memory_deleted", {"task": task, "state": "review", "memory_key": "dev"}),
    ]
    for bad in ("", "   ", "x" * 501):
        with pytest.raises(InvalidPayload):
            plane.engine.note(task, bad)
    for key in ("", "k" * 129, "k\x00", "line\nbreak"):
        with pytest.raises(InvalidPayload):
            plane.engine.memory(task, key, 1)


def test_memory_survives_a_retry_and_is_deleted_when_the_token_ends(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.memory(task, "dev", "session-1", 1)
    plane.engine.report(task, report(kind="failed", error="crash", supervisor="box-1"))
    grant = plane.engine.claim("box-2", ["review"])
    assert grant is not None and grant.memory == {"dev": "session-1"}
    plane.engine.report(
        task, report(event="reviewed", payload={"approved": True}, supervisor="box-2")
    )
    assert plane.store.read(lambda tx: tx.grant_reads("ORDER-1", "review")).memory == {}


# Lease expiry and timers


def test_an_ended_lease_counts_a_failed_attempt(plane: Plane) -> None:
    task = to_review(plane)
    plane.clock.advance(119)
    tick(plane.engine)
    assert "task_failed" not in plane.kinds("ORDER-1")
    plane.clock.advance(1)
    tick(plane.engine)
    assert plane.entries("ORDER-1")[-2:] == [
        ("task_failed", failure(task, "box-1 stopped answering: no heartbeat for 2 minutes")),
        ("task_retrying", {"task": task, "attempt": 2}),
    ]
    with pytest.raises(TaskNotHeld):
        plane.engine.report(task, report(event="reviewed", attempt=1, supervisor="box-1"))


def test_a_timeout_that_no_transition_takes_fails_the_token(backend: Backend) -> None:
    flow = orders(review_timeout="30s")
    served = plane_for(flow, backend)
    to_review(served, "A")
    served.clock.advance(30)
    tick(served.engine)
    token = served.engine.get("A")
    assert token.status == "failed"
    assert served.kinds("A")[-3:] == ["timer_fired", "task_cancelled", "failed"]
    assert served.entries("A")[-1][1]["reason"].startswith("'review' timed out")
    served.store.close()


def test_a_timeout_with_a_transition_moves_the_token(backend: Backend) -> None:
    flow = Workflow("wait", context=Item)
    waiting = flow.state("waiting", timeout="1m")
    flow.transition(START, waiting)
    flow.transition(waiting, END, on="timeout")
    served = plane_for(flow, backend)
    served.engine.start("A", {"title": "x"})
    served.clock.advance(60)
    tick(served.engine)
    assert served.engine.get("A").status == "completed"
    assert served.kinds("A")[-4:] == [
        "timer_fired",
        "event_accepted",
        "task_cancelled",
        "completed",
    ]
    served.store.close()


def test_a_timer_of_an_earlier_visit_never_fires(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    plane.engine.fire("A", "submitted")
    plane.engine.fire("A", "reviewed", {"approved": False})
    plane.clock.advance(7200)
    tick(plane.engine)
    token = plane.engine.get("A")
    assert (token.state, token.status) == ("draft", "active")
    assert "timer_fired" not in plane.kinds("A")


# Pause, resume and cancel


def test_pause_holds_events_and_resume_applies_them_in_order(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    paused = plane.engine.pause("A")
    assert paused.status == "paused"
    assert plane.engine.fire("A", "submitted").state == "draft"
    assert plane.engine.fire("A", "reviewed", {"approved": True}).status == "paused"
    assert plane.entries("A")[-2:] == [
        ("event_deferred", {"event": "submitted", "payload": None, "arrival": 1}),
        (
            "event_deferred",
            {"event": "reviewed", "payload": {"approved": True, "note": ""}, "arrival": 2},
        ),
    ]
    resumed = plane.engine.resume("A")
    assert (resumed.state, resumed.status) == ("review", "completed")
    kinds = plane.kinds("A")
    assert kinds[kinds.index("resumed") :] == [
        "resumed",
        "event_replayed",
        "event_accepted",
        "task_cancelled",
        "entered",
        "task_queued",
        "timer_set",
        "event_replayed",
        "event_accepted",
        "task_cancelled",
        "completed",
    ]


def test_a_held_event_that_no_longer_fits_is_dropped_on_resume(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    plane.engine.pause("A")
    plane.engine.fire("A", "reviewed", {"approved": True})
    plane.engine.resume("A")
    assert plane.entries("A")[-1] == (
        "event_dropped",
        {"event": "reviewed", "reason": "'draft' has no transition on 'reviewed'"},
    )


def test_timers_get_the_paused_time_back(backend: Backend) -> None:
    served = plane_for(orders(review_timeout="1h"), backend)
    served.engine.start("A", {"title": "x"})
    served.engine.fire("A", "submitted")
    served.clock.advance(1800)
    served.engine.pause("A")
    served.clock.advance(7200)
    tick(served.engine)
    assert served.engine.get("A").status == "paused"
    served.engine.resume("A")
    served.clock.advance(1799)
    tick(served.engine)
    assert served.engine.get("A").status == "active"
    served.clock.advance(1)
    tick(served.engine)
    assert served.engine.get("A").status == "failed"
    assert served.kinds("A")[-4:] == ["resumed", "timer_fired", "task_cancelled", "failed"]
    served.store.close()


def test_a_report_while_paused_is_held_whole_and_applied_on_resume(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.pause("ORDER-1")
    token = plane.engine.report(
        task,
        report(
            event="reviewed", payload={"approved": True}, context={"amount": 9}, supervisor="box-1"
        ),
    )
    assert (token.status, token.context["amount"]) == ("paused", 0)
    assert plane.kinds("ORDER-1")[-1] == "event_deferred"
    plane.clock.advance(600)
    tick(plane.engine)  # the task waits: no lease runs out while the outcome is held
    done = plane.engine.resume("ORDER-1")
    assert (done.status, done.context["amount"]) == ("completed", 9)


def test_a_held_report_dropped_on_resume_queues_its_task_again(backend: Backend) -> None:
    flow = Workflow("guarded", context=Item)
    count, done = flow.state("count"), flow.state("done")
    flow.transition(START, count)
    flow.transition(count, done, on=flow.event("go"), when="ctx['amount'] < 5")
    flow.transition(done, END, on=flow.event("fin"))
    served = plane_for(flow, backend)
    served.engine.start("A", {"title": "x"})
    grant = served.engine.claim("box-1", ["count"])
    assert grant is not None
    served.engine.pause("A")
    served.engine.report(grant.task, report(event="go", supervisor="box-1", attempt=1))
    # The held outcome leaves the task waiting, so one from outside is taken too.
    served.engine.report(grant.task, report("waiting", context={"amount": 10}))

    resumed = served.engine.resume("A")

    assert (resumed.state, resumed.status) == ("count", "active")
    reason = "no guard of 'go' in 'count' holds, and it has no fallback"
    assert served.entries("A")[-2:] == [
        ("event_dropped", {"event": "go", "reason": reason}),
        ("task_retrying", {"task": grant.task, "attempt": 2}),
    ]
    again = served.engine.claim("box-2", ["count"])
    assert again is not None and (again.task, again.attempt) == (grant.task, 2)
    assert counts_drift(served.store) == {}
    served.store.close()


def test_a_retry_planned_while_paused_waits_its_delay_from_the_resume(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.pause("ORDER-1")
    plane.clock.advance(8)
    plane.engine.report(task, report("failed", error="down", retry_after=3, supervisor="box-1"))
    plane.clock.advance(1)
    plane.engine.resume("ORDER-1")

    plane.clock.advance(2)
    tick(plane.engine)
    assert plane.engine.claim("box-2", ["review"]) is None
    plane.clock.advance(1)
    tick(plane.engine)
    assert plane.kinds("ORDER-1")[-2:] == ["timer_fired", "task_retrying"]
    again = plane.engine.claim("box-2", ["review"])
    assert again is not None and (again.task, again.attempt) == (task, 2)


def test_only_an_active_token_pauses_and_only_a_paused_one_resumes(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    with pytest.raises(TokenNotActive):
        plane.engine.resume("A")
    plane.engine.pause("A")
    with pytest.raises(TokenNotActive):
        plane.engine.pause("A")
    with pytest.raises(TokenNotFound):
        plane.engine.pause("B")


def test_cancel_stops_the_token_its_task_and_its_held_events(plane: Plane) -> None:
    task = to_review(plane)
    plane.engine.memory(task, "dev", "s", 1)
    plane.engine.pause("ORDER-1")
    plane.engine.fire("ORDER-1", "reviewed", {"approved": True})
    token = plane.engine.cancel("ORDER-1")
    assert token.status == "cancelled"
    assert plane.entries("ORDER-1")[-3:] == [
        ("event_dropped", {"event": "reviewed", "reason": "the token was cancelled"}),
        ("task_cancelled", {"task": task}),
        ("cancelled", {}),
    ]
    assert plane.engine.heartbeat("box-1", [task]) == [task]
    # A cancelled token keeps its memory, for a retry.
    assert plane.store.read(lambda tx: tx.grant_reads("ORDER-1", "review")).memory == {"dev": "s"}
    with pytest.raises(TokenNotActive):
        plane.engine.cancel("ORDER-1")


def test_a_child_token_cannot_be_steered_alone(backend: Backend) -> None:
    served = plane_for(fan_out("parent", "fan", one_step("check", "ok")), backend)
    served.engine.start("P", {"title": "x"})
    for steer in (served.engine.pause, served.engine.resume, served.engine.cancel):
        with pytest.raises(ChildToken):
            steer("P.fan.1.check")
    served.store.close()


# Listing


def test_listing_filters_and_limits(plane: Plane) -> None:
    for name in ("A", "B", "C"):
        plane.engine.start(name, {"title": name})
        plane.clock.advance(1)
    plane.engine.cancel("B")
    assert [token.token for token in plane.engine.list_tokens()] == ["B", "C", "A"]
    assert [token.token for token in plane.engine.list_tokens(status="active")] == ["C", "A"]
    assert [token.token for token in plane.engine.list_tokens(limit="1")] == ["B"]
    for bad in ({"status": "done"}, {"limit": "0"}, {"limit": "1001"}, {"limit": "x"}):
        with pytest.raises(InvalidArgument):
            plane.engine.list_tokens(**bad)


# Faults


def test_a_write_that_waits_too_long_for_the_sqlite_lock_is_database_busy(tmp_path: Path) -> None:
    import apsw

    from stateous.control.engine import Engine
    from stateous.control.errors import DatabaseBusy
    from stateous.control.graph import Graph
    from stateous.control.store.sqlite import SqliteStore

    served = plane_for(orders(), Backend("sqlite", tmp_path, str(tmp_path / "db.sqlite")))
    served.store.close()
    store = SqliteStore(tmp_path / "db.sqlite", busy=200)
    engine = Engine(Graph.load(tmp_path / "graph.json"), store)
    other = apsw.Connection(str(tmp_path / "db.sqlite"))
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseBusy):
            engine.start("A", {"title": "x"})
    finally:
        other.execute("ROLLBACK")
    assert engine.start("A", {"title": "x"})[1]
    store.close()


def test_a_report_from_outside_needs_a_waiting_task(plane: Plane) -> None:
    task = to_review(plane)
    with pytest.raises(TaskNotHeld):
        plane.engine.report(task, report(event="reviewed", payload={"approved": True}))
    plane.engine.report(task, report(kind="waiting", supervisor="box-1"))
    done = plane.engine.report(task, report(event="reviewed", payload={"approved": True}))
    assert done.status == "completed"


def test_the_sqlite_writer_survives_a_broken_batch(tmp_path: Path) -> None:
    from stateous.control.errors import DatabaseBusy
    from stateous.control.store.sqlite import SqliteStore, SqliteTx

    store = SqliteStore(tmp_path / "writer.sqlite")

    def breaks_the_transaction(tx: SqliteTx) -> None:
        tx.execute("ROLLBACK")  # the writer's own transaction: its COMMIT now fails

    with pytest.raises(DatabaseBusy):
        store.write(breaks_the_transaction)
    assert store.write(lambda tx: tx.execute("SELECT 1")) == [(1,)]
    store.close()
