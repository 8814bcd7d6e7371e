"""Resources under races, on both backends: threads released together take a new key's
slots, or report failures on one key, and the key's row counts every one of them."""

from __future__ import annotations

from collections import Counter
from functools import partial

import msgspec

from stateous import END, START, Workflow
from stateous.model.wire import ReportBody
from tests.control.support import Backend, Plane
from tests.control.test_races import together
from tests.control.test_resources import plane_of


class Job(msgspec.Struct):
    repo: str


def coding(*, slots: int, breaker: int | None = None) -> Workflow:
    """One state, `code`, that takes a slot of the token's repo."""
    flow = Workflow("coding", context=Job)
    flow.resource("repo", slots=slots, breaker=breaker)
    code = flow.state("code", uses={"repo": "ctx['repo']"}, retries=3)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


def start(plane: Plane, round_: int, index: int) -> None:
    plane.engine.start(f"R{round_}-{index}", {"repo": f"acme/repo-{round_}"})


def fail(plane: Plane, tasks: list[int], index: int) -> None:
    plane.engine.report(tasks[index], ReportBody(kind="failed", error="boom", supervisor="box"))


def test_tokens_started_together_on_a_new_key_take_its_one_slot_once(backend: Backend) -> None:
    plane = plane_of(coding(slots=1), backend)
    try:
        for round_ in range(10):
            together(partial(start, plane, round_), 4)
        keys = plane.store.read(lambda tx: tx.resource_keys("repo"))
        takers = plane.store.read(lambda tx: tx.takers("repo"))
        assert {key.key: key.in_use for key in keys} == dict(Counter(t.key for t in takers))
        grants = []
        while (grant := plane.engine.claim("box", ["code"])) is not None:
            grants.append(grant.context["repo"])
        assert Counter(grants) == {f"acme/repo-{round_}": 1 for round_ in range(10)}
    finally:
        plane.store.close()


def test_failures_reported_together_on_one_key_trip_its_breaker(backend: Backend) -> None:
    plane = plane_of(coding(slots=8, breaker=3), backend)
    try:
        repos = [f"acme/repo-{round_}" for round_ in range(4)]
        for repo in repos:
            tasks = []
            for index in range(8):
                plane.engine.start(f"T{index}-{repo[-1]}", {"repo": repo})
                grant = plane.engine.claim("box", ["code"])
                assert grant is not None
                tasks.append(grant.task)
            together(partial(fail, plane, tasks))
        parked = plane.store.read(lambda tx: tx.parkings("repo"))
        assert {(row.key, row.cause) for row in parked} == {(repo, "breaker") for repo in repos}
        assert all(row.reason is not None and row.until is not None for row in parked)
    finally:
        plane.store.close()
