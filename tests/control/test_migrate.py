"""Migration: live tokens move, with their children, to another graph file the database keeps,
over real HTTP on both backends; every refusal and every dry run leaves the tokens and their
histories as they were."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.clock import tick
from stateous.control.engine import Engine
from stateous.control.migration import Migrations
from stateous.control.serve import record_graph
from stateous.control.store import to_iso
from stateous.model.graph_file import checksum
from stateous.model.wire import ReportBody
from tests.control.conftest import Served, serving
from tests.control.support import Backend, Item, Plane, counts_drift, one_step, plane_for


def shop(*, version: int) -> Workflow:
    """Version 1: draft, check, review, then END. Version 2 has no draft, gives review a
    new event (`rejected`: another contract), a timeout of 5 s on check, and after an
    approved review one more state, `ship`."""
    flow = Workflow("shop", context=Item)
    check = flow.state("check", timeout="5s" if version == 2 else None)
    review = flow.state("review")
    checked, approved = flow.event("checked"), flow.event("approved")
    flow.transition(check, review, on=checked)
    if version == 1:
        draft = flow.state("draft")
        flow.transition(START, draft)
        flow.transition(draft, check, on=flow.event("submitted"))
        flow.transition(review, END, on=approved)
    else:
        ship = flow.state("ship")
        flow.transition(START, check)
        flow.transition(check, END, on="timeout")
        flow.transition(review, ship, on=approved)
        flow.transition(review, END, on=flow.event("rejected"))
        flow.transition(ship, END, on=flow.event("shipped"))
    return flow


def pair(*, right: str = "ok", wrap: bool = False) -> Workflow:
    """A parallel state, `checks`, whose children `left` and `right` are one step each; with
    `wrap`, the join leads to one more state before END."""
    flow = Workflow("pair", context=Item)
    checks = flow.state(
        "checks", parallel=[one_step("left", "ok"), one_step("right", right)], inputs=["title"]
    )
    flow.transition(START, checks)
    if wrap:
        wrapping = flow.state("wrapping")
        flow.transition(checks, wrapping, on="joined")
        flow.transition(wrapping, END, on=flow.event("wrapped"))
    else:
        flow.transition(checks, END, on="joined")
    return flow


V1, V2 = (checksum(compile_workflow(shop(version=version))) for version in (1, 2))
PAIR, WRAPPED, OTHER_CHILD = (
    checksum(compile_workflow(flow)) for flow in (pair(), pair(wrap=True), pair(right="fine"))
)


@dataclass
class Versions:
    """A database whose first graph file started tokens, served now with the last one."""

    plane: Plane
    api: Served

    def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        status, _, answer = self.api.request("POST", path, {} if body is None else body)
        return status, answer

    def get(self, path: str) -> Any:
        status, _, answer = self.api.request("GET", path)
        assert status == 200, answer
        return answer

    def history(self, token: str) -> list[dict[str, Any]]:
        return self.get(f"/tokens/{token}/history")  # type: ignore[no-any-return]

    def kinds(self, token: str) -> list[str]:
        return [entry["kind"] for entry in self.history(token)]


@contextmanager
def versions(
    backend: Backend, flows: list[Workflow], start: Callable[[Engine], None]
) -> Iterator[Versions]:
    """Serve each flow in turn on one database (the first starts tokens with `start`); serve
    the last over HTTP."""
    first = plane_for(flows[0], backend)
    record_graph(first.store, first.engine.graphs)
    start(first.engine)
    first.store.close()
    for flow in flows[1:-1]:
        middle = plane_for(flow, backend)
        record_graph(middle.store, middle.engine.graphs)
        middle.store.close()
    last = plane_for(flows[-1], backend)
    record_graph(last.store, last.engine.graphs)
    with serving(last.engine) as api:
        yield Versions(last, api)
        assert counts_drift(last.engine.store) == {}


def shop_tokens(engine: Engine) -> None:
    """GONE in draft, CHANGED in review, KEEP and SLOW in check, ENDED cancelled."""
    for token in ("GONE", "CHANGED", "KEEP", "SLOW", "ENDED"):
        engine.start(token, {"title": token.lower()})
    for token in ("CHANGED", "KEEP", "SLOW"):
        engine.fire(token, "submitted")
    engine.fire("CHANGED", "checked")
    engine.cancel("ENDED")


def test_a_token_whose_state_stays_moves_to_the_new_graph_and_by_its_rules_to_its_end(
    backend: Backend,
) -> None:
    with versions(backend, [shop(version=1), shop(version=2)], shop_tokens) as served:
        before = {token: served.history(token) for token in ("GONE", "CHANGED", "ENDED")}

        gone = served.post("/tokens/GONE/migrate")
        changed = served.post("/tokens/CHANGED/migrate", {"to": V2})
        ended = served.post("/tokens/ENDED/migrate")

        assert gone == (
            409,
            {
                "error": f"token 'GONE' is in 'draft', which the graph {V2} does not have",
                "code": "state_gone",
            },
        )
        assert changed == (
            409,
            {
                "error": f"token 'CHANGED' is in 'review', whose contract differs in the graph "
                f"{V2} (its context model, events or payload models)",
                "code": "contract_changed",
            },
        )
        assert ended[0] == 409 and ended[1]["code"] == "token_not_active"
        for token, history in before.items():
            assert served.history(token) == history
            assert served.get(f"/tokens/{token}")["checksum"] == V1

        status, moved = served.post("/tokens/KEEP/migrate")
        assert (status, moved) == (
            200,
            {
                "token": "KEEP",
                "from": V1,
                "to": V2,
                "dry_run": False,
                "moved": [{"token": "KEEP", "state": "check", "status": "active"}],
            },
        )
        migrated, timer = served.history("KEEP")[-2:]
        assert (migrated["kind"], migrated["data"]) == ("migrated", {"from": V1, "to": V2})
        assert (timer["kind"], timer["data"]["event"]) == ("timer_set", "timeout")
        assert served.get("/tokens/KEEP")["checksum"] == V2
        assert served.post("/tokens/KEEP/migrate")[1]["moved"] == []

        served.post("/tokens/KEEP/events/checked")
        assert served.post("/tokens/KEEP/events/approved")[1]["state"] == "ship"
        assert served.post("/tokens/KEEP/events/shipped")[1]["status"] == "completed"


def test_a_dry_run_answers_what_would_move_and_changes_nothing(backend: Backend) -> None:
    with versions(backend, [shop(version=1), shop(version=2)], shop_tokens) as served:
        before = served.history("KEEP")

        status, answer = served.post("/tokens/KEEP/migrate", {"to": V2, "dry_run": True})

        assert (status, answer["dry_run"], answer["from"], answer["to"]) == (200, True, V1, V2)
        assert answer["moved"] == [{"token": "KEEP", "state": "check", "status": "active"}]
        assert served.history("KEEP") == before
        assert served.get("/tokens/KEEP")["checksum"] == V1
        assert served.post("/tokens/GONE/migrate", {"dry_run": True})[1]["code"] == "state_gone"


def test_a_checksum_the_database_does_not_hold_and_a_bad_body_are_refused(
    backend: Backend,
) -> None:
    with versions(backend, [shop(version=1), shop(version=2)], shop_tokens) as served:
        before = served.history("KEEP")

        missing = served.post("/tokens/KEEP/migrate", {"to": "sha256:00"})
        misspelt = served.post("/tokens/KEEP/migrate", {"too": V2})
        nobody = served.post("/tokens/NOBODY/migrate")

        assert missing == (
            404,
            {
                "error": "this database keeps no graph file of checksum 'sha256:00'",
                "code": "graph_not_found",
            },
        )
        assert misspelt[0] == 422 and misspelt[1]["code"] == "invalid_body"
        assert nobody[0] == 404 and nobody[1]["code"] == "token_not_found"
        assert served.history("KEEP") == before


def test_a_migrated_token_takes_the_timeout_of_its_state_in_the_new_graph(
    backend: Backend,
) -> None:
    with versions(backend, [shop(version=1), shop(version=2)], shop_tokens) as served:
        plane = served.plane
        Migrations(plane.engine).migrate("SLOW", by="alice")

        migrated, timer = served.history("SLOW")[-2:]
        assert (migrated["kind"], migrated["data"]) == (
            "migrated",
            {"from": V1, "to": V2, "by": "alice"},
        )
        assert (timer["kind"], timer["data"]["event"]) == ("timer_set", "timeout")
        plane.clock.advance(4)
        tick(plane.engine)
        assert served.get("/tokens/SLOW")["status"] == "active"
        plane.clock.advance(2)
        tick(plane.engine)
        assert served.get("/tokens/SLOW")["status"] == "completed"
        assert served.kinds("SLOW")[-4:] == [
            "timer_fired",
            "event_accepted",
            "task_cancelled",
            "completed",
        ]


def test_the_listing_and_a_plan_select_the_tokens_of_one_graph(backend: Backend) -> None:
    with versions(backend, [shop(version=1), shop(version=2)], shop_tokens) as served:
        listed = served.get(f"/tokens?checksum={V1}&status=active")
        assert sorted(row["token"] for row in listed) == ["CHANGED", "GONE", "KEEP", "SLOW"]
        assert served.get(f"/tokens?checksum={V2}") == []

        status, plan = served.post("/plans", {"action": "migrate", "where": f"checksum={V1}"})
        assert (status, plan["action"], plan["to"]) == (201, "migrate", V2)
        assert sorted(row["token"] for row in plan["tokens"]) == [
            "CHANGED",
            "ENDED",
            "GONE",
            "KEEP",
            "SLOW",
        ]
        other = served.post(f"/plans/{plan['plan']}/apply", {"action": "migrate", "to": V1})
        assert other[0] == 409 and other[1]["code"] == "plan_mismatch"

        status, applied = served.post(f"/plans/{plan['plan']}/apply", {"action": "migrate"})
        again = served.post(f"/plans/{plan['plan']}/apply", {"action": "migrate"})[1]

        assert status == 200 and again == applied
        outcomes = {row["token"]: row["outcome"] for row in applied["tokens"]}
        assert outcomes == {
            "CHANGED": "refused",
            "ENDED": "refused",
            "GONE": "refused",
            "KEEP": "done",
            "SLOW": "done",
        }
        for token in ("KEEP", "SLOW"):
            rows = [e["data"] for e in served.history(token) if e["kind"] == "migrated"]
            assert rows == [{"from": V1, "to": V2, "plan": plan["plan"]}]
        assert sorted(row["token"] for row in served.get(f"/tokens?checksum={V2}")) == [
            "KEEP",
            "SLOW",
        ]


def pair_tokens(engine: Engine) -> None:
    """P1 with both children live; P2 whose left child has completed."""
    engine.start("P1", {"title": "one"})
    engine.start("P2", {"title": "two"})
    engine.fire("P2.checks.1.left", "ok")


def test_a_parallel_token_moves_with_its_children_and_a_child_never_alone(
    backend: Backend,
) -> None:
    flows = [pair(), pair(right="fine"), pair(wrap=True)]
    with versions(backend, flows, pair_tokens) as served:
        alone = served.post("/tokens/P1.checks.1.left/migrate")
        other_child = served.post("/tokens/P1/migrate", {"to": OTHER_CHILD})

        assert alone[0] == 409 and alone[1]["code"] == "child_token"
        assert "migrate its top token" in alone[1]["error"]
        assert other_child == (
            409,
            {
                "error": "token 'P1' moves with its children, and token 'P1.checks.1.right' is "
                f"in 'right/step', whose contract differs in the graph {OTHER_CHILD} (its "
                "context model, events or payload models)",
                "code": "contract_changed",
            },
        )
        assert {served.get(f"/tokens/{t}")["checksum"] for t in ("P1", "P1.checks.1.left")} == {
            PAIR
        }

        status, moved = served.post("/tokens/P2/migrate")
        assert status == 200 and moved["moved"] == [
            {"token": "P2", "state": "checks", "status": "active"},
            {"token": "P2.checks.1.left", "state": "step", "status": "completed"},
            {"token": "P2.checks.1.right", "state": "step", "status": "active"},
        ]
        for token in ("P2", "P2.checks.1.left", "P2.checks.1.right"):
            assert served.get(f"/tokens/{token}")["checksum"] == WRAPPED
            assert served.kinds(token)[-1] == "migrated"
        served.post("/tokens/P2.checks.1.right/events/ok")
        assert served.get("/tokens/P2")["state"] == "wrapping"


def waits(timeout: str | None) -> Workflow:
    """One state, `wait`, that its timeout (if any) or `done` ends."""
    flow = Workflow("waits", context=Item)
    wait = flow.state("wait", timeout=timeout)
    flow.transition(START, wait)
    flow.transition(wait, END, on=flow.event("done"))
    if timeout is not None:
        flow.transition(wait, END, on="timeout")
    return flow


def test_a_timeout_keeps_counting_from_the_entry_for_as_long_as_the_new_graph_says(
    backend: Backend,
) -> None:
    def start(engine: Engine) -> None:
        for token in ("LONGER", "NONE", "PAUSED"):
            engine.start(token, {"title": token.lower()})
        engine.pause("PAUSED")

    untimed = checksum(compile_workflow(waits(None)))
    with versions(backend, [waits("10s"), waits(None), waits("20s")], start) as served:
        plane = served.plane
        for token, to in (("LONGER", None), ("NONE", untimed), ("PAUSED", None)):
            assert served.post(f"/tokens/{token}/migrate", {"to": to} if to else {})[0] == 200
        assert served.get("/tokens/PAUSED")["status"] == "paused"

        plane.clock.advance(15)
        tick(plane.engine)
        assert served.get("/tokens/LONGER")["status"] == "active"
        served.post("/tokens/PAUSED/resume")
        plane.clock.advance(6)
        tick(plane.engine)
        assert served.get("/tokens/LONGER")["status"] == "completed"
        assert served.get("/tokens/PAUSED")["status"] == "active"
        plane.clock.advance(15)
        tick(plane.engine)
        assert served.get("/tokens/PAUSED")["status"] == "completed"
        plane.clock.advance(3600)
        tick(plane.engine)
        assert served.get("/tokens/NONE")["status"] == "active"


def test_a_timeout_gained_by_migration_counts_from_the_entry_less_every_pause(
    backend: Backend,
) -> None:
    def start(engine: Engine) -> None:
        for token in ("RESUMED", "PAUSED"):
            engine.start(token, {"title": token.lower()})

    with versions(backend, [waits(None), waits("4s")], start) as served:
        plane = served.plane
        plane.clock.advance(1)
        for token in ("RESUMED", "PAUSED"):
            served.post(f"/tokens/{token}/pause")
        plane.clock.advance(6)
        for token in ("RESUMED", "PAUSED"):
            served.post(f"/tokens/{token}/resume")
        plane.clock.advance(1)
        served.post("/tokens/PAUSED/pause")
        # Each has been in `wait` for 2 s of its own clock: 2 s of the 4 are left.
        for token in ("RESUMED", "PAUSED"):
            assert served.post(f"/tokens/{token}/migrate")[0] == 200
        assert served.history("RESUMED")[-1]["data"]["due_at"] == to_iso(plane.clock.now + 2)
        plane.clock.advance(5)
        served.post("/tokens/PAUSED/resume")

        plane.clock.advance(1)
        tick(plane.engine)
        assert served.get("/tokens/RESUMED")["status"] == "completed"
        assert served.get("/tokens/PAUSED")["status"] == "active"
        plane.clock.advance(1)
        tick(plane.engine)
        assert served.get("/tokens/PAUSED")["status"] == "completed"
        assert served.kinds("PAUSED")[-4:] == [
            "timer_fired",
            "event_accepted",
            "task_cancelled",
            "completed",
        ]


def goes(guard: str | None) -> Workflow:
    """`count`, whose `go` leads to `done` (only while `guard` holds, when given)."""
    flow = Workflow("goes", context=Item)
    count, done = flow.state("count"), flow.state("done")
    flow.transition(START, count)
    flow.transition(count, done, on=flow.event("go"), when=guard)
    flow.transition(done, END, on=flow.event("fin"))
    return flow


def test_a_held_report_that_the_new_graph_does_not_take_queues_its_task_again(
    backend: Backend,
) -> None:
    def start(engine: Engine) -> None:
        engine.start("HELD", {"title": "held"})
        grant = engine.claim("box-1", ["count"])
        assert grant is not None
        engine.pause("HELD")
        body = ReportBody(kind="event", event="go", supervisor="box-1", attempt=1)
        assert engine.report(grant.task, body).status == "paused"

    with versions(backend, [goes(None), goes("ctx['amount'] > 5")], start) as served:
        assert served.post("/tokens/HELD/migrate")[0] == 200
        assert served.post("/tokens/HELD/resume")[0] == 200

        token = served.get("/tokens/HELD")
        assert (token["state"], token["status"]) == ("count", "active")
        [task] = served.get("/tasks?token=HELD")
        assert (task["status"], task["attempt"], task["supervisor"]) == ("queued", 1, None)
        dropped, queued = served.history("HELD")[-2:]
        reason = "no guard of 'go' in 'count' holds, and it has no fallback"
        assert (dropped["kind"], dropped["data"]) == (
            "event_dropped",
            {"event": "go", "reason": reason},
        )
        assert (queued["kind"], queued["data"]) == (
            "task_retrying",
            {"task": task["task"], "attempt": 2},
        )
        status, grant = served.post("/tasks/claim", {"supervisor": "box-2", "states": ["count"]})
        assert status == 200 and (grant["task"], grant["attempt"]) == (task["task"], 2)
