"""The plans of the listings: every filter of `GET /tokens` and `GET /tasks`, alone and
together, and `GET /supervisors`, is read through an index in the listing's order, with
no scan of a whole table and no sort of its rows (a page reads what it answers).

SQLite plans without statistics, so its plan here is its plan in use. Postgres picks a
sequential scan of a table it knows to be small whatever the indexes, so its plans are
asked with sequential scans and sorts priced out (`enable_seqscan`, `enable_sort` off):
a plan that still scans or sorts has no index to do otherwise.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from stateous.control.store.listing_sql import (
    SUPERVISORS_SQL,
    TaskQuery,
    TokenQuery,
    task_page_sql,
    token_page_sql,
)
from stateous.model.vocabulary import LIVE_TASK
from tests.control.support import Backend, connected

MOMENT = "2027-01-15 08:00:00.000000"
#: The statements of every combination of the listings' filters, with their bindings.
TOKEN_PAGES = [
    token_page_sql(
        TokenQuery(
            101,
            status=status,
            state=state,
            parent=parent,
            checksum=checksum,
            since=since,
            until=since,
            after=after,
        )
    )
    for status, state, parent, checksum, since, after in itertools.product(
        (None, "active"),
        (None, "draft"),
        (None, "P-1"),
        (None, "sha256:0a"),
        (None, MOMENT),
        (None, (MOMENT, "A")),
    )
]
TASK_PAGES = [
    task_page_sql(
        TaskQuery(
            101, status=status, state=state, supervisor=supervisor, queued_by=since, after=after
        )
    )
    for status, state, supervisor, since, after in itertools.product(
        (None, *LIVE_TASK), (None, "draft"), (None, "box-1"), (None, MOMENT), (None, (MOMENT, 7))
    )
]
STATEMENTS = [*TOKEN_PAGES, *TASK_PAGES, (SUPERVISORS_SQL, ("", MOMENT, MOMENT, 101))]


@pytest.fixture
def explain(backend: Backend) -> Iterator[Any]:
    """Explain a statement of the shared SQL on the backend's new database: the plan's lines."""
    backend.store().close()  # make the tables
    with connected(backend) as run:
        if backend.name == "sqlite":
            yield lambda sql, bindings: [
                row[3] for row in run_bound(run, f"EXPLAIN QUERY PLAN {sql}", bindings)
            ]
            return
        run("SET enable_seqscan = off")
        run("SET enable_sort = off")
        yield lambda sql, bindings: [row[0] for row in run_bound(run, f"EXPLAIN {sql}", bindings)]


def run_bound(run: Any, sql: str, bindings: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Run a statement with its `?` placeholders filled with literals, for EXPLAIN only."""
    pieces = sql.split("?")
    assert len(pieces) == len(bindings) + 1
    literal = [f"'{value}'" if isinstance(value, str) else str(value) for value in bindings]
    return run("".join(piece + mark for piece, mark in zip(pieces, [*literal, ""], strict=True)))


def whole_reads(plan: list[str]) -> list[str]:
    """The lines of a plan that read a table whole or sort rows: a scan of a table itself
    (SQLite's `SCAN t` without an index, Postgres's `Seq Scan`), or a sort. SQLite's scan of
    a subquery's rows (`SCAN c` of a `CO-ROUTINE c`) reads only what the subquery gave."""
    subqueries = {f"SCAN {line.split()[-1]}" for line in plan if line.startswith("CO-ROUTINE ")}
    return [
        line
        for line in plan
        if (
            "SCAN " in line
            and "USING" not in line
            and "INDEX" not in line
            and line not in subqueries
        )
        or "Seq Scan" in line
        or "TEMP B-TREE" in line
        or "Sort" in line
    ]


def test_every_listing_reads_through_an_index_in_its_order(explain: Any) -> None:
    assert len(STATEMENTS) == 64 + 64 + 1
    found = {sql: whole_reads(explain(sql, bindings)) for sql, bindings in STATEMENTS}
    assert {sql: lines for sql, lines in found.items() if lines} == {}


def test_the_filters_of_the_benchmark_take_their_own_indexes(explain: Any) -> None:
    by_status_and_state = token_page_sql(TokenQuery(101, status="active", state="draft"))
    older = task_page_sql(TaskQuery(101, queued_by=MOMENT))
    assert "tokens_status_state_moved" in " ".join(explain(*by_status_and_state))
    assert "tasks_live_age" in " ".join(explain(*older))
