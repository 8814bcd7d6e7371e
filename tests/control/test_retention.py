"""Retention on both backends, in this process with a hand-moved clock: whole ended trees go
with every row that names their tokens; live trees, and a tree with a live token, stay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.control.plans import Plans
from stateous.control.retention import remove_batch, sweep
from stateous.control.store import Counter, Tx
from stateous.model.wire import ReportBody
from tests.control.conftest import serving
from tests.control.support import BACKENDS, Backend, Plane, connected, open_backend, plane_for

KEEP = 60.0


class Trip(msgspec.Struct):
    title: str


def trips() -> Workflow:
    """`draft` (a task and a timeout), then `fan`, whose child `check` ends on `ok`."""
    child = Workflow("check", context=Trip)
    step = child.state("step", timeout="1h")
    child.transition(START, step)
    child.transition(step, END, on=child.event("ok"))
    flow = Workflow("trip", context=Trip)
    draft = flow.state("draft", timeout="1h")
    fan = flow.state("fan", parallel=[child], inputs=["title"])
    flow.transition(START, draft)
    flow.transition(draft, fan, on=flow.event("submitted"))
    flow.transition(fan, END, on="joined")
    return flow


@pytest.fixture(params=BACKENDS)
def plane(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Plane]:
    with open_backend(request.param, tmp_path) as backend:
        served = plane_for(trips(), backend)
        served.backend = backend  # type: ignore[attr-defined]
        yield served
        served.store.close()


def worked(plane: Plane, token: str) -> None:
    """Start `token`, work its draft (memory, a note), fire its way into `fan`."""
    engine = plane.engine
    engine.start(token, {"title": token})
    grant = engine.claim("box", ["draft"], f"r-{token}")
    assert grant is not None and grant.token == token
    engine.memory(grant.task, "seen", {"n": 1}, supervisor="box")
    engine.note(grant.task, "drafted", supervisor="box")
    engine.report(grant.task, ReportBody(kind="event", event="submitted", supervisor="box"))


def rows_of(backend: Backend, tokens: list[str]) -> dict[str, int]:
    """How many rows of each table name one of `tokens` (tasks and timers by token too)."""
    listed = ", ".join(f"'{token}'" for token in tokens)
    found = {}
    with connected(backend) as run:
        for table in ("tokens", "ledger", "tasks", "timers", "memory"):
            found[table] = run(f"SELECT count(*) FROM {table} WHERE token IN ({listed})")[0][0]
        found["plan_tokens"] = run(f"SELECT count(*) FROM plan_tokens WHERE token IN ({listed})")[
            0
        ][0]
        # The request id of each grant, kept with its task (`worked` names it by the token).
        requests = ", ".join(f"'r-{token}'" for token in tokens)
        found["claim_requests"] = run(
            f"SELECT count(*) FROM claim_requests WHERE request IN ({requests})"
        )[0][0]
    return found


def test_whole_ended_trees_go_with_every_row_and_live_ones_stay(plane: Plane) -> None:
    engine = plane.engine
    worked(plane, "DONE")
    engine.fire("DONE.fan.1.check", "ok", key="once")
    assert engine.get("DONE").status == "completed"
    worked(plane, "GONE")
    engine.cancel("GONE")
    assert engine.get("GONE.fan.1.check").status == "cancelled"
    worked(plane, "LIVE")
    plane.clock.advance(KEEP + 1)
    engine.start("RECENT", {"title": "r"})
    engine.cancel("RECENT")
    ended = ["DONE", "DONE.fan.1.check", "GONE", "GONE.fan.1.check"]
    before = rows_of(plane.backend, ended)  # type: ignore[attr-defined]
    assert before["ledger"] > 10 and before["tasks"] >= 4 and before["timers"] >= 4
    assert before["memory"] >= 1 and before["claim_requests"] == 2

    assert sweep(plane.store, KEEP) == 4

    assert set(rows_of(plane.backend, ended).values()) == {0}  # type: ignore[attr-defined]
    kept = rows_of(plane.backend, ["LIVE", "LIVE.fan.1.check", "RECENT"])  # type: ignore[attr-defined]
    assert kept["tokens"] == 3 and kept["ledger"] > 0 and kept["tasks"] > 0
    assert kept["claim_requests"] == 1
    assert engine.get("LIVE.fan.1.check").status == "active"
    counters = plane.store.read(lambda tx: tx.counters())
    assert counters[(Counter.TOKENS_REMOVED.value, "")] == 4
    # Nothing more is old enough; a second sweep removes nothing.
    assert sweep(plane.store, KEEP) == 0
    # The id is free again: a token started with it is a new one.
    assert engine.start("DONE", {"title": "again"})[1] is True


def test_a_tree_with_a_live_token_stays_whatever_its_top(plane: Plane) -> None:
    """The engine never leaves a live child under an ended top; if a database ever held
    one, retention would leave the tree alone."""
    worked(plane, "ODD")
    plane.clock.advance(KEEP + 1)
    with connected(plane.backend) as run:  # type: ignore[attr-defined]
        run(
            "UPDATE tokens SET status = 'cancelled', moved_at = '2000-01-01 00:00:00.000000' "
            "WHERE token = 'ODD'"
        )
    assert remove_batch(plane.store, KEEP)[0].tokens == 0
    assert rows_of(plane.backend, ["ODD", "ODD.fan.1.check"])["tokens"] == 2  # type: ignore[attr-defined]


def test_a_retried_tree_is_live_again_and_stays(plane: Plane) -> None:
    worked(plane, "BACK")
    plane.engine.cancel("BACK")
    plane.clock.advance(KEEP + 1)
    plane.engine.retry("BACK", "draft")
    assert sweep(plane.store, KEEP) == 0
    assert plane.engine.get("BACK").status == "active"


def test_batches_take_a_few_trees_each_until_none_is_left(plane: Plane) -> None:
    for n in range(7):
        plane.engine.start(f"T{n}", {"title": "t"})
        plane.engine.cancel(f"T{n}")
    plane.clock.advance(KEEP + 1)
    assert [remove_batch(plane.store, KEEP, limit=3)[0].trees for _ in range(4)] == [3, 3, 1, 0]


def test_plans_made_before_the_cutoff_go_in_batches(plane: Plane) -> None:
    for n in range(3):
        plane.engine.start(f"P{n}", {"title": "p"})
    plans = Plans(plane.engine)
    plan = plans.make("cancel", "status=active")
    plans.apply(plan.plan, "cancel")
    plane.clock.advance(KEEP + 1)
    assert sweep(plane.store, KEEP) == 3
    assert plane.store.read(lambda tx: tx.plan(plan.plan)) is None
    assert rows_of(plane.backend, ["P0", "P1", "P2"])["plan_tokens"] == 0  # type: ignore[attr-defined]


def test_old_occurrences_of_a_schedule_go_but_its_last_one_stays(plane: Plane) -> None:
    def record(tx: Tx) -> None:
        for n in range(5):
            tx.record_occurrence("nightly", tx.now + n, "skipped", None, 0, "overlap")
        tx.record_occurrence("weekly", tx.now, "skipped", None, 0, "overlap")

    plane.store.write(record)
    plane.clock.advance(KEEP + 10)
    removed, _ = remove_batch(plane.store, KEEP)
    with connected(plane.backend) as run:  # type: ignore[attr-defined]
        left = run("SELECT schedule, count(*) FROM schedule_history GROUP BY schedule")
    assert removed.schedule_rows == 4
    assert sorted(left) == [("nightly", 1), ("weekly", 1)]


def held() -> Workflow:
    """`work` uses a slot of `repo`, prefers a supervisor labelled `box` for an hour and
    reserves of its token's budget."""
    flow = Workflow("held", context=Trip, budget={"usd": 5})
    flow.resource("repo", slots=1)
    work = flow.state(
        "work",
        uses={"repo": "ctx['title']"},
        prefers={"box": "ctx['title']"},
        prefer_for="1h",
        reserve={"usd": 1},
    )
    flow.transition(START, work)
    flow.transition(work, END, on=flow.event("done"))
    return flow


#: Every table whose rows name a task, and the column that names it.
OF_TASKS = {
    "tasks": "id",
    "claim_requests": "task_id",
    "task_resources": "task",
    "preferred": "task",
    "budget_reservations": "task",
}


def task_rows(backend: Backend, tasks: list[int]) -> dict[str, int]:
    listed = ", ".join(str(task) for task in tasks)
    with connected(backend) as run:
        return {
            table: run(f"SELECT count(*) FROM {table} WHERE {column} IN ({listed})")[0][0]
            for table, column in OF_TASKS.items()
        }


@pytest.mark.parametrize("name", BACKENDS)
def test_the_rows_that_name_a_removed_task_go_with_it(name: str, tmp_path: Path) -> None:
    with open_backend(name, tmp_path) as backend:
        plane = plane_for(held(), backend)
        engine = plane.engine
        for token in ("H-1", "H-2", "H-3"):
            engine.start(token, {"title": "repo-a"})
        claimed = engine.claim_or_wait("box", ["work"], "r-1", labels={"box": "repo-a"})
        assert claimed.grant is not None
        for token in ("H-1", "H-2", "H-3"):
            engine.cancel(token)
        with connected(backend) as run:
            tasks = [row[0] for row in run("SELECT id FROM tasks")]
        plane.clock.advance(KEEP + 1)
        before = task_rows(backend, tasks)
        assert before["task_resources"] == 3 and before["preferred"] == 2

        assert sweep(plane.store, KEEP) == 3

        assert set(task_rows(backend, tasks).values()) == {0}
        plane.store.close()


def test_the_last_skip_of_a_schedule_stays_as_get_schedules_shows_it(plane: Plane) -> None:
    skip = "the token nightly.x of an earlier occurrence is still live (overlap)"

    def record(tx: Tx) -> None:
        tx.record_occurrence("nightly", tx.now, "skipped", None, 0, skip)
        for n in range(1, 4):
            tx.record_occurrence("nightly", tx.now + n, "started", f"nightly.{n}", 0, "")

    with serving(plane.engine) as served:
        body = {"name": "nightly", "cron": "0 3 * * *", "context": {"title": "t"}}
        assert served.request("POST", "/schedules", body)[0] == 201
        plane.store.write(record)
        shown = served.request("GET", "/schedules")[2][0]["last_skip"]
        plane.clock.advance(KEEP + 10)
        removed, _ = remove_batch(plane.store, KEEP)

        assert served.request("GET", "/schedules")[2][0]["last_skip"] == shown
        assert removed.schedule_rows == 2
        assert shown["reason"] == skip
