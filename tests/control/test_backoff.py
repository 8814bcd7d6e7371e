"""Backoff between attempts: `retry_delay` waits before the next attempt, doubling, capped,
with full jitter; the wait is a timer kept in the database; a routine may ask for its own."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.clock import tick
from stateous.control.errors import InvalidArgument, TaskNotHeld
from stateous.model.errors import DefinitionError
from stateous.model.graph_file import checksum, dump, structure
from stateous.model.wire import ReportBody
from tests.control.support import (
    Backend,
    Item,
    Plane,
    counts_drift,
    failure,
    orders,
    plane_for,
)


def backoff_flow(retries: int = 4, delay: str | None = "10s", cap: str | None = "30s") -> Workflow:
    """One state `call`, retried with backoff, that `done` ends and `error` fails."""
    flow = Workflow("calls", context=Item)
    call = flow.state("call", retries=retries, retry_delay=delay, retry_delay_max=cap)
    flow.transition(START, call)
    flow.transition(call, END, on=flow.event("done"))
    return flow


def failed(**fields: object) -> ReportBody:
    return ReportBody(kind="failed", error="503 from the provider", **fields)  # type: ignore[arg-type]


def fail_and_wait(plane: Plane, token: str) -> tuple[int, float]:
    """Claim the token's task, fail it, and answer the task and the seconds until the
    planned attempt, read from the ledger."""
    grant = plane.engine.claim("box-1", ["call"])
    assert grant is not None and grant.token == token
    plane.engine.report(grant.task, failed(supervisor="box-1", attempt=grant.attempt))
    planned = [data for kind, data in plane.entries(token) if kind == "timer_set"][-1]
    assert (planned["kind"], planned["task"], planned["attempt"]) == (
        "retry",
        grant.task,
        grant.attempt + 1,
    )
    set_at = datetime.fromisoformat(plane.engine.history(token)[-1].at)
    return grant.task, (datetime.fromisoformat(planned["due_at"]) - set_at).total_seconds()


@pytest.fixture
def plane(backend: Backend):
    served = plane_for(backoff_flow(), backend)
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "the counts drifted from the rows"


def test_the_next_attempt_waits_for_its_timer_doubling_capped_and_jittered(plane: Plane) -> None:
    ceilings = [10, 20, 30, 30]  # 10s, doubled, capped at 30s
    for attempt, ceiling in enumerate(ceilings, start=1):
        token = f"CALL-{attempt}"
        plane.engine.start(token, {"title": "x"})
        waits = []
        for _ in range(attempt):
            task, wait = fail_and_wait(plane, token)
            waits.append(wait)
            assert plane.engine.claim("box-1", ["call"]) is None, "queued before its time"
            tasks = plane.engine.listings.tasks().rows
            assert [(row.task, row.status) for row in tasks] == [(task, "waiting")]
            plane.clock.advance(wait + 1)
            tick(plane.engine)
        assert 0 <= waits[-1] <= ceiling
        assert plane.entries(token)[-2:] == [
            ("timer_fired", {"timer": plane.entries(token)[-2][1]["timer"], "event": "retry"}),
            ("task_retrying", {"task": task, "attempt": attempt + 1}),
        ]
        grant = plane.engine.claim("box-1", ["call"])
        assert grant is not None and (grant.task, grant.attempt) == (task, attempt + 1)
        plane.engine.report(task, ReportBody(kind="event", event="done", supervisor="box-1"))


def test_the_jitter_spreads_the_waits_within_the_bound(backend: Backend) -> None:
    plane = plane_for(backoff_flow(delay="1m", cap="1m"), backend)
    waits = []
    for number in range(12):
        plane.engine.start(f"CALL-{number}", {"title": "x"})
        waits.append(fail_and_wait(plane, f"CALL-{number}")[1])
    assert all(0 <= wait <= 60 for wait in waits)
    assert len({round(wait, 3) for wait in waits}) > 6, "the waits are not spread"
    plane.store.close()


def test_a_waiting_attempt_takes_no_report_from_outside_nor_an_unsigned_note(
    plane: Plane,
) -> None:
    plane.engine.start("CALL-1", {"title": "x"})
    task, _ = fail_and_wait(plane, "CALL-1")
    with pytest.raises(TaskNotHeld, match="is not waiting for an outcome from outside"):
        plane.engine.report(task, ReportBody(kind="event", event="done"))
    with pytest.raises(TaskNotHeld, match="nobody works on task"):
        plane.engine.note(task, "hello")


def test_a_routine_may_ask_for_its_own_wait_and_its_attempt_counts(plane: Plane) -> None:
    plane.engine.start("CALL-1", {"title": "x"})
    grant = plane.engine.claim("box-1", ["call"])
    assert grant is not None
    plane.engine.report(grant.task, failed(supervisor="box-1", retry_after=30.0))
    assert plane.entries("CALL-1")[-2][0] == "task_failed"
    kind, data = plane.entries("CALL-1")[-1]
    assert (kind, data["kind"], data["attempt"]) == ("timer_set", "retry", 2)
    plane.clock.advance(29)
    tick(plane.engine)
    assert plane.engine.claim("box-1", ["call"]) is None
    plane.clock.advance(2)
    tick(plane.engine)
    again = plane.engine.claim("box-1", ["call"])
    assert again is not None and again.attempt == 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retry_after": -1.0}, "retry_after is 0 to"),
        ({"retry_after": 1e12}, "retry_after is 0 to"),
    ],
)
def test_a_bad_retry_after_is_refused_and_changes_nothing(
    plane: Plane, fields: dict, message: str
) -> None:
    plane.engine.start("CALL-1", {"title": "x"})
    grant = plane.engine.claim("box-1", ["call"])
    assert grant is not None
    before = plane.entries("CALL-1")
    with pytest.raises(InvalidArgument, match=message):
        plane.engine.report(grant.task, failed(supervisor="box-1", **fields))
    with pytest.raises(InvalidArgument, match="only with a report of kind 'failed'"):
        plane.engine.report(
            grant.task,
            ReportBody(kind="event", event="done", supervisor="box-1", retry_after=3.0),
        )
    assert plane.entries("CALL-1") == before


def test_without_retry_delay_the_next_attempt_is_queued_at_once_as_before(
    backend: Backend,
) -> None:
    plane = plane_for(orders(), backend)
    plane.engine.start("ORDER-1", {"title": "x"})
    plane.engine.fire("ORDER-1", "submitted")
    task = plane.engine.claim("box-1", ["review"]).task  # type: ignore[union-attr]
    plane.engine.report(task, ReportBody(kind="failed", error="boom", supervisor="box-1"))
    assert plane.entries("ORDER-1")[-2:] == [
        ("task_failed", failure(task, "boom")),
        ("task_retrying", {"task": task, "attempt": 2}),
    ]
    assert plane.engine.claim("box-2", ["review"]) is not None
    plane.store.close()


def test_a_graph_without_the_fields_is_the_same_file_as_before() -> None:
    document = json.loads(dump(compile_workflow(orders())))
    assert "retry_delay" not in json.dumps(document)
    with_delay = compile_workflow(backoff_flow())
    without = compile_workflow(backoff_flow(delay=None, cap=None))
    states = json.loads(dump(with_delay))["states"]
    assert states["call"] == {
        "retries": 4,
        "retry_delay": "10s",
        "retry_delay_max": "30s",
        "emits": ["done"],
    }
    assert structure(with_delay) == structure(without)
    assert checksum(with_delay) != checksum(without)


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"retry_delay": "-5s"}, "retry_delay='-5s': '-5s' is not a duration"),
        ({"retry_delay": "0s"}, "it must be longer than zero"),
        ({"retry_delay": "10s", "retry_delay_max": "5s"}, "retry_delay_max='5s' is shorter"),
        ({"retry_delay_max": "1m"}, "retry_delay_max= goes with retry_delay="),
        ({"retry_delay": "10s", "retries": 0}, "retry_delay= needs retries= of 1 or more"),
    ],
)
def test_the_compiler_refuses_bad_backoff_values(keywords: dict, message: str) -> None:
    fields = {"retries": 2, **keywords}
    with pytest.raises(DefinitionError, match=message):
        Workflow("calls").state("call", **fields)
