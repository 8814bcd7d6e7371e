"""A claim across many states takes the head of each state's queue and gives the oldest of
them; the clock finds due work through its indexes. Both without reading the queue, the
active tokens or the pending timers whole, which the plans show."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.control.serve import record_graph
from stateous.control.store.columns import (
    DUE_TIMERS,
    EXPIRED_LEASES,
    LISTED,
    NEXT_QUEUED,
    QueueBy,
    any_queued_sql,
    next_queued_sql,
)
from tests.control.support import (
    NO_POSTGRES,
    POSTGRES,
    Backend,
    Plane,
    connected,
    open_backend,
    plane_for,
)


class Item(msgspec.Struct):
    title: str


def lanes(count: int) -> Workflow:
    """Tokens start in `hub`; `to<i>` sends one to the state `lane<i>`, which `done` ends."""
    flow = Workflow("lanes", context=Item)
    hub = flow.state("hub")
    done = flow.event("done")
    flow.transition(START, hub)
    for index in range(count):
        lane = flow.state(f"lane{index}")
        flow.transition(hub, lane, on=flow.event(f"to{index}"))
        flow.transition(lane, END, on=done)
    return flow


def queue(plane: Plane, token: str, lane: int) -> None:
    """Start `token` and send it to `lane<lane>`, where its task is queued."""
    plane.engine.start(token, {"title": token})
    plane.engine.fire(token, f"to{lane}")


def claimed(plane: Plane, states: list[str]) -> list[str]:
    """The tokens of the tasks that one supervisor claims for `states`, until none is left."""
    tokens = []
    while (grant := plane.engine.claim("s1", states)) is not None:
        tokens.append(grant.token)
    return tokens


def test_the_oldest_task_comes_first_across_states_ties_by_id(backend: Backend) -> None:
    plane = plane_for(lanes(4), backend)
    try:
        queue(plane, "unlisted", 3)  # the oldest task, in a state the claims do not list
        plane.clock.advance(1)
        for token, lane in (("A", 2), ("B", 0), ("C", 1), ("D", 2)):
            queue(plane, token, lane)  # one instant: their order is their tasks' order
        plane.clock.advance(1)
        queue(plane, "E", 0)
        queue(plane, "paused", 1)
        plane.engine.pause("paused")

        assert claimed(plane, ["lane0", "lane1", "lane2"]) == ["A", "B", "C", "D", "E"]
        assert claimed(plane, ["hub", "lane3"]) == ["unlisted"]
        plane.engine.resume("paused")
        assert claimed(plane, ["lane1"]) == ["paused"]
    finally:
        plane.store.close()


def test_a_claim_for_a_thousand_states_gives_the_oldest_of_them(backend: Backend) -> None:
    plane = plane_for(lanes(1000), backend)
    try:
        for token, lane in (("late", 3), ("first", 999), ("second", 500), ("third", 999)):
            queue(plane, token, lane)
            plane.clock.advance(1)
        queue(plane, "elsewhere", 0)
        states = [f"lane{index}" for index in range(1, 1000)]

        assert claimed(plane, states) == ["late", "first", "second", "third"]
        assert claimed(plane, ["lane0"]) == ["elsewhere"]
    finally:
        plane.store.close()


def sqlite_plan(path: str, sql: str) -> list[tuple[int, str]]:
    """EXPLAIN QUERY PLAN of a statement on a SQLite file: (parent, detail) of each step."""
    import apsw

    connection = apsw.Connection(path)
    try:
        marks = sql.count("?")
        rows = connection.execute(f"EXPLAIN QUERY PLAN {sql}", ('["a", "b"]',) * marks)
        return [(parent, detail) for _, parent, _, detail in rows]
    finally:
        connection.close()


def test_on_sqlite_the_plans_walk_the_indexes_and_never_sort_the_queue(tmp_path: Path) -> None:
    plane = plane_for(lanes(2), Backend("sqlite", tmp_path, str(tmp_path / "db.sqlite")))
    for index in range(50):
        queue(plane, f"T{index}", index % 2)  # something in each table for the planner
    plane.store.close()
    path = str(tmp_path / "db.sqlite")

    claim = sqlite_plan(path, NEXT_QUEUED)
    subquery = next(at for at, (_, detail) in enumerate(claim) if "SCALAR SUBQUERY" in detail)
    head = claim[subquery + 1]
    assert head[1] == "SEARCH queued USING COVERING INDEX tasks_queue (state=?)"
    # The one sort is of the heads, one per state listed, at the top of the statement.
    assert [step for step in claim if "TEMP B-TREE" in step[1]] == [
        (0, "USE TEMP B-TREE FOR ORDER BY")
    ]
    assert not [
        detail for _, detail in claim if detail.startswith("SCAN") and "VIRTUAL" not in detail
    ]

    any_queued = [detail for _, detail in sqlite_plan(path, any_queued_sql(LISTED))]
    assert "SEARCH queued USING COVERING INDEX tasks_queue (state=?)" in any_queued
    assert not [detail for detail in any_queued if "TEMP B-TREE" in detail]
    assert [detail for detail in any_queued if detail.startswith("SCAN")] == [
        "SCAN s VIRTUAL TABLE INDEX 1:"
    ]

    timers = [detail for _, detail in sqlite_plan(path, DUE_TIMERS)]
    assert timers[0] == "SEARCH t USING INDEX timers_due (due_at<?)"
    assert not [detail for detail in timers if "TEMP B-TREE" in detail or "SCAN" in detail]
    assert "SEARCH k USING INDEX sqlite_autoindex_tokens_1 (token=?)" in timers
    leases = [detail for _, detail in sqlite_plan(path, EXPIRED_LEASES)]
    assert leases == ["SEARCH tasks USING COVERING INDEX tasks_lease (lease_until<?)"]


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[Backend]:
    """A fresh Postgres schema for the test."""
    if not POSTGRES:
        pytest.skip(NO_POSTGRES)
    with open_backend("postgres", tmp_path) as fresh:
        yield fresh


def test_on_postgres_a_claim_passes_over_a_head_that_another_transaction_holds(
    postgres: Backend,
) -> None:
    plane = plane_for(lanes(2), postgres)
    try:
        for token, lane in (("A", 0), ("B", 0), ("C", 0), ("D", 1)):
            queue(plane, token, lane)
        import psycopg

        with psycopg.connect(postgres.url) as other:
            other.execute("SELECT 1 FROM tokens WHERE token IN ('A', 'B') FOR UPDATE")
            assert claimed(plane, ["lane0"]) == ["C"]  # past the two heads held
            assert claimed(plane, ["lane0", "lane1"]) == ["D"]
        assert claimed(plane, ["lane0", "lane1"]) == ["A", "B"]
    finally:
        plane.store.close()


def test_on_postgres_a_claim_past_held_heads_takes_one_statement(
    postgres: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight supervisors on one state race for its head: a claim whose first tasks others
    hold still finds a free one in its first statement, not in looks ever deeper."""
    from stateous.control.store.postgres.store import PostgresTx

    plane = plane_for(lanes(1), postgres)
    try:
        for index in range(8):
            queue(plane, f"T{index}", 0)
        sent: list[str] = []
        read = PostgresTx.one

        def one(tx: PostgresTx, sql: str, bindings: tuple = ()) -> tuple | None:
            sent.append(sql)
            return read(tx, sql, bindings)

        monkeypatch.setattr(PostgresTx, "one", one)
        import psycopg

        with psycopg.connect(postgres.url) as other:
            held = [f"T{index}" for index in range(7)]
            other.execute("SELECT 1 FROM tokens WHERE token = ANY(%s) FOR UPDATE", (held,))
            grant = plane.engine.claim("s1", ["lane0"])
        assert grant is not None and grant.token == "T7"
        assert len([sql for sql in sent if "SKIP LOCKED" in sql]) == 1
    finally:
        plane.store.close()


def test_on_postgres_claims_at_once_never_give_one_task_twice(postgres: Backend) -> None:
    plane = plane_for(lanes(3), postgres, size=10)
    try:
        tokens = [f"T{index}" for index in range(60)]
        for index, token in enumerate(tokens):
            queue(plane, token, index % 3)
        grants: list[tuple[str, int]] = []
        lock = threading.Lock()
        states = [["lane0", "lane1", "lane2"], ["lane1", "lane2"], ["lane0"]]

        def supervise(name: str, listed: list[str]) -> None:
            while (grant := plane.engine.claim(name, listed)) is not None:
                with lock:
                    grants.append((grant.token, grant.attempt))

        threads = [
            threading.Thread(target=supervise, args=(f"s{index}", states[index % 3]))
            for index in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(grants) == sorted((token, 1) for token in tokens)
        with connected(postgres) as run:
            assert run("SELECT count(*) FROM tasks WHERE status = 'queued'") == [(0,)]
    finally:
        plane.store.close()


def test_on_postgres_the_kept_plans_of_a_claim_walk_the_queue_by_state(postgres: Backend) -> None:
    from tests.postgres.test_plans import generic_plans

    plane = plane_for(lanes(2), postgres)
    try:
        queue(plane, "A", 0)
        assert claimed(plane, ["lane0", "lane1"]) == ["A"]  # the claim, the look deeper
        assert plane.engine.claim("s1", ["lane0"]) is None  # only reads that nothing is queued
        plans = generic_plans(plane.store)  # type: ignore[arg-type]
    finally:
        plane.store.close()
    queue_plans = [plan for sql, plan in plans.items() if "FROM tasks queued" in sql]
    assert len(queue_plans) == 3  # whether any is queued, the claim, the look deeper
    for plan in queue_plans:
        assert "Scan using tasks_queue on tasks queued" in plan, plan
        assert "Index Cond: (state = s.value)" in plan
        whole = ("Seq Scan", "Hash", "Bitmap Heap Scan on tasks")  # the queue read at once
        assert not [word for word in whole if word in plan], plan


def test_on_sqlite_a_claim_by_contract_walks_the_contracts_queue(tmp_path: Path) -> None:
    plane = plane_for(lanes(2), Backend("sqlite", tmp_path, str(tmp_path / "db.sqlite")))
    for index in range(50):
        queue(plane, f"T{index}", index % 2)
    plane.store.close()
    path = str(tmp_path / "db.sqlite")

    claim = [detail for _, detail in sqlite_plan(path, next_queued_sql(QueueBy.CONTRACT))]
    head = "SEARCH queued USING COVERING INDEX tasks_contract_queue (contract=?)"
    assert head in claim
    assert [detail for detail in claim if "TEMP B-TREE" in detail] == [
        "USE TEMP B-TREE FOR ORDER BY"
    ]
    any_queued = [
        detail for _, detail in sqlite_plan(path, any_queued_sql(LISTED, QueueBy.CONTRACT))
    ]
    assert head in any_queued
    assert not [detail for detail in any_queued if "TEMP B-TREE" in detail]


def test_on_postgres_the_kept_plans_of_a_claim_by_contract_walk_its_queue(
    postgres: Backend,
) -> None:
    from tests.postgres.test_plans import generic_plans

    plane = plane_for(lanes(2), postgres)
    checksum = plane.engine.graph.checksum
    try:
        record_graph(plane.store, plane.engine.graphs)
        queue(plane, "A", 0)
        grant = plane.engine.claim("s1", ["lane0", "lane1"], checksum=checksum)
        assert grant is not None and grant.token == "A"
        assert plane.engine.claim("s1", ["lane0"], checksum=checksum) is None  # the look deeper
        assert plane.engine.claim("s1", ["lane0"], checksum=checksum) is None  # only reads
        plans = generic_plans(plane.store)  # type: ignore[arg-type]
    finally:
        plane.store.close()
    queue_plans = [plan for sql, plan in plans.items() if "queued.contract" in sql]
    assert len(queue_plans) == 3  # whether any is queued, the claim, the look deeper
    for plan in queue_plans:
        assert "Scan using tasks_contract_queue on tasks queued" in plan
        assert "Index Cond: (contract = s.value)" in plan
        whole = ("Seq Scan", "Hash", "Bitmap Heap Scan on tasks")
        assert not [word for word in whole if word in plan], plan
