"""Benchmark: what a claim costs when its state uses 10 resources, against one that uses
none, on a database of 1,000,000 tokens with 100,000 queued tasks.

Run: .venv/bin/python bench/bench_claim_resources.py [--tokens 1000000] [--queued 100000]
     [--claims 500] [--rounds 5] [--db URL]
Claims through `Engine.claim` in one thread, no HTTP, on a fresh SQLite file (or a fresh
Postgres database of `--db`, which is emptied). One graph has two states: `plain` uses no
resource, `busy` uses 10 (each by a key read from the context, one slot of 10 per key).
The database is built in bulk (INSERT ... SELECT, from rows the engine wrote for one
token of each state): the tokens beyond `--queued` ended, half the queued ones in each
state, each `busy` task holding its 10 keys as a start would have left it. Rounds
alternate `--claims` claims of each state; medians over the rounds of the process's CPU
time per claim and of each claim's wall time. The starts that queue a task (and let it in
to its 10 keys) are measured the same way, and the claims of `busy` once 1,000 tasks of
one full key wait in it (they are out of its queue's index).
Target (issue 41): a claim with 10 resources costs at most 1.3 times one without.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.control import resources
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.store import Store, open_store
from stateous.model.graph_file import dump, load

KEYS = [f"r{n}" for n in range(10)]


class Job(msgspec.Struct):
    title: str
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


def flow() -> Workflow:
    made = Workflow("claims", context=Job)
    for name in KEYS:
        made.resource(name, slots=10)
    plain = made.state("plain")
    busy = made.state("busy", uses={name: f"ctx['{name}']" for name in KEYS})
    made.transition(START, plain, when="ctx['r0'] == ''")
    made.transition(START, busy, otherwise=True)
    made.transition(plain, END, on=made.event("done"))
    made.transition(busy, END, on="done")
    return made


#: The numbers 1 to `?`, in both databases.
NUMBERS = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "


def copies(
    store: Store, template: str, prefix: str, count: int, status: str | None, offset: int
) -> None:
    """`count` copies of a token (`prefix` and a number), its ledger (at positions below 0,
    from `offset` down), its live task and the task's uses (each key made the copy's own);
    ended copies (`status`) have no task."""
    name = f"'{prefix}' || CAST(n.i AS TEXT)"
    with_status = "status" if status is None else f"'{status}'"

    def build(tx: Any) -> None:
        unbounded(tx)
        tx.execute(
            f"{NUMBERS}INSERT INTO tokens (token, state, status, visit, context, entered_at, "
            "parent, workflow, moved_at, visits, result, checksum) "
            f"SELECT {name}, state, {with_status}, visit, context, entered_at, parent, workflow, "
            "moved_at, visits, result, checksum FROM tokens, n WHERE token = ?",
            (count, template),
        )
        tx.execute(
            f"{NUMBERS}INSERT INTO ledger (token, seq, at, kind, key, data, pos) "
            f"SELECT {name}, seq, at, kind, NULL, data, -(? + n.i * 64 + seq) "
            "FROM ledger, n WHERE token = ?",
            (count, offset, template),
        )
        if status is not None:
            return
        tx.execute(
            f"{NUMBERS}INSERT INTO tasks (token, state, visit, status, attempt, queued_at, "
            f"contract) SELECT {name}, state, visit, status, attempt, queued_at, contract "
            "FROM tasks, n WHERE token = ?",
            (count, template),
        )
        tx.execute(
            "INSERT INTO task_resources (task, resource, key, count, taken, waiting) "
            "SELECT t.id, u.resource, u.key || t.token, u.count, u.taken, u.waiting "
            "FROM tasks t JOIN task_resources u ON u.task = "
            "(SELECT id FROM tasks WHERE token = ?) WHERE t.token LIKE ?",
            (template, f"{prefix}%"),
        )
        tx.execute(
            "INSERT INTO resource_keys (resource, key, in_use) SELECT resource, key, 1 "
            "FROM task_resources u WHERE u.task IN (SELECT id FROM tasks WHERE token LIKE ?)",
            (f"{prefix}%",),
        )

    store.write(build)


def unbounded(tx: Any) -> None:
    """Let a bulk statement run as long as it takes (Postgres ends a write's statement after
    a while)."""
    if type(tx).__name__ == "PostgresTx":
        tx.execute("SET LOCAL statement_timeout = 0")


def timed(operation: Callable[[int], None], count: int) -> tuple[float, float]:
    """CPU per operation and the median wall time of one, in microseconds."""
    walls = []
    cpu = time.process_time()
    for index in range(count):
        began = time.perf_counter()
        operation(index)
        walls.append(time.perf_counter() - began)
    return (time.process_time() - cpu) / count * 1e6, statistics.median(walls) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", default="sqlite", help="a Postgres URL of a database to empty")
    args = parser.parse_args()
    db = args.db
    if db == "sqlite":
        db = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.db")
    else:
        import psycopg

        with psycopg.connect(db, autocommit=True) as connection:
            connection.execute("DROP SCHEMA public CASCADE")
            connection.execute("CREATE SCHEMA public")
    lock, store = open_store(db, connections=4)
    raw = dump(compile_workflow(flow()))
    engine = Engine(Graph(load(raw), raw), store)
    store.write(lambda tx: resources.declare(tx, engine.graph.document.resources))
    keyed = {name: "k" for name in KEYS}
    began = time.monotonic()
    engine.start("tpl-plain", {"title": "x"})
    engine.start("tpl-busy", {"title": "x", **keyed})
    half = args.queued // 2
    copies(store, "tpl-plain", "P", half, None, 0)
    copies(store, "tpl-busy", "B", half, None, 10**8)
    copies(store, "tpl-plain", "E", args.tokens - 2 * half, "completed", 2 * 10**8)
    store.write(lambda tx: (unbounded(tx), tx.execute("ANALYZE")))
    print(f"built {args.tokens} tokens, {2 * half} queued, in {time.monotonic() - began:.0f} s")

    figures: dict[str, list[tuple[float, float]]] = {}

    def claim(state: str) -> Callable[[int], None]:
        def one(_: int) -> None:
            assert engine.claim(f"box-{state}", [state]) is not None

        return one

    def start(state: str, round_: int) -> Callable[[int], None]:
        def one(index: int) -> None:
            context = {"title": "x"}
            if state == "busy":
                context.update({name: f"s{round_}-{index}" for name in KEYS})
            engine.start(f"S-{state}-{round_}-{index}", context)

        return one

    for round_ in range(args.rounds):
        for state in ("plain", "busy"):
            figures.setdefault(f"claim {state}", []).append(timed(claim(state), args.claims))
            figures.setdefault(f"start {state}", []).append(
                timed(start(state, round_), args.claims)
            )
    for index in range(1000):  # one full key: 990 of these wait, out of the queue's index
        engine.start(f"H-{index}", {"title": "x", **{name: "hot" for name in KEYS}})
    for _ in range(args.rounds):
        figures.setdefault("claim busy, 990 waiting", []).append(timed(claim("busy"), args.claims))
    store.close()
    lock.release()
    medians = {
        what: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
        for what, runs in figures.items()
    }
    for what, (cpu, wall) in medians.items():
        print(f"{what}: {cpu:.0f} us CPU, {wall:.0f} us wall (medians of {args.rounds} rounds)")
    for field, index in (("CPU", 0), ("wall", 1)):
        ratio = medians["claim busy"][index] / medians["claim plain"][index]
        print(f"claim with 10 resources against none, {field}: {ratio:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
