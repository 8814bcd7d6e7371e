"""A control plane in the test's own process: a real database and a clock the test moves.

The database is the test's `backend`: a SQLite file always, and a fresh schema on
the Postgres server of STATEOUS_TEST_POSTGRES when it is set, so the engine and
API suites run on both through this one switch.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import ANY
from urllib.parse import quote

import msgspec
import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.store import Store
from stateous.control.store.sqlite import SqliteStore
from stateous.model.fingerprints import fingerprint
from stateous.model.graph_file import GraphFile, dump

#: The Postgres server of the tests; CI sets it, and fails when the server is down.
POSTGRES = os.environ.get("STATEOUS_TEST_POSTGRES")
NO_POSTGRES = "STATEOUS_TEST_POSTGRES is not set: no Postgres server to test on"
#: The parameters of the `backend` fixture.
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.skipif(not POSTGRES, reason=NO_POSTGRES)),
]


def with_options(url: str, options: str) -> str:
    """Add libpq `options` to a postgresql:// URL."""
    return f"{url}{'&' if '?' in url else '?'}options={quote(options)}"


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A new, empty schema on the server for one test; yield a URL that uses it; drop it after."""
    import psycopg

    name = f"test_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {name}")
    try:
        yield with_options(url, f"-c search_path={name}")
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {name} CASCADE")


@dataclass
class Backend:
    """Where a test keeps its files and its database: `url` is a SQLite path or a Postgres URL."""

    name: str
    folder: Path
    url: str

    def store(self, clock: Callable[[], float] | None = None, **limits: Any) -> Store:
        """Open the database (made and migrated on first use); `limits` go to the store."""
        if clock is not None:
            limits["clock"] = clock
        if self.name == "sqlite":
            return SqliteStore(self.url, **limits)
        from stateous.control.store.postgres import PostgresStore

        return PostgresStore(self.url, **limits)

    @property
    def db(self) -> str:
        """The database as `serve --db` takes it."""
        return f"sqlite:///{self.url}" if self.name == "sqlite" else self.url


#: Runs one statement on a connection of the test's own and returns its rows.
Run = Callable[[str], list[tuple[Any, ...]]]


@contextmanager
def connected(backend: Backend) -> Iterator[Run]:
    """A connection to the backend's database outside the store, each statement on its own."""
    if backend.name == "sqlite":
        import apsw

        with closing(apsw.Connection(backend.url)) as connection:
            yield lambda statement: connection.execute(statement).fetchall()
        return
    import psycopg

    def run(statement: str) -> list[tuple[Any, ...]]:
        cursor = connection.execute(statement)
        return cursor.fetchall() if cursor.description else []

    with psycopg.connect(backend.url, autocommit=True) as connection:
        yield run


@contextmanager
def open_backend(name: str, folder: Path) -> Iterator[Backend]:
    """A fresh database of the kind `name` for one test."""
    if name == "sqlite":
        yield Backend(name, folder, str(folder / "db.sqlite"))
        return
    assert POSTGRES is not None, NO_POSTGRES
    with fresh_schema(POSTGRES) as url:
        yield Backend(name, folder, url)


class Clock:
    """Time that moves only when the test says so."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Item(msgspec.Struct):
    title: str
    amount: int = 0
    tags: list[str] = []


class Verdict(msgspec.Struct):
    approved: bool
    note: str = ""


def orders(review_timeout: str | None = "1h", retries: int = 1) -> Workflow:
    """The orders starter, with a timeout and retries on `review`, and an error path."""
    flow = Workflow("orders", context=Item)
    draft = flow.state("draft")
    review = flow.state("review", timeout=review_timeout, retries=retries)
    held = flow.state("held")
    submitted = flow.event("submitted")
    reviewed = flow.event("reviewed", payload=Verdict)
    remind = flow.event("remind")
    flow.transition(START, draft)
    flow.transition(draft, review, on=submitted)
    flow.transition(draft, draft, on=remind)
    flow.transition(review, END, on=reviewed, when="payload.approved == true")
    flow.transition(review, draft, on=reviewed, otherwise=True)
    flow.transition(review, held, on="error")
    flow.transition(held, END, on=submitted)
    return flow


def one_step(name: str, event: str) -> Workflow:
    """A workflow of one state, `step`, that `event` ends."""
    flow = Workflow(name, context=Item)
    step = flow.state("step")
    flow.transition(START, step)
    flow.transition(step, END, on=flow.event(event))
    return flow


def fan_out(name: str, state: str, child: Workflow) -> Workflow:
    """A workflow whose only state, `state`, starts a `child` token and ends when it ends."""
    flow = Workflow(name, context=Item)
    fan = flow.state(state, parallel=[child], inputs=["title"])
    flow.transition(START, fan)
    flow.transition(fan, END, on="joined")
    return flow


@dataclass
class Plane:
    """An engine on a real database, with a hand-moved clock."""

    engine: Engine
    clock: Clock
    store: Store

    def kinds(self, token: str) -> list[str]:
        return [entry.kind for entry in self.engine.history(token)]

    def entries(self, token: str) -> list[tuple[str, dict]]:
        return [(entry.kind, entry.data) for entry in self.engine.history(token)]

    def tail(self, token: str, since: int) -> list[str]:
        return self.kinds(token)[since:]


def plane_for(
    graph: GraphFile | Workflow, backend: Backend, *, lease: float = 120.0, **limits: Any
) -> Plane:
    """Serve a workflow (compiled here) or a graph file on `backend` in this process;
    `limits` go to the store."""
    document = compile_workflow(graph) if isinstance(graph, Workflow) else graph
    path = backend.folder / "graph.json"
    path.write_bytes(dump(document))
    clock = Clock()
    store = backend.store(clock, **limits)
    return Plane(Engine(Graph.load(path), store, lease=lease), clock, store)


#: The rows counted straight from the tables, labelled as the counts table labels them.
LIVE_ROWS = {
    "live_tokens": "SELECT status || ' ' || CASE WHEN workflow IS NULL THEN state "
    "ELSE workflow || '/' || state END, count(*) FROM tokens "
    "WHERE status IN ('active', 'paused') GROUP BY 1",
    "live_tasks": "SELECT status || ' ' || state, count(*) FROM tasks "
    "WHERE status IN ('queued', 'claimed', 'waiting') GROUP BY 1",
    "timers_pending": "SELECT '', count(*) FROM timers WHERE status = 'pending' "
    "HAVING count(*) > 0",
}


def failure(task: int, error: str) -> dict[str, Any]:
    """The data of a `task_failed` row: the task, the error, its fingerprint, and the digest
    of the token's context (any: the tests that need it compute it)."""
    return {"task": task, "error": error, "fingerprint": fingerprint(error), "context_digest": ANY}


#: The counters that follow the ledger one entry for one, by the kind they count.
LEDGER_KINDS = {
    "tokens_started": "started",
    "events_fired": "event_accepted",
    "tasks_claimed": "task_claimed",
    "attempts_failed": "task_failed",
    "retries_stopped": "retries_stopped",
    "timers_fired": "timer_fired",
}
#: Every count that `counts_drift` checks, and the statement that counts its rows.
COUNTED_ROWS = {
    **LIVE_ROWS,
    **{
        name: f"SELECT '', count(*) FROM ledger WHERE kind = '{kind}' HAVING count(*) > 0"
        for name, kind in LEDGER_KINDS.items()
    },
}


def counts_drift(store: Store) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """The counts that the counts table keeps and that differ from the rows themselves (the
    gauges of live tokens, live tasks and pending timers; the counters of ledger entries):
    {name: (kept, counted)}; empty when every change counted right, once."""

    def operation(tx: Any) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
        kept = tx.counters()
        found = {}
        for name, statement in COUNTED_ROWS.items():
            counted = {label: int(n) for label, n in tx.execute(statement)}
            held = {label: n for (counter, label), n in kept.items() if counter == name and n}
            if held != counted:
                found[name] = (held, counted)
        return found

    return store.read(operation)
