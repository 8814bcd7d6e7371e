"""Schema upgrades: a database made by an earlier version serves on, its rows carried over."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from stateous.control.migrations import LATEST
from tests.control.support import Backend, orders, plane_for


def run_sql(backend: Backend, *statements: str) -> list[tuple[Any, ...]]:
    """Run statements on the backend's database outside the store; return the last one's rows."""
    rows: list[tuple[Any, ...]] = []
    if backend.name == "sqlite":
        import apsw

        with closing(apsw.Connection(backend.url)) as connection:
            for statement in statements:
                rows = connection.execute(statement).fetchall()
        return rows
    import psycopg

    with psycopg.connect(backend.url, autocommit=True) as connection:
        for statement in statements:
            cursor = connection.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
    return rows


def test_a_database_of_version_0001_counts_the_visits_from_its_ledger(backend: Backend) -> None:
    old = plane_for(orders(), backend)
    old.engine.start("A", {"title": "x"})
    old.engine.fire("A", "remind")
    old.engine.fire("A", "remind")
    old.engine.fire("A", "submitted")
    old.engine.start("B", {"title": "y"})
    old.store.close()
    # What version 0001 left: no visits column, an index of all tasks by token.
    run_sql(
        backend,
        "ALTER TABLE tokens DROP COLUMN visits",
        "DROP INDEX tasks_live",
        "CREATE INDEX tasks_token ON tasks (token, id)",
        "UPDATE stateous_version SET version_num = '0001'",
    )

    upgraded = plane_for(orders(), backend)
    try:
        assert run_sql(backend, "SELECT version_num FROM stateous_version") == [(LATEST,)]
        back = upgraded.engine.fire("A", "reviewed", {"approved": False})
        assert (back.state, back.visit) == ("draft", 4)
        assert upgraded.entries("A")[-2] == ("entered", {"state": "draft", "visit": 4})
        assert upgraded.engine.fire("A", "submitted").visit == 2
        assert upgraded.engine.fire("B", "remind").visit == 2
    finally:
        upgraded.store.close()
