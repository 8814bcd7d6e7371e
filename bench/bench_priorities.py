"""Benchmark: what a claim costs with priorities and fairness keys in use, against one without.

Run: .venv/bin/python bench/bench_priorities.py [--tokens 1000000] [--queued 100000]
     [--claims 1000] [--rounds 5] [--db sqlite|URL]
Two databases are filled alike, in bulk (INSERT ... SELECT, not through the API):
`--tokens` tokens, of which `--queued` are active with a task queued in `work` and the
rest completed with their task done. "Plain": every token of priority 0, the workflow
without a fairness key, each task's turn its queue time (what a workflow that uses none
of it has). "Fleet": the workflow's fairness key `ctx['team']` over 50 teams, 5 priority
levels, each task's turn as `stateous.control.turns` reckons it (the teams' tasks spread
one quantum apart, 60 seconds a level). Both databases are ANALYZEd after the fill (on
Postgres, `VACUUM ANALYZE`; on SQLite, `ANALYZE`). Then rounds alternate between the two:
each round claims `--claims` tasks through `Engine.claim`, in one thread, no HTTP, and the
median wall time and the CPU time per claim are kept; the report gives the medians over
the rounds and the ratio fleet / plain.
Target (issue 41): a claim with them in use costs at most 1.3 times one without.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.serve import record_graph
from stateous.control.store import open_store
from stateous.control.turns import AGE_PER_LEVEL, FAIR_QUANTUM
from stateous.model.graph_file import dump, load

TEAMS = 50
LEVELS = 5
#: The queue time of the first task; the others follow a millisecond apart.
BEGAN = 1_790_000_000.0


class Job(msgspec.Struct):
    team: str = ""


def flow(fair: bool) -> Workflow:
    made = Workflow("jobs", context=Job, fairness="ctx['team']" if fair else None)
    work = made.state("work")
    made.transition(START, work)
    made.transition(work, END, on=made.event("done"))
    return made


def fill_sql(postgres: bool, fair: bool) -> list[str]:
    """The statements that fill the tables: `?` tokens, the first `?` of them queued."""
    if postgres:
        numbers = "SELECT n FROM generate_series(0, CAST(? AS INTEGER) - 1) n"
        team = "'t' || (n % 50)"
        ident = "'T' || lpad(CAST(n AS TEXT), 8, '0')"
        stamp = "to_char(to_timestamp(1790000000 + n / 1000.0) AT TIME ZONE 'UTC', "
        stamp += "'YYYY-MM-DD HH24:MI:SS.US')"
        context = f"json_build_object('team', {team})"
        visits = "CAST('{\"work\": 1}' AS JSON)"
    else:
        numbers = (
            "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?) "
            "SELECT n FROM s"
        )
        team = "'t' || (n % 50)"
        ident = "printf('T%08d', n)"
        stamp = "strftime('%Y-%m-%d %H:%M:%f000', 1790000000 + n / 1000.0, 'unixepoch')"
        context = f"json_object('team', {team})"
        visits = "'{\"work\": 1}'"
    priority = f"(n % {LEVELS})" if fair else "0"
    if fair:
        start = f"({BEGAN} + (n / {TEAMS}) * {FAIR_QUANTUM})"
        turn = f"({start} - {priority} * {AGE_PER_LEVEL})"
    else:
        turn = f"({BEGAN} + n / 1000.0)"
    queued = "n < CAST(? AS INTEGER)"
    return [
        f"INSERT INTO tokens (token, state, status, visit, context, entered_at, moved_at, "
        f"visits, checksum, priority) SELECT {ident}, 'work', "
        f"CASE WHEN {queued} THEN 'active' ELSE 'completed' END, 1, {context}, {stamp}, "
        f"{stamp}, {visits}, ?, {priority} FROM ({numbers}) q",
        f"INSERT INTO tasks (id, token, state, visit, status, attempt, queued_at, turn_at) "
        f"SELECT n + 1, {ident}, 'work', 1, CASE WHEN {queued} THEN 'queued' ELSE 'done' END, "
        f"0, {stamp}, {turn} FROM ({numbers}) q",
    ]


def make(db: str, fair: bool, tokens: int, queued: int) -> tuple[str, float]:
    """A database filled for one scenario, analyzed; its URL and the seconds the fill took."""
    postgres = db != "sqlite"
    if postgres:
        import psycopg

        schema = f"bench_fleet_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(db, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {schema}")
        url = f"{db}?options=-c%20search_path%3D{schema}"
    else:
        url = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
    raw = dump(compile_workflow(flow(fair)))
    lock, store = open_store(url, connections=2)
    engine = Engine(Graph(load(raw), raw), store)
    record_graph(store, engine.graphs)
    checksum = engine.graph.checksum
    store.close()
    lock.release()
    begun = time.perf_counter()
    statements = fill_sql(postgres, fair)
    if postgres:
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            for sql in statements:
                bindings = (queued, checksum, tokens) if "tokens" in sql.split()[2] else None
                if bindings is None:
                    bindings = (queued, tokens)
                connection.execute(sql.replace("%", "%%").replace("?", "%s"), bindings)
            connection.execute(
                "SELECT setval(pg_get_serial_sequence('tasks', 'id'), (SELECT max(id) FROM tasks))"
            )
            connection.execute("VACUUM ANALYZE")
    else:
        import apsw

        connection = apsw.Connection(url.removeprefix("sqlite:///"))
        connection.execute("BEGIN")
        for sql in statements:
            order = (queued, checksum, tokens) if "tokens" in sql.split()[2] else (queued, tokens)
            connection.execute(sql, order)
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
        connection.close()
    return url, time.perf_counter() - begun


def claim_round(url: str, fair: bool, claims: int) -> tuple[float, float]:
    """Claim `claims` tasks; the median wall time and the CPU time of a claim, in µs."""
    raw = dump(compile_workflow(flow(fair)))
    lock, store = open_store(url, connections=2)
    engine = Engine(Graph(load(raw), raw), store)
    times = []
    cpu = time.process_time()
    for _ in range(claims):
        begun = time.perf_counter()
        grant = engine.claim("bench", ["work"])
        times.append(time.perf_counter() - begun)
        assert grant is not None
    spent = (time.process_time() - cpu) / claims
    store.close()
    lock.release()
    return statistics.median(times) * 1e6, spent * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", default="sqlite", help="a Postgres URL of a database")
    args = parser.parse_args()
    urls = {}
    for name, fair in (("plain", False), ("fleet", True)):
        urls[name], took = make(args.db, fair, args.tokens, args.queued)
        print(f"{name}: filled {args.tokens} tokens ({args.queued} queued) in {took:.0f} s")
    figures: dict[str, list[tuple[float, float]]] = {"plain": [], "fleet": []}
    for _ in range(args.rounds):
        for name, fair in (("plain", False), ("fleet", True)):
            figures[name].append(claim_round(urls[name], fair, args.claims))
    load = os.getloadavg()
    medians = {
        name: (statistics.median(w for w, _ in rounds), statistics.median(c for _, c in rounds))
        for name, rounds in figures.items()
    }
    for name, (wall, cpu) in medians.items():
        print(f"{name}: claim median {wall:.0f} µs wall, {cpu:.0f} µs CPU")
    ratio = medians["fleet"][0] / medians["plain"][0]
    cpu_ratio = medians["fleet"][1] / medians["plain"][1]
    print(f"fleet / plain: {ratio:.2f} wall, {cpu_ratio:.2f} CPU; load {load[0]:.1f}")
    if args.db != "sqlite":
        import psycopg

        with psycopg.connect(args.db, autocommit=True) as connection:
            for url in urls.values():
                schema = url.rsplit("%3D", 1)[1]
                connection.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
