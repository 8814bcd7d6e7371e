"""Benchmark: what a claim costs when tokens of five graph versions are live, against one.

Run: .venv/bin/python bench/bench_claim_versions.py [--tasks 2000] [--runs 3] [--db URL]
     [--before CHECKOUT]
Claims through `Engine.claim` in one thread, no HTTP, on a fresh SQLite file (or a fresh
Postgres schema of `--db`). Five versions of one workflow differ in the events of `work`,
so the contract of `work` differs in each. "One version": `--tasks` tokens of version 5
wait in `work`. "Five versions": `--tasks` tokens of each version, the older versions'
queued first, so that their tasks sit at the head of `work`'s queue. A supervisor of
version 5 then claims `--tasks` times, naming its checksum: each claim takes one of
version 5's tasks. The same is measured for a claim that names no graph (a plain client,
which takes the oldest task of any version), and the starts that queued the tasks.
Scenarios alternate, `--runs` times; medians of the process's CPU time per operation (all
its threads: a figure that holds on a loaded machine) and of each claim's wall time.
`--before` also runs the plain claims and the starts against another checkout's code
(which has no claims by checksum), alternating.
Target (issue 38): a claim with five versions live costs at most 1.1 times one with one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Run in the checkout under test, so that it imports that checkout's code.
WORKER = r"""
import inspect, json, os, statistics, sys, tempfile, time
sys.path.insert(0, os.getcwd())
import msgspec
from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.serve import record_graph
from stateous.control.store import open_store
from stateous.model.graph_file import dump, load

class Item(msgspec.Struct):
    title: str

def flow(version):
    made = Workflow("claims", context=Item)
    work = made.state("work")
    made.transition(START, work)
    made.transition(work, END, on=made.event("done"))
    made.transition(work, END, on=made.event(f"extra{version}"))  # work's contract differs
    return made

tasks, versions, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
by_checksum = "checksum" in inspect.signature(Engine.claim).parameters
if db == "sqlite":
    db = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
lock, store = open_store(db, connections=4)
engine, started = None, []
for version in range(6 - versions, 6):
    raw = dump(compile_workflow(flow(version)))
    engine = Engine(Graph(load(raw), raw), store)
    record_graph(store, engine.graphs)
    begun = time.process_time()
    for index in range(tasks):
        engine.start(f"V{version}-{index}", {"title": "x"})
    started.append((time.process_time() - begun) / tasks)
checksum = engine.graph.checksum
figures = {"start_cpu_us": statistics.median(started) * 1e6}
kinds = [("plain", None)] + ([("checksum", checksum)] if by_checksum else [])
for kind, named in kinds:
    keywords = {} if named is None else {"checksum": named}
    times = []
    cpu = time.process_time()
    for index in range(tasks):
        begun = time.perf_counter()
        grant = engine.claim(f"s-{kind}", ["work"], **keywords)
        times.append(time.perf_counter() - begun)
        assert grant is not None
        if named is not None:
            assert grant.token.startswith("V5-"), grant.token
    figures[f"{kind}_cpu_us"] = (time.process_time() - cpu) / tasks * 1e6
    figures[f"{kind}_us"] = statistics.median(times) * 1e6
    if kind == "plain":  # give the tasks back: each claim below takes one again
        store.write(lambda tx: tx.execute("UPDATE tasks SET status = 'queued', attempt = 0, "
                                          "claimed_by = NULL, lease_until = NULL "
                                          "WHERE status = 'claimed'"))
store.close()
print(json.dumps(figures))
"""


def run(checkout: Path, tasks: int, versions: int, db: str) -> dict:
    """One pass of the worker in `checkout`: its figures."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(tasks), str(versions), db],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def fresh(db: str) -> str:
    """A fresh database for one pass: SQLite's is made by the worker; a Postgres one is
    emptied here."""
    if db == "sqlite":
        return db
    import psycopg

    with psycopg.connect(db, autocommit=True) as connection:
        connection.execute("DROP SCHEMA public CASCADE")
        connection.execute("CREATE SCHEMA public")
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--db", default="sqlite", help="a Postgres URL of an empty database")
    parser.add_argument("--before", type=Path, help="a checkout whose code to compare with")
    args = parser.parse_args()
    codes = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    results: dict[tuple[str, int], list[dict]] = {}
    for _ in range(args.runs):
        for versions in (1, 5):
            for name, checkout in codes.items():
                figures = run(checkout, args.tasks, versions, fresh(args.db))
                results.setdefault((name, versions), []).append(figures)
    medians = {
        key: {field: statistics.median(run[field] for run in runs) for field in runs[0]}
        for key, runs in results.items()
    }
    for (name, versions), figures in sorted(medians.items()):
        shown = ", ".join(f"{field} {value:.0f}" for field, value in figures.items())
        print(f"{name}, {versions} version(s) live: {shown}")
    one, five = medians[("after", 1)], medians[("after", 5)]
    for field in ("checksum_cpu_us", "checksum_us"):
        ratio = five[field] / one[field]
        print(f"{field}, five versions live against one: {ratio:.2f} (target <= 1.1)")


if __name__ == "__main__":
    main()
