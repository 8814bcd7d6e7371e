"""Benchmark: the listings of `stateous serve` on a database of 1,000,000 tokens.

Run: .venv/bin/python bench/bench_listings.py [--tokens 1000000] [--active 100000] [--runs 200]
     .venv/bin/python bench/bench_listings.py --db postgresql://USER@HOST:5432/EMPTY_DATABASE
Builds the database by script (bulk inserts beside the store, not through the API): `--tokens`
tokens, of which `--active` are active, spread over five states, each with a live task
(a tenth claimed by one of 20 supervisors, the others queued, queued over the last three
hours), the rest completed, each with a done task. Then it serves it and times each listing
over one kept-alive HTTP connection: p50, p99 and max of `--runs` requests.
Targets: `GET /tokens?status=active&state=X&limit=100` and `GET /tasks?older_than=1h`
within 20 ms (p50 and p99) with 1,000,000 tokens.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

STATES = ("draft", "review", "build", "test", "ship")
SUPERVISORS = 20
CONTEXT = '{"title":"x"}'


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    """Five states in a row, each ended by `next`."""
    flow = Workflow("listings", context=Item)
    states = [flow.state(name) for name in STATES]
    step = flow.event("next")
    flow.transition(START, states[0])
    for here, there in itertools.pairwise(states):
        flow.transition(here, there, on=step)
    flow.transition(states[-1], END, on=step)
    return flow


def state_of(index: int) -> str:
    """The state of an active token (not in step with which tasks are claimed)."""
    return STATES[(index // 7) % len(STATES)]


def column(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(sep=" ", timespec="microseconds")[:26]


def token_rows(tokens: int, active: int, now: float) -> Iterator[tuple[object, ...]]:
    """Every token: the active ones moved over the last three hours, the others a year ago
    and before; `rowid`-free, in the column order of INSERT_COLUMNS."""
    for index in range(tokens):
        if index < active:
            moved = column(now - 3 * 3600 * index / active)
            yield (f"T-{index}", state_of(index), "active", moved, moved)
        else:
            moved = column(now - 365 * 86400 - index)
            yield (f"T-{index}", STATES[-1], "completed", moved, moved)


def task_rows(tokens: int, active: int, now: float) -> Iterator[tuple[object, ...]]:
    """One task per token: live for the active ones (a tenth claimed), done for the others."""
    for index in range(tokens):
        queued = column(now - 3 * 3600 * index / active) if index < active else column(now - 4e7)
        if index >= active:
            yield (f"T-{index}", "ship", "done", 1, None, None, queued)
        elif index % 10 == 0:
            lease = column(now + 120)
            yield (
                f"T-{index}",
                state_of(index),
                "claimed",
                1,
                f"box-{index % SUPERVISORS}",
                lease,
                queued,
            )
        else:
            yield (f"T-{index}", state_of(index), "queued", 0, None, None, queued)


TOKEN_SQL = (
    "INSERT INTO tokens (token, state, status, visit, context, entered_at, moved_at) "
    f"VALUES (?, ?, ?, 1, '{CONTEXT}', ?, ?)"
)
TASK_SQL = (
    "INSERT INTO tasks (token, state, visit, status, attempt, claimed_by, lease_until, queued_at) "
    "VALUES (?, ?, 1, ?, ?, ?, ?, ?)"
)
CLAIM_SQL = "INSERT INTO claims (supervisor, claimed_at, heartbeat_at) VALUES (?, ?, ?)"


def fill_sqlite(path: Path, tokens: int, active: int, now: float) -> None:
    """Make the schema through the store, then insert with its indexes dropped and made anew."""
    import apsw

    from stateous.control.store.sqlite import SqliteStore

    SqliteStore(path).close()
    connection = apsw.Connection(str(path))
    indexes = connection.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        "AND tbl_name IN ('tokens', 'tasks')"
    ).fetchall()
    with connection:
        for name, _ in indexes:
            connection.execute(f"DROP INDEX {name}")
        connection.executemany(TOKEN_SQL, token_rows(tokens, active, now))
        connection.executemany(TASK_SQL, task_rows(tokens, active, now))
        stamp = column(now)
        connection.executemany(CLAIM_SQL, ((f"box-{n}", stamp, stamp) for n in range(SUPERVISORS)))
        for _, sql in indexes:
            connection.execute(sql)
    connection.execute("ANALYZE")
    connection.close()


def fill_postgres(url: str, tokens: int, active: int, now: float) -> None:
    """Make the schema through the store, then COPY the rows in."""
    import psycopg

    from stateous.control.store.postgres import PostgresStore

    PostgresStore(url, size=1).close()
    with psycopg.connect(url) as connection:
        with connection.cursor().copy(
            "COPY tokens (token, state, status, visit, context, entered_at, moved_at) FROM STDIN"
        ) as copy:
            for token, state, status, entered, moved in token_rows(tokens, active, now):
                copy.write_row((token, state, status, 1, CONTEXT, entered, moved))
        with connection.cursor().copy(
            "COPY tasks (token, state, visit, status, attempt, claimed_by, lease_until, "
            "queued_at) FROM STDIN"
        ) as copy:
            for token, state, status, attempt, by, lease, queued in task_rows(tokens, active, now):
                copy.write_row((token, state, 1, status, attempt, by, lease, queued))
        stamp = column(now)
        connection.cursor().executemany(
            CLAIM_SQL.replace("?", "%s"), [(f"box-{n}", stamp, stamp) for n in range(SUPERVISORS)]
        )
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")


def timed(connection: http.client.HTTPConnection, path: str, runs: int) -> list[float]:
    """The milliseconds of `runs` GETs of `path`, each answered 200."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        times.append((time.perf_counter() - began) * 1000)
        assert response.status == 200, (path, response.status)
    return times


def deep_page(connection: http.client.HTTPConnection, path: str, pages: int) -> str:
    """The path of the page `pages` pages after `path` by its `Link` headers, or of the
    last page when there are fewer."""
    for _ in range(pages):
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        link = response.getheader("Link")
        if link is None:
            return path
        path = link.partition("<")[2].partition(">")[0]
    return path


def show(label: str, times: list[float], target: float | None) -> None:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    goal = f"  (target {target:g} ms)" if target else ""
    print(
        f"{label:58} p50 {statistics.median(ordered):6.2f} ms  p99 {p99:6.2f} ms  "
        f"max {ordered[-1]:6.2f} ms{goal}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--active", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--db", help="an empty Postgres database instead of a new SQLite file")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stateous-listings-"))
    graph = folder / "listings.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    now = time.time()
    began = time.perf_counter()
    if args.db:
        fill_postgres(args.db, args.tokens, args.active, now)
    else:
        fill_sqlite(folder / "listings.db", args.tokens, args.active, now)
    print(
        f"built {args.tokens:,} tokens ({args.active:,} active) and their tasks in "
        f"{time.perf_counter() - began:.0f} s on {'Postgres' if args.db else 'SQLite'}"
    )
    port = 19000 + os.getpid() % 1000
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stateous",
            "serve",
            str(graph),
            "--listen",
            f"127.0.0.1:{port}",
            "--db",
            args.db or f"sqlite:///{folder / 'listings.db'}",
        ],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            try:
                connection.request("GET", "/health")
                response = connection.getresponse()
                response.read()
                if response.status == 200:
                    break
            except OSError:
                connection.close()
                time.sleep(0.05)
        deep = deep_page(connection, "/tokens?status=active&state=review&limit=100", 50)
        deep_tasks = deep_page(connection, "/tasks?older_than=1h", 50)
        for label, path, target in (
            (
                "GET /tokens?status=active&state=review&limit=100",
                "/tokens?status=active&state=review&limit=100",
                20,
            ),
            ("GET /tasks?older_than=1h", "/tasks?older_than=1h", 20),
            ("  the same, the 51st page (after=...)", deep_tasks, None),
            ("GET /tokens?status=active&state=review, the 51st page", deep, None),
            ("GET /tokens (no filter, limit 100)", "/tokens", None),
            ("GET /tokens?limit=1000", "/tokens?limit=1000", None),
            ("GET /tasks?status=claimed&state=build", "/tasks?status=claimed&state=build", None),
            ("GET /tasks?supervisor=box-3", "/tasks?supervisor=box-3", None),
            ("GET /supervisors (20 supervisors, 10,000 tasks held)", "/supervisors", None),
        ):
            timed(connection, path, 5)  # warm
            show(label, timed(connection, path, args.runs), target)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
