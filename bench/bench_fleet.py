"""Benchmark: what a claim costs with the fleet's controls in use, against one without.

Run: .venv/bin/python bench/bench_fleet.py [--tokens 1000000] [--queued 100000]
     [--claims 1000] [--rounds 5] [--scenarios plain,fleet,all] [--db sqlite|URL]
     [--own-postgres] [--explain]
One database per scenario, filled alike, in bulk (INSERT ... SELECT, not through the API):
`--tokens` tokens, of which `--queued` are active with a task queued in `work` and the
rest completed with their task done.
- "plain": every token of priority 0, the workflow without a fairness key, each task's
  turn its queue time (what a workflow that uses none of it has).
- "fleet": priorities and fairness: the fairness key `ctx['team']` over 50 teams, 5
  priority levels, each task's turn as `stateous.control.turns` reckons it (the teams'
  tasks spread one quantum apart, 60 seconds a level).
- "all": the same, and `work` uses 10 resources (`slots=10`, each by a key of its own read
  from the context, each queued task holding its 10 keys as its start left it) and needs
  `os=linux`; each claim sends the labels `os: linux, gpu: "false"`.
Each database is ANALYZEd after the fill (on Postgres, `VACUUM ANALYZE`). Then rounds go
round the scenarios: each claims `--claims` tasks through `Engine.claim_or_wait`, in one
thread, no HTTP; the median wall time of a claim and the CPU time per claim of the bench
process, and on Postgres of the server's processes (read from /proc: the server must run
on this computer, and serve the bench alone to be read so: `--own-postgres` starts a
tuned server of the bench's own, `own_postgres.py`) and the WAL bytes it wrote, are
kept. The report gives the medians over the rounds and each scenario's ratios to
"plain". The wall time carries each commit's flush and the machine's load; the CPU times
are the figures to read on a shared computer. `--explain` prints, on Postgres,
`EXPLAIN (ANALYZE, BUFFERS)` of the claim's statement in each database after its rounds.
Target (issue 41): a claim with 10 resources, 5 priority levels, fairness keys and labels
in use costs at most 1.3 times one without, at 1,000,000 tokens (100,000 queued).
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
from typing import Any, NamedTuple

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control import resources
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.serve import record_graph
from stateous.control.store import open_store
from stateous.control.turns import AGE_PER_LEVEL, FAIR_QUANTUM
from stateous.model.graph_file import dump, load

TEAMS = 50
LEVELS = 5
KEYS = [f"r{n}" for n in range(10)]
#: The queue time of the first task; the others follow a millisecond apart.
BEGAN = 1_790_000_000.0
LABELS = {"os": "linux", "gpu": "false"}


class Scenario(NamedTuple):
    """What a scenario's workflow and claims use."""

    fair: bool
    held: bool  # 10 resources, and needs met by the claims' labels


SCENARIOS = {
    "plain": Scenario(fair=False, held=False),
    "fleet": Scenario(fair=True, held=False),
    "all": Scenario(fair=True, held=True),
}


class Job(msgspec.Struct):
    team: str = ""
    r0: str = ""
    r1: str = ""
    r2: str = ""
    r3: str = ""
    r4: str = ""
    r5: str = ""
    r6: str = ""
    r7: str = ""
    r8: str = ""
    r9: str = ""


def flow(scenario: Scenario) -> Workflow:
    made = Workflow("jobs", context=Job, fairness="ctx['team']" if scenario.fair else None)
    if scenario.held:
        for name in KEYS:
            made.resource(name, slots=10)
        work = made.state(
            "work", uses={name: f"ctx['{name}']" for name in KEYS}, needs={"os": "linux"}
        )
    else:
        work = made.state("work")
    made.transition(START, work)
    made.transition(work, END, on=made.event("done"))
    return made


def fill_sql(postgres: bool, scenario: Scenario) -> list[str]:
    """The statements that fill the tables: `?` tokens, the first `?` of them queued; then,
    with resources, the 10 keys that each queued task holds."""
    if postgres:
        numbers = "SELECT n FROM generate_series(0, CAST(? AS INTEGER) - 1) n"
        ident = "'T' || lpad(CAST(n AS TEXT), 8, '0')"
        stamp = "to_char(to_timestamp(1790000000 + n / 1000.0) AT TIME ZONE 'UTC', "
        stamp += "'YYYY-MM-DD HH24:MI:SS.US')"
        pairs = "json_build_object"
        visits = "CAST('{\"work\": 1}' AS JSON)"
        tens = "SELECT i FROM generate_series(0, 9) i"
    else:
        numbers = (
            "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < ?) "
            "SELECT n FROM s"
        )
        ident = "printf('T%08d', n)"
        stamp = "strftime('%Y-%m-%d %H:%M:%f000', 1790000000 + n / 1000.0, 'unixepoch')"
        pairs = "json_object"
        visits = "'{\"work\": 1}'"
        tens = "WITH RECURSIVE d(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM d WHERE i < 9) "
        tens += "SELECT i FROM d"
    fields = [f"'team', 't' || (n % {TEAMS})"]
    if scenario.held:
        fields += [f"'{name}', 'k' || n" for name in KEYS]
    context = f"{pairs}({', '.join(fields)})"
    priority = f"(n % {LEVELS})" if scenario.fair else "0"
    if scenario.fair:
        start = f"({BEGAN} + (n / {TEAMS}) * {FAIR_QUANTUM})"
        turn = f"({start} - {priority} * {AGE_PER_LEVEL})"
    else:
        turn = f"({BEGAN} + n / 1000.0)"
    queued = "n < CAST(? AS INTEGER)"
    statements = [
        f"INSERT INTO tokens (token, state, status, visit, context, entered_at, moved_at, "
        f"visits, checksum, priority) SELECT {ident}, 'work', "
        f"CASE WHEN {queued} THEN 'active' ELSE 'completed' END, 1, {context}, {stamp}, "
        f"{stamp}, {visits}, ?, {priority} FROM ({numbers}) q",
        f"INSERT INTO tasks (id, token, state, visit, status, attempt, queued_at, turn_at) "
        f"SELECT n + 1, {ident}, 'work', 1, CASE WHEN {queued} THEN 'queued' ELSE 'done' END, "
        f"0, {stamp}, {turn} FROM ({numbers}) q",
    ]
    if scenario.held:
        statements += [
            "INSERT INTO task_resources (task, resource, key, count, taken, waiting) "
            "SELECT t.id, 'r' || i, 'k' || (t.id - 1), 1, 1, 0 "
            f"FROM tasks t, ({tens}) d WHERE t.status = 'queued'",
            "INSERT INTO resource_keys (resource, key, in_use) "
            "SELECT resource, key, 1 FROM task_resources",
        ]
    return statements


def bindings(sql: str, queued: int, tokens: int, checksum: str) -> tuple[Any, ...]:
    """What a statement of `fill_sql` binds, by the table it fills."""
    table = sql.split()[2]
    if table == "tokens":
        return (queued, checksum, tokens)
    return (queued, tokens) if table == "tasks" else ()


def make(db: str, scenario: Scenario, tokens: int, queued: int) -> tuple[str, float]:
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
    raw = dump(compile_workflow(flow(scenario)))
    lock, store = open_store(url, connections=2)
    engine = Engine(Graph(load(raw), raw), store)
    record_graph(store, engine.graphs)
    store.write(lambda tx: resources.declare(tx, engine.graph.document.resources))
    checksum = engine.graph.checksum
    store.close()
    lock.release()
    begun = time.perf_counter()
    statements = [
        (sql, bindings(sql, queued, tokens, checksum)) for sql in fill_sql(postgres, scenario)
    ]
    if postgres:
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            for sql, bound in statements:
                connection.execute(sql.replace("%", "%%").replace("?", "%s"), bound)
            connection.execute(
                "SELECT setval(pg_get_serial_sequence('tasks', 'id'), (SELECT max(id) FROM tasks))"
            )
            connection.execute("VACUUM ANALYZE")
    else:
        import apsw

        connection = apsw.Connection(url.removeprefix("sqlite:///"))
        connection.execute("BEGIN")
        for sql, bound in statements:
            connection.execute(sql, bound)
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
        connection.close()
    return url, time.perf_counter() - begun


class Server(NamedTuple):
    """What the Postgres server has spent so far: CPU seconds and WAL bytes."""

    cpu: float
    wal: int


def server_spent(url: str) -> Server | None:
    """The CPU seconds that the Postgres server's processes have spent so far (the postmaster
    and its children, read from /proc) and the WAL position, in bytes; None for SQLite or a
    server this computer's /proc does not show."""
    if url.startswith("sqlite"):
        return None
    import psycopg

    with psycopg.connect(url) as connection:  # its process read while it lives
        row = connection.execute(
            "SELECT pg_backend_pid(), pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
        ).fetchone()
        backend = Path(f"/proc/{row[0] if row else 0}/stat")
        if not backend.exists():
            return None
        postmaster = int(backend.read_text().rsplit(")", 1)[1].split()[1])
        wal = int(row[1]) if row else 0
    ticks = os.sysconf("SC_CLK_TCK")
    spent = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a process that ended meanwhile
        if int(entry.name) == postmaster:  # with the children that ended (cutime, cstime)
            spent += sum(int(field) for field in fields[11:15])
        elif int(fields[1]) == postmaster:
            spent += int(fields[11]) + int(fields[12])
    return Server(spent / ticks, wal)


class Round(NamedTuple):
    """One round's figures for a claim: median wall, bench CPU, server CPU (µs), WAL bytes."""

    wall: float
    cpu: float
    server: float | None
    wal: float | None


def claim_round(url: str, scenario: Scenario, claims: int) -> Round:
    """Claim `claims` tasks; the figures of a claim."""
    raw = dump(compile_workflow(flow(scenario)))
    lock, store = open_store(url, connections=2)
    engine = Engine(Graph(load(raw), raw), store)
    labels = LABELS if scenario.held else None

    def claim() -> None:
        assert engine.claim_or_wait("bench", ["work"], labels=labels).grant is not None

    claim()  # the connections opened, the labels kept
    times = []
    server = server_spent(url)
    cpu = time.process_time()
    for _ in range(claims):
        begun = time.perf_counter()
        claim()
        times.append(time.perf_counter() - begun)
    spent = (time.process_time() - cpu) / claims
    served = server_spent(url)
    store.close()
    lock.release()
    wall = statistics.median(times) * 1e6
    if server is None or served is None:
        return Round(wall, spent * 1e6, None, None)
    return Round(
        wall,
        spent * 1e6,
        (served.cpu - server.cpu) / claims * 1e6,
        (served.wal - server.wal) / claims,
    )


def explain(url: str) -> str:
    """`EXPLAIN (ANALYZE, BUFFERS)` of the claim's statement (the first look, 8 deep), rolled
    back: the plan and the pages it touched."""
    import psycopg

    from stateous.control.store.columns import QueueBy
    from stateous.control.store.postgres.store import FIRST_LOOK, _claim_sql

    sql = _claim_sql("?", QueueBy.STATE, "").replace("%", "%%").replace("?", "%s")
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {sql}", ('["work"]', FIRST_LOOK)
        ).fetchall()
        connection.rollback()
    return "\n".join(row[0] for row in rows)


def median(rounds: list[Round]) -> Round:
    """The median of each figure over the rounds."""
    columns = list(zip(*rounds, strict=True))
    return Round(*(None if None in column else statistics.median(column) for column in columns))


def measure(args: argparse.Namespace) -> None:
    names = args.scenarios.split(",")
    urls = {}
    for name in names:
        urls[name], took = make(args.db, SCENARIOS[name], args.tokens, args.queued)
        print(f"{name}: filled {args.tokens} tokens ({args.queued} queued) in {took:.0f} s")
    figures: dict[str, list[Round]] = {name: [] for name in names}
    loads = []
    for _ in range(args.rounds):
        for name in names:
            figures[name].append(claim_round(urls[name], SCENARIOS[name], args.claims))
            loads.append(os.getloadavg()[0])
    medians = {name: median(rounds) for name, rounds in figures.items()}
    for name, figure in medians.items():
        line = f"{name}: claim median {figure.wall:.0f} µs wall, {figure.cpu:.0f} µs bench CPU"
        if figure.server is not None:
            line += f", {figure.server:.0f} µs server CPU, {figure.wal or 0:.0f} WAL bytes"
        base = medians.get("plain")
        if base is not None and name != "plain":
            line += (
                f"; / plain: {figure.wall / base.wall:.2f} wall, {figure.cpu / base.cpu:.2f} CPU"
            )
            if figure.server is not None and base.server:
                both = (figure.cpu + figure.server) / (base.cpu + base.server)
                line += f", {figure.server / base.server:.2f} server CPU, {both:.2f} both"
        print(line)
    print(f"load average {min(loads):.1f} to {max(loads):.1f}")
    if args.explain and args.db != "sqlite":
        for name, url in urls.items():
            print(f"== EXPLAIN of the claim, {name}, after its rounds\n{explain(url)}")
    if args.db != "sqlite":
        import psycopg

        with psycopg.connect(args.db, autocommit=True) as connection:
            for url in urls.values():
                schema = url.rsplit("%3D", 1)[1]
                connection.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--db", default="sqlite", help="a Postgres URL of a database")
    parser.add_argument(
        "--own-postgres",
        action="store_true",
        help="start a tuned Postgres server of the bench's own (bench/own_postgres.py)",
    )
    parser.add_argument("--explain", action="store_true", help="EXPLAIN the claim (Postgres)")
    args = parser.parse_args()
    if not args.own_postgres:
        measure(args)
        return
    from own_postgres import own_postgres

    with own_postgres() as url:
        args.db = url
        measure(args)


if __name__ == "__main__":
    main()
