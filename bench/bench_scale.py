"""Benchmark: `stateous serve` on a database of 1,000,000 tokens with a deep backlog, against
the same on 10,000 tokens.

Run: .venv/bin/python bench/bench_scale.py [--tokens 10000,1000000] [--seconds 5] [--runs 3]
                                           [--before CHECKOUT] [--folder DIR] [--postgres URL]
                                           [--own-postgres]
Needs `wrk` (Debian package). The databases are built by this script, straight into SQLite
(bulk INSERT ... SELECT, not through the API), from rows that the engine itself wrote for
a few template tokens, so every row is like a real one: of each 100 tokens, 10 are active
(7 with a queued task, spread over the 10 states `lane0`...`lane9`, 3 with a task waiting
for an outside report), each with its state's pending timeout (due in days), and 90 are
completed after three states. With 1,000,000 tokens: 100,000 active, 70,000 queued tasks,
100,000 pending timers. Each run serves a fresh copy of a database and measures, over HTTP
with 8 keep-alive clients: starts, fires, and claim-and-report cycles of a supervisor
serving 1, 2 and 10 states (each report sends the token round its state again, so the queue
keeps its depth), with rates, p99 and the server's CPU per request (steadier than the rates
on a loaded machine); then `serve`'s CPU while idle; and, in a process of
its own, the clock's tick with nothing due (median and p99 of 200). The time from `serve`
to its first /health answer is measured at each run's start. `--before CHECKOUT` runs the
same against the `stateous` package of another checkout (for example main's code), on
the same databases, alternating with this one. `--postgres URL` copies the databases into
new Postgres databases on that server (`stateous_scale_*`, analyzed as autovacuum would,
dropped at the end) and serves those; `--own-postgres` does the same on a server that
the benchmark starts itself with tuned settings (`own_postgres.py`). The settings of the
Postgres server are printed before the figures. Figures are medians of `--runs`.
Targets with 1,000,000 tokens: rates within 20 % of those with 10,000, p99 < 30 ms, tick
< 5 ms, serve start < 1 s.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_serve import (  # noqa: E402
    CYCLE_LUA,
    FIRE_LUA,
    START_LUA,
    cpu_seconds,
    post,
    requests_done,
    wrk,
)
from own_postgres import TUNED, own_postgres  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

LANES = 10
#: Of each 100 tokens: queued, waiting, completed.
QUEUED, WAITING = 7, 3
DAY = 86400.0


class Item(msgspec.Struct):
    title: str


def workflow() -> Workflow:
    """Ten states in a row, each with a routine and a timeout of a week: `next` moves a token
    on, `done` ends it, `remind` (fired, or reported by a routine) enters the state again."""
    flow = Workflow("scale", context=Item)
    lanes = [flow.state(f"lane{index}", timeout="7d") for index in range(LANES)]
    after, done, remind = flow.event("next"), flow.event("done"), flow.event("remind")
    flow.transition(START, lanes[0])
    for index, lane in enumerate(lanes):
        flow.transition(lane, lanes[(index + 1) % LANES], on=after)
        flow.transition(lane, END, on=done)
        flow.transition(lane, lane, on=remind)
    return flow


def templates(graph: Path, path: Path, began: float) -> dict[str, int]:
    """Write template tokens through the engine: `E` completed after three states, `Q<k>`
    with a queued task in `lane<k>`, `W<k>` waiting in `lane<k>`; answer each one's
    ledger rows."""
    from stateous.control.engine import Engine
    from stateous.control.graph import Graph
    from stateous.control.store.sqlite import SqliteStore
    from stateous.model.wire import ReportBody

    now = [began]
    store = SqliteStore(path, clock=lambda: now[0])
    engine = Engine(Graph.load(graph), store)

    def step(token: str, event: str, kind: str = "event") -> None:
        grant = engine.claim("template", [engine.get(token).state])
        assert grant is not None and grant.token == token
        body = ReportBody(
            kind=kind, event=event if kind == "event" else None, supervisor="template"
        )
        engine.report(grant.task, body)
        now[0] += 0.002

    # Kept as serve keeps it: the tokens' graph, which serve then finds on record.
    store.write(engine.graphs.record)
    engine.start("E", {"title": "an order"})
    step("E", "next")
    step("E", "next")
    step("E", "done")
    # Each claim takes the oldest queued task of its state: the tokens that stay queued are
    # made last, those that go furthest first, so that no claim meets another's task.
    for name, waits in [(f"W{lane}", True) for lane in reversed(range(LANES))] + [
        (f"Q{lane}", False) for lane in reversed(range(LANES))
    ]:
        engine.start(name, {"title": "an order"})
        for _ in range(int(name[1:])):
            step(name, "next")
        if waits:
            step(name, "", kind="waiting")
    store.close()
    import apsw

    connection = apsw.Connection(str(path))
    counts = dict(connection.execute("SELECT token, count(*) FROM ledger GROUP BY token"))
    connection.close()
    return counts


#: Copy the rows of template token ? for names `<prefix>-<n>` (n from 0 to ? - 1), shifted
#: by n * ? seconds; the numbers come from a recursive CTE, `n` first so rows go in order.
NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) "
NAME = "printf('%s-%07d', ?, n.i)"


def shifted(column: str) -> str:
    """A time column of a template row, moved by `n.i * ?` seconds, in the store's format."""
    return f"strftime('%Y-%m-%d %H:%M:%f', {column}, (n.i * ?) || ' seconds') || '000'"


COPIES = {
    "tokens": (
        "INSERT INTO tokens (token, state, status, visit, context, entered_at, parent, workflow, "
        f"moved_at, visits, result, checksum) SELECT {NAME}, state, status, visit, context, "
        f"{shifted('entered_at')}, parent, workflow, {shifted('moved_at')}, visits, result, "
        "checksum FROM n CROSS JOIN t.tokens WHERE t.tokens.token = ?",
        ("name", "shift", "shift", "template"),
    ),
    "ledger": (
        f"INSERT INTO ledger SELECT {NAME}, seq, {shifted('at')}, kind, key, data, "
        "? + n.i * ? + seq FROM n CROSS JOIN t.ledger WHERE t.ledger.token = ?",
        ("name", "shift", "positions", "rows", "template"),
    ),
    "tasks": (
        "INSERT INTO tasks (token, state, visit, status, attempt, claimed_by, lease_until, "
        f"queued_at, contract) SELECT {NAME}, state, visit, status, attempt, claimed_by, "
        f"lease_until, {shifted('queued_at')}, contract FROM n CROSS JOIN t.tasks "
        "WHERE t.tasks.token = ?",
        ("name", "shift", "template"),
    ),
    "timers": (
        "INSERT INTO timers (token, state, visit, event, payload, set_at, due_at, status, kind) "
        f"SELECT {NAME}, state, visit, event, payload, {shifted('set_at')}, "
        f"{shifted('due_at')}, status, kind FROM n CROSS JOIN t.timers WHERE t.timers.token = ?",
        ("name", "shift", "shift", "template"),
    ),
}


def build(graph: Path, path: Path, tokens: int) -> None:
    """Make a database of `tokens` tokens from the templates, in bulk."""
    import apsw

    from stateous.control.store.sqlite import SqliteStore

    began = time.time() - 2 * DAY
    template = path.with_suffix(".template")
    ledger = templates(graph, template, began)
    SqliteStore(path).close()
    connection = apsw.Connection(str(path))
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute("PRAGMA cache_size = -200000")
    connection.execute(f"ATTACH '{template}' AS t")
    hundreds = tokens // 100
    groups = [("E", "E", hundreds * (100 - QUEUED - WAITING))]
    for lane in range(LANES):
        groups.append((f"Q{lane}", f"Q{lane}", hundreds * QUEUED // LANES))
        groups.append((f"W{lane}", f"W{lane}", hundreds * WAITING // LANES))
    positions = 0  # the ledger positions taken so far: each copy's rows follow them
    with connection:
        for template_token, prefix, count in groups:
            values = {
                "name": prefix,
                "shift": DAY / count,
                "template": template_token,
                "positions": positions,
                "rows": ledger[template_token],
            }
            for sql, names in COPIES.values():
                connection.execute(NUMBERS + sql, (count, *(values[name] for name in names)))
            positions += count * ledger[template_token]
        connection.execute("INSERT INTO graphs SELECT * FROM t.graphs")
    connection.execute("DETACH t")
    # As a database that serve has served: in WAL mode, which is kept in the file.
    connection.execute("PRAGMA journal_mode = WAL")
    connection.close()
    rows = sum(ledger[token] * count for token, _, count in groups)
    print(f"  {tokens} tokens, {rows} ledger rows, {path.stat().st_size / 2**20:.0f} MiB")


def serve(graph: Path, db: str, code: Path) -> tuple[subprocess.Popen, int, float]:
    """Start `serve` of the checkout `code` on a port; answer it, its port, and the seconds
    to its first /health."""
    port = 19000 + (int(time.time() * 1000) % 900)
    options = ["--listen", f"127.0.0.1:{port}", "--db", db, "--lease", "1h"]
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "stateous", "serve", str(graph), *options],
        cwd=code,
        stderr=subprocess.DEVNULL,
    )
    while True:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return process, port, time.perf_counter() - began
        except OSError:
            if process.poll() is not None:
                raise SystemExit(f"serve ended with {process.returncode}") from None
            time.sleep(0.005)


def cycle_lua(states: list[str]) -> str:
    """bench_serve's claim-and-report cycle, for these states, reporting `remind`."""
    listed = ", ".join(f'"{state}"' for state in states)
    return CYCLE_LUA.replace('"states": ["draft"]', f'"states": [{listed}]').replace(
        '"event": "submitted"', '"event": "remind"'
    )


TICK = """
import statistics, sys, time
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.store import open_database
try:
    from stateous.control.clock import tick
except ImportError:
    tick = Engine.tick
engine = Engine(Graph.load(sys.argv[1]), open_database(sys.argv[2]))
times = []
for _ in range(200):
    began = time.perf_counter()
    tick(engine)
    times.append((time.perf_counter() - began) * 1000)
times.sort()
print(statistics.median(times), times[197])
"""


def tick_times(graph: Path, db: str, code: Path) -> tuple[float, float]:
    """The median and p99 of the clock's tick, in ms, on `db` with the code of `code`."""
    output = subprocess.run(
        [sys.executable, "-c", TICK, str(graph), db],
        cwd=code,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return float(output[0]), float(output[1])


def one_run(graph: Path, pristine: str, code: Path, seconds: float, postgres: str | None) -> dict:
    """Serve a fresh copy of the database `pristine` (a file, or a Postgres database's name
    on the server `postgres`) and measure everything once."""
    db = fresh_copy(pristine, postgres)
    figures: dict[str, float] = {}
    process, port, figures["serve start s"] = serve(graph, db, code)
    try:
        url = f"http://127.0.0.1:{port}"

        def phase(name: str, script: str, threads: int = 2) -> dict:
            """Run one load; note its rate, p99 and the server's CPU per request."""
            before = cpu_seconds(process.pid)
            result = wrk(url, script, seconds, threads=threads)
            cpu = cpu_seconds(process.pid) - before
            figures[f"{name}/s"], figures[f"{name} p99 ms"] = result["rate"], result["p99"]
            figures[f"{name} CPU ms/request"] = cpu * 1000 / max(1, requests_done(result))
            return result

        phase("starts", START_LUA)
        for index in range(1000):
            post(port, "/tokens", {"token": f"F-{index}", "context": {"title": "x"}})
        phase("fires", FIRE_LUA)
        for count in (1, 2, 10):
            name = f"cycles {count} states"
            cycles = phase(name, cycle_lua([f"lane{index}" for index in range(count)]), 8)
            figures[f"{name}/s"] = (cycles["reports"] or 0) / seconds  # a cycle: two requests
        before = cpu_seconds(process.pid)
        time.sleep(seconds)
        figures["idle CPU %"] = (cpu_seconds(process.pid) - before) / seconds * 100
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    figures["tick ms"], figures["tick p99 ms"] = tick_times(graph, db, code)
    return figures


WORK = "stateous_scale_work"


def fresh_copy(pristine: str, postgres: str | None) -> str:
    """Copy the database `pristine` for one run; answer its URL."""
    if postgres is None:
        work = Path(pristine).with_name("work.db")
        for leftover in work.parent.glob("work.db*"):
            leftover.unlink()
        shutil.copyfile(pristine, work)
        # On disk before serve starts: its first sync must not be the copy's gigabytes.
        with work.open("rb+") as copied:
            os.fsync(copied.fileno())
        return f"sqlite:///{work}"
    import psycopg

    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {WORK}")
        # Copied as files, then checkpointed: from Postgres 15 a copy is by default written
        # to the WAL, gigabytes that the checkpointer would still be writing out while the
        # run measures.
        strategy = " STRATEGY FILE_COPY" if admin.info.server_version >= 150000 else ""
        admin.execute(f"CREATE DATABASE {WORK} TEMPLATE {pristine}{strategy}")
        admin.execute("CHECKPOINT")
    return on_database(postgres, WORK)


def drop_databases(postgres: str, names: list[str]) -> None:
    import psycopg

    with psycopg.connect(postgres, autocommit=True) as admin:
        for name in names:
            admin.execute(f"DROP DATABASE IF EXISTS {name}")


def on_database(url: str, name: str) -> str:
    """The URL of another database on the server of `url`."""
    return url.rsplit("/", 1)[0] + "/" + name


#: The columns that the Postgres copy takes of each table (`tokens.rowid` is its own).
TABLES = {
    "tokens": "token, state, status, visit, context, entered_at, parent, workflow, moved_at, "
    "visits, result, checksum",
    "ledger": "token, seq, at, kind, key, data, pos",
    "tasks": "id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at, "
    "contract",
    "timers": "id, token, state, visit, event, payload, set_at, due_at, status, kind",
    "graphs": "checksum, document, first_served_at, last_served_at",
}


def build_postgres(sqlite: Path, postgres: str, name: str) -> None:
    """Copy a built SQLite database into a new Postgres database `name`, then analyze it as
    autovacuum would."""
    import apsw
    import psycopg

    from stateous.control.store.postgres import PostgresStore

    drop_databases(postgres, [name])
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = on_database(postgres, name)
    PostgresStore(url, size=1).close()
    source = apsw.Connection(str(sqlite))
    with psycopg.connect(url, autocommit=True) as target:
        for table, columns in TABLES.items():
            with target.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in source.execute(f"SELECT {columns} FROM {table}"):
                    copy.write_row(row)
        for table in ("tasks", "timers"):
            target.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
            )
        target.execute("VACUUM ANALYZE")
    source.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", default="10000,1000000")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout whose code to compare with")
    parser.add_argument("--folder", type=Path, help="keep the databases here (built once)")
    parser.add_argument(
        "--postgres",
        help="postgresql://USER@HOST:5432/DB: serve Postgres databases made on this server "
        "(stateous_scale_*) from the SQLite ones",
    )
    parser.add_argument(
        "--own-postgres",
        action="store_true",
        help="start a Postgres server of the benchmark's own, tuned (bench/own_postgres.py), "
        "and serve its databases",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    if not args.own_postgres:
        measure(args)
        return
    with own_postgres() as url:
        args.postgres = url
        measure(args)


def stated(postgres: str) -> str:
    """The settings of the Postgres server that the figures come from."""
    import psycopg

    with psycopg.connect(postgres, autocommit=True) as connection:
        shown = [
            (name, connection.execute(f"SHOW {name}").fetchone())
            for name in ["server_version", *TUNED]
        ]
    return ", ".join(f"{name}={row[0] if row else '?'}" for name, row in shown)


def measure(args: argparse.Namespace) -> None:
    """Build the databases (once), measure each size with each code, print the table."""
    if args.postgres:
        print(f"Postgres: {stated(args.postgres)}", flush=True)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="stateous-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    graph = folder / "scale.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    sizes = [int(size) for size in args.tokens.split(",")]
    codes = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    pristine = {}
    for size in sizes:
        path = folder / f"scale-{size}.db"
        if not path.exists():
            began = time.perf_counter()
            build(graph, path, size)
            print(f"built {path.name} in {time.perf_counter() - began:.0f} s", flush=True)
        pristine[size] = str(path)
        if args.postgres:
            began = time.perf_counter()
            pristine[size] = f"stateous_scale_{size}"
            build_postgres(path, args.postgres, pristine[size])
            print(f"copied to Postgres in {time.perf_counter() - began:.0f} s", flush=True)
    results: dict[tuple[str, int], list[dict]] = {}
    try:
        for run in range(args.runs):
            for size in sizes:
                for code_name, code in codes.items():
                    figures = one_run(graph, pristine[size], code, args.seconds, args.postgres)
                    results.setdefault((code_name, size), []).append(figures)
                    print(f"run {run + 1}, {code_name}, {size} tokens: {figures}", flush=True)
    finally:
        for leftover in folder.glob("work.db*"):
            leftover.unlink()
        if args.postgres:
            drop_databases(args.postgres, [WORK, *(pristine[size] for size in sizes)])
        if args.folder is None:
            shutil.rmtree(folder, ignore_errors=True)
    report(results)


def report(results: dict[tuple[str, int], list[dict]]) -> None:
    """One table: the median of each figure, by code and size."""
    columns = sorted(results)
    names = list(next(iter(results.values()))[0])
    print(f"{'':28}" + "".join(f"{f'{code} {size}':>18}" for code, size in columns))
    for name in names:
        cells = (statistics.median(run[name] for run in results[column]) for column in columns)
        print(f"{name:28}" + "".join(f"{cell:18.2f}" for cell in cells))


if __name__ == "__main__":
    main()
