"""Plans that Postgres keeps: a statement prepared on a new database's near-empty tables keeps
its plan as the tables grow, so that plan must already read a token's rows by its index."""

from __future__ import annotations

from stateous.control.clock import tick
from stateous.control.store.postgres import PostgresStore
from stateous.model.wire import ReportBody
from tests.control.support import Backend, orders, plane_for


def generic_plans(store: PostgresStore) -> dict[str, str]:
    """The plan that each statement prepared on the store's connection keeps for all
    parameters, by the statement's SQL: what the planner makes of the tables as they are."""
    plans = {}
    with store._pool.connection() as connection:
        connection.execute("SET plan_cache_mode = force_generic_plan")
        prepared = connection.execute(
            "SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements"
        ).fetchall()
        for name, sql, count in prepared:
            arguments = f"({', '.join(['NULL'] * count)})" if count else ""
            rows = connection.execute(f"EXPLAIN EXECUTE {name}{arguments}").fetchall()
            plans[sql] = "\n".join(row[0] for row in rows)
        connection.execute("RESET plan_cache_mode")
    return plans


def full_reads(plan: str) -> list[str]:
    """The nodes of a plan that read a table or an index whole: a sequential scan, or an
    index scan without an index condition."""
    lines = plan.splitlines()
    return [
        line.strip()
        for at, line in enumerate(lines)
        if "Seq Scan" in line
        or (
            " Scan " in line
            and " using " in line
            and "Index Cond" not in "".join(lines[at + 1 : at + 2])
        )
    ]


#: The statements a control plane runs once, as it starts, then keeps
#: what they read: the plan each keeps is never used again, and each reads its table whole on
#: purpose (the supervisors seen in the last hour; whether any token holds a budget).
READ_ONCE = ("SELECT supervisor, labels, claimed_at FROM claims", "SELECT 1 FROM budgets LIMIT 1")


def test_the_plans_kept_from_a_new_database_read_rows_by_their_keys(backend: Backend) -> None:
    plane = plane_for(orders(), backend)
    try:
        engine = plane.engine
        for token in ("A", "B", "C"):
            engine.start(token, {"title": "x"})
            engine.fire(token, "submitted")  # review sets its timeout timer
        engine.pause("A")
        engine.resume("A")  # moves A's pending timers
        grant = engine.claim("s1", ["review"])
        assert grant is not None
        rejected = {"approved": False}
        body = ReportBody(kind="event", event="reviewed", payload=rejected, supervisor="s1")
        engine.report(grant.task, body)  # leaves review: its timer is cancelled
        engine.cancel("B")
        plane.clock.advance(7200)
        tick(engine)  # C's timeout fires

        plans = generic_plans(plane.store)  # type: ignore[arg-type]
    finally:
        plane.store.close()
    timers = [sql for sql, plan in plans.items() if "timers" in plan and "token" in sql]
    assert len(timers) >= 3, plans.keys()
    kept = {sql: plan for sql, plan in plans.items() if not sql.startswith(READ_ONCE)}
    assert {sql[:60]: full_reads(plan) for sql, plan in kept.items() if full_reads(plan)} == {}
