"""Benchmark: `GET /metrics` and `GET /stats` over a database of a million tokens, and what
keeping the counts costs each write.

Run: .venv/bin/python bench/bench_metrics.py [--tokens 1000000] [--active 100000] [--runs 50]
     .venv/bin/python bench/bench_metrics.py --db postgresql://USER@HOST:5432/EMPTY_DATABASE
It fills the database by bulk inserts (not through the API): `--tokens` tokens, of which
`--active` can still move (a tenth of those paused), spread over two states, each live
token with its live task (60 % queued, 30 % claimed, 10 % waiting) and a pending timeout
in `review`; the ended ones completed, failed or cancelled, each with a done task, a
fired or cancelled timeout and a ledger row; the counts table as a busy control plane
leaves it. Then it serves the database with `stateous serve` and times `--runs` requests
of each route on one kept-alive connection (median, p90, slowest). Target: /metrics
within 50 ms, /stats as cheap.
`--write-cost` also times events fired one after another in this process, with the counts
kept and with them left out, alternating rounds, to show what the counts cost a write.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from bench_serve import workflow  # noqa: E402

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

SERVING = re.compile(r"serving on (http://\S+) ")
STAMP = "2026-01-01T00:00:00.000000Z"
STATES = ("draft", "review")
ENDED = ("completed", "failed", "cancelled")
LIVE_TASKS = ("queued",) * 6 + ("claimed",) * 3 + ("waiting",)


def stamp(index: int) -> str:
    """A distinct time for each row, a second apart, so that ages and orders are real."""
    seconds = 1_767_225_600 + index
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))


def token_rows(tokens: int, active: int) -> Iterator[tuple[Any, ...]]:
    for index in range(tokens):
        live = index < active
        state = STATES[index % 2] if live else "review"
        status = ("paused" if index % 10 == 0 else "active") if live else ENDED[index % 3]
        yield (f"T-{index}", state, status, 1, '{"title":"x","amount":0}', STAMP, stamp(index))


def task_rows(tokens: int, active: int) -> Iterator[tuple[Any, ...]]:
    for index in range(tokens):
        live = index < active
        status = LIVE_TASKS[index % 10] if live else "done"
        state = STATES[index % 2] if live else "review"
        claimed = "box-1" if status == "claimed" else None
        lease = "2099-01-01T00:00:00.000000Z" if status == "claimed" else None
        yield (index + 1, f"T-{index}", state, 1, status, 1, claimed, lease, stamp(index))


def timer_rows(tokens: int, active: int) -> Iterator[tuple[Any, ...]]:
    """A pending timeout for each live token in `review`; a fired or cancelled one for each
    ended token."""
    due = "2099-01-01T00:00:00.000000Z"
    for index in range(tokens):
        live = index < active
        if live and STATES[index % 2] != "review":
            continue
        status = "pending" if live else ("fired", "cancelled")[index % 2]
        yield (index + 1, f"T-{index}", "review", 1, "timeout", None, STAMP, due, status, "timeout")


def ledger_rows(tokens: int, active: int) -> Iterator[tuple[Any, ...]]:
    """A row for each token, each at its own place in the order of commits (`pos`)."""
    for index in range(tokens):
        kind = "entered" if index < active else ENDED[index % 3]
        yield (f"T-{index}", 1, stamp(index), kind, "{}", index + 1)


def live_counts(tokens: int, active: int) -> list[tuple[Any, ...]]:
    """The gauges of the live tokens and tasks and of the pending timers that the rows above
    make, as the counts table keeps them (a change keeps them as it moves a row)."""
    found: dict[tuple[str, str], int] = {}
    for row in token_rows(active, active):
        key = ("live_tokens", f"{row[2]} {row[1]}")
        found[key] = found.get(key, 0) + 1
    for row in task_rows(active, active):
        key = ("live_tasks", f"{row[4]} {row[2]}")
        found[key] = found.get(key, 0) + 1
    found[("timers_pending", "")] = sum(1 for row in timer_rows(active, active))
    return [(name, label, -1, 0, -1, n) for (name, label), n in found.items()]


def count_rows(tokens: int, active: int) -> list[tuple[Any, ...]]:
    """The counts of a control plane that has served a while: totals over a few shards, a
    ring of minutes, and the gauges of the live rows."""
    minute = int(time.time() // 60)
    names = ["tokens_started", "events_fired", "tasks_claimed", "attempts_failed"]
    names += ["timers_fired", "leases_ended"]
    found = []
    for shard in range(8):
        for name in names:
            found.append((name, "", -1, shard, -1, tokens // 8))
        for name, label in itertools.product(["reports"], ["event", "waiting", "failed"]):
            found.append((name, label, -1, shard, -1, tokens // 24))
        for label in ENDED:
            found.append(("tokens_ended", label, -1, shard, -1, tokens // 24))
        for slot in range(60):
            for name in ("events_fired", "attempts_failed", "leases_ended"):
                found.append((name, "", slot, shard, minute - slot, 25))
    return found + live_counts(tokens, active)


TOKENS = "token, state, status, visit, context, entered_at, moved_at"
TASKS = "id, token, state, visit, status, attempt, claimed_by, lease_until, queued_at"
TIMERS = "id, token, state, visit, event, payload, set_at, due_at, status, kind"
LEDGER = "token, seq, at, kind, data, pos"
COUNTS = "name, label, slot, shard, minute, n"


def fill_sqlite(path: Path, tokens: int, active: int) -> None:
    import apsw

    from stateous.control.store.sqlite import SqliteStore

    SqliteStore(path).close()
    connection = apsw.Connection(str(path))
    tables = [
        ("tokens", TOKENS, token_rows(tokens, active)),
        ("tasks", TASKS, task_rows(tokens, active)),
        ("timers", TIMERS, timer_rows(tokens, active)),
        ("ledger", LEDGER, ledger_rows(tokens, active)),
        ("counts", COUNTS, iter(count_rows(tokens, active))),
    ]
    with connection:
        for table, columns, rows in tables:
            marks = ", ".join("?" for _ in columns.split(", "))
            connection.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
    connection.execute("ANALYZE")
    connection.close()


def fill_postgres(url: str, tokens: int, active: int) -> None:
    import psycopg

    from stateous.control.store.postgres import PostgresStore

    PostgresStore(url, size=1).close()
    tables = [
        ("tokens", TOKENS, token_rows(tokens, active)),
        ("tasks", TASKS, task_rows(tokens, active)),
        ("timers", TIMERS, timer_rows(tokens, active)),
        ("ledger", LEDGER, ledger_rows(tokens, active)),
        ("counts", COUNTS, iter(count_rows(tokens, active))),
    ]
    with psycopg.connect(url) as connection:
        for table, columns, rows in tables:
            with connection.cursor().copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        for table in ("tasks", "timers"):  # the ids were given: the sequences go past them
            connection.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}"
            )
        connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM ANALYZE")


def serve(graph: Path, db: str) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, str(ROOT / "stateous.py"), "serve", str(graph)]
    argv += ["--db", db, "--listen", "127.0.0.1:0"]
    process = subprocess.Popen(argv, cwd=graph.parent, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        found = SERVING.search(line)
        if found:
            return process, found[1]
    raise SystemExit(f"serve did not start (exit code {process.wait()})")


def timed(url: str, path: str, runs: int) -> list[float]:
    """Ask `path` `runs` times on one kept-alive connection; each answer's time in ms."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    times = []
    for _ in range(runs + 2):
        began = time.perf_counter()
        connection.request("GET", path)
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200, answer.status
        times.append((time.perf_counter() - began) * 1000)
    connection.close()
    return times[2:]  # the first two warm the connection and the statements


def report(name: str, times: list[float]) -> None:
    ordered = sorted(times)
    p90 = ordered[max(0, int(len(ordered) * 0.9) - 1)]
    print(
        f"{name:<14} median {statistics.median(ordered):7.2f} ms   p90 {p90:7.2f} ms   "
        f"slowest {ordered[-1]:7.2f} ms"
    )


def write_cost(folder: Path, db: str | None, rounds: int, fires: int) -> None:
    """Fires one after another in this process, with the counts kept and left out."""
    from stateous.control.engine import Engine
    from stateous.control.graph import Graph
    from stateous.control.store import open_database
    from stateous.control.store.counts import Counts
    from stateous.control.store.sql import SqlTx
    from stateous.control.store.statements import Statements

    graph = Graph.load(folder / "bench.json")
    store = open_database(db or f"sqlite:///{folder / 'cost.db'}")
    engine = Engine(graph, store)
    for index in range(fires):
        engine.start(f"C-{index}", {"title": "x"})
    keep = Counts.finished
    figures: dict[str, list[float]] = {"counted": [], "uncounted": []}
    run = SqlTx.run
    inside = [0.0, 0.0]

    def timed_keep(self: Counts, tx: Statements, refused: Exception | None) -> None:
        began = time.perf_counter()
        keep(self, tx, refused)
        inside[0] += time.perf_counter() - began

    def untimed_keep(self: Counts, tx: Statements, refused: Exception | None) -> None:
        return None

    def timed_run(self: SqlTx, operation: Any) -> Any:
        began = time.perf_counter()
        try:
            return run(self, operation)
        finally:
            inside[1] += time.perf_counter() - began

    try:
        for _ in range(rounds):
            for way in ("counted", "uncounted"):
                Counts.finished = timed_keep if way == "counted" else untimed_keep  # type: ignore[method-assign]
                SqlTx.run = timed_run if way == "counted" else run  # type: ignore[method-assign]
                began = time.perf_counter()
                for index in range(fires):
                    engine.fire(f"C-{index}", "remind")
                figures[way].append((time.perf_counter() - began) * 1e6 / fires)
    finally:
        Counts.finished = keep  # type: ignore[method-assign]
        SqlTx.run = run  # type: ignore[method-assign]
        store.close()
    done = rounds * fires
    print(
        f"the counts statement: {inside[0] * 1e6 / done:.1f} us per fire, of the "
        f"{inside[1] * 1e6 / done:.1f} us that the fire's operation takes before its commit"
    )
    for way, per_fire in figures.items():
        print(
            f"fire, {way + ':':<11} median {statistics.median(per_fire):7.1f} us   "
            f"rounds {', '.join(f'{one:.0f}' for one in per_fire)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--active", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--db", help="an empty Postgres database instead of a SQLite file")
    parser.add_argument("--write-cost", action="store_true")
    parser.add_argument("--fires", type=int, default=500, help="fires per round of --write-cost")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        graph = folder / "bench.json"
        graph.write_bytes(dump(compile_workflow(workflow())))
        db = args.db or f"sqlite:///{folder / 'bench.db'}"
        began = time.perf_counter()
        if args.db:
            fill_postgres(args.db, args.tokens, args.active)
        else:
            fill_sqlite(folder / "bench.db", args.tokens, args.active)
        print(
            f"filled {args.tokens} tokens ({args.active} live) in "
            f"{time.perf_counter() - began:.1f}s; {args.runs} requests each"
        )
        process, url = serve(graph, db)
        try:
            report("GET /metrics", timed(url, "/metrics", args.runs))
            report("GET /stats", timed(url, "/stats", args.runs))
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
        if args.write_cost:
            write_cost(folder, args.db, 5, args.fires)


if __name__ == "__main__":
    main()
