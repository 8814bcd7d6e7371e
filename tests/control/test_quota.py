"""Quota reports in the engine, on both backends, with a hand-moved clock: what a report
without a resource, with a resource the task does not hold, with a reset in the past or too
far ahead, and without a stated reset does; a parked attempt lets go of its budget's
reservation; and a breaker's streak broken by a success."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.control import resources
from stateous.control.clock import tick
from stateous.control.errors import InvalidQuota, ResourceNotUsed
from stateous.control.store.rows import to_iso
from stateous.model.wire import ReportBody
from tests.control.support import Backend, Plane
from tests.control.test_resources import plane_of


class Job(msgspec.Struct):
    repo: str


def coding(
    *, uses: bool = True, breaker: int | None = None, reserve: dict[str, float] | None = None
) -> Workflow:
    """`code` takes one slot of the token's repo (or none); with `reserve`, it reserves that
    of a budget of 1 usd."""
    flow = Workflow("coding", context=Job, budget={"usd": 1} if reserve else None)
    flow.resource("repo", slots=2, breaker=breaker)
    uses_repo: dict[str, str | int] = {"repo": "ctx['repo']"} if uses else {}
    code = flow.state("code", uses=uses_repo, retries=3, reserve=reserve)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    plane = plane_of(coding(), backend)
    yield plane
    plane.store.close()


def claim(plane: Plane) -> int | None:
    grant = plane.engine.claim("box", ["code"])
    return None if grant is None else grant.task


def quota(plane: Plane, task: int, **fields: object) -> None:
    body = msgspec.convert({"kind": "quota", "supervisor": "box", **fields}, ReportBody)
    plane.engine.report(task, body)


def entry(plane: Plane, token: str, kind: str) -> dict:
    return [data for found, data in plane.entries(token) if found == kind][-1]


def test_a_quota_report_without_a_resource_parks_only_its_own_task(backend: Backend) -> None:
    plane = plane_of(coding(uses=False), backend)
    try:
        plane.engine.start("A", {"repo": "acme/api"})
        plane.engine.start("B", {"repo": "acme/api"})
        task = claim(plane)
        assert task is not None
        quota(plane, task, retry_after=30, reason="429")
        assert entry(plane, "A", "task_parked")["reason"] == "429"
        assert plane.engine.claim("box", ["code"]).token == "B"  # type: ignore[union-attr]
        assert claim(plane) is None
        plane.clock.advance(30)
        tick(plane.engine)
        resources.open_due(plane.store)
        grant = plane.engine.claim("box", ["code"])
        assert grant is not None and (grant.token, grant.attempt) == ("A", 1)
    finally:
        plane.store.close()


@pytest.mark.parametrize("uses", [True, False], ids=["parks-the-key", "parks-the-task"])
def test_a_parked_attempt_lets_go_of_its_reservation_and_is_claimed_again_at_the_reset(
    backend: Backend, uses: bool
) -> None:
    plane = plane_of(coding(uses=uses, reserve={"usd": 0.4}), backend)
    try:
        plane.engine.start("A", {"repo": "acme/api"})
        task = claim(plane)
        assert task is not None
        quota(plane, task, retry_after=30, reason="429", resource="repo" if uses else None)
        budget = plane.store.read(lambda tx: tx.reserved("A"))
        assert budget == []
        plane.clock.advance(30)
        tick(plane.engine)
        resources.open_due(plane.store)
        grant = plane.engine.claim("box", ["code"])
        assert grant is not None and (grant.token, grant.attempt) == ("A", 1)
        assert plane.store.read(lambda tx: tx.reserved("A")) == [{"usd": 0.4}]
    finally:
        plane.store.close()


def test_a_quota_report_for_a_resource_the_task_does_not_hold_is_refused(plane: Plane) -> None:
    plane.engine.start("A", {"repo": "acme/api"})
    task = claim(plane)
    assert task is not None
    with pytest.raises(ResourceNotUsed, match="does not use 'llm'"):
        quota(plane, task, resource="llm", retry_after=30)
    assert plane.store.read(lambda tx: tx.task(task)).status == "claimed"  # type: ignore[union-attr]


def test_a_reset_in_the_past_is_refused_and_one_beyond_7_days_is_capped(plane: Plane) -> None:
    plane.engine.start("A", {"repo": "acme/api"})
    task = claim(plane)
    assert task is not None
    with pytest.raises(InvalidQuota, match="in the past"):
        quota(plane, task, resource="repo", resets_at=to_iso(plane.clock.now - 60))
    with pytest.raises(InvalidQuota, match="not both"):
        quota(plane, task, resource="repo", resets_at=to_iso(plane.clock.now + 60), retry_after=1)
    with pytest.raises(InvalidQuota, match="not an ISO time in UTC"):
        quota(plane, task, resource="repo", resets_at="tomorrow")
    quota(plane, task, resource="repo", resets_at=to_iso(plane.clock.now + 30 * 86400))
    parked = entry(plane, "A", "task_parked")
    assert parked["until"] == to_iso(plane.clock.now + 7 * 86400)
    assert parked["capped"].startswith("the reset was more than 7 days ahead")


def test_without_a_stated_reset_the_wait_doubles_from_a_minute(plane: Plane) -> None:
    plane.engine.start("A", {"repo": "acme/api"})
    waits = []
    for _ in range(3):
        task = claim(plane)
        assert task is not None  # the first claim, then each time the probe
        quota(plane, task, resource="repo", reason="429")
        until = entry(plane, "A", "resource_parked")["until"]
        waits.append(datetime.fromisoformat(until).timestamp() - plane.clock.now)
        assert claim(plane) is None
        plane.clock.advance(3600)
        resources.open_due(plane.store)
    assert 29 <= waits[0] <= 60 and 59 <= waits[1] <= 120 and 119 <= waits[2] <= 240


def test_a_success_between_failures_breaks_the_breaker_s_streak(backend: Backend) -> None:
    plane = plane_of(coding(breaker=2), backend)
    try:
        for token in ("A", "B", "C"):
            plane.engine.start(token, {"repo": "acme/api"})
        failed = ReportBody(kind="failed", error="boom at 0x7f00ff12", supervisor="box")
        for body in (failed, ReportBody(kind="event", event="done", supervisor="box"), failed):
            task = claim(plane)
            assert task is not None
            plane.engine.report(task, body)
        assert plane.store.read(lambda tx: tx.parkings("repo")) == []
        task = claim(plane)
        assert task is not None
        plane.engine.report(task, failed)
        [parked] = plane.store.read(lambda tx: tx.parkings("repo"))
        assert (parked.cause, parked.key) == ("breaker", "acme/api")
    finally:
        plane.store.close()
