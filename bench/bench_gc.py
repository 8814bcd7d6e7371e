"""Benchmark: the garbage collector's pauses in `stateous serve` under load, and the p99 they cost.

Run: .venv/bin/python bench/bench_gc.py [--seconds 8] [--runs 2] [--db postgres]
                                        [--before CHECKOUT]
Needs `wrk` (Debian package). Runs `serve` (SQLite, or with `--db postgres` a new database
on the machine's Postgres at 127.0.0.1:5432) with a hook that notes the length of every
collection of the two older generations (`gc.callbacks`), then sends starts and fires
from 8 keep-alive clients, twice each, and prints their rates, p50 and p99 and, per
generation, how many collections ran and their median and longest pause. `--before`
runs the same with another checkout's `stateous` package, alternating with this one.
A full collection stops every thread of the process; before `serve` froze its start-up
heap (`stateous/model/heap.py`) each one took 12 to 36 ms, several times a minute.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_serve import FIRE_LUA, START_LUA, post, wait_for_health, workflow, wrk  # noqa: E402

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

POSTGRES = "postgresql://postgres@127.0.0.1:5432"
#: Runs `stateous` with a note of each collection of generation 1 or 2, to $GC_LOG.
HOOKED = """\
import gc, os, sys, time
log = open(os.environ["GC_LOG"], "a", buffering=1)
began = [0.0]
def note(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    elif info["generation"] >= 1:
        log.write(f"{info['generation']} {(time.perf_counter() - began[0]) * 1e3:.3f}\\n")
gc.callbacks.append(note)
from stateous.cli.main import main
sys.argv[0] = "stateous"
sys.exit(main())
"""


def database(kind: str, folder: Path) -> str:
    """A new, empty database for one run."""
    if kind == "sqlite":
        return f"sqlite:///{folder / 'bench.db'}"
    import psycopg

    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as connection:
        connection.execute("DROP DATABASE IF EXISTS stateous_bench_gc")
        connection.execute("CREATE DATABASE stateous_bench_gc")
    return f"{POSTGRES}/stateous_bench_gc"


def run(code: Path, kind: str, seconds: float) -> dict[str, float]:
    """One run of `serve` from `code`: the loads' figures and the pauses of each generation."""
    folder = Path(tempfile.mkdtemp(prefix="stateous-gc-"))
    graph, hooked, log = folder / "bench.json", folder / "hooked.py", folder / "gc.log"
    graph.write_bytes(dump(compile_workflow(workflow())))
    hooked.write_text(HOOKED)
    port = 18500 + os.getpid() % 500
    command = [sys.executable, str(hooked), "serve", str(graph)]
    command += ["--listen", f"127.0.0.1:{port}", "--db", database(kind, folder)]
    env = {**os.environ, "GC_LOG": str(log), "PYTHONPATH": str(code)}
    server = subprocess.Popen(command, cwd=folder, env=env, stderr=subprocess.DEVNULL)
    figures: dict[str, float] = {}
    try:
        wait_for_health(port)
        for index in range(1000):
            post(port, "/tokens", {"token": f"F-{index}", "context": {"title": "x"}})
        log.write_text("")
        url = f"http://127.0.0.1:{port}"
        for load, script in (("starts", START_LUA), ("fires", FIRE_LUA)) * 2:
            result = wrk(url, script, seconds)
            for name in ("rate", "p50", "p99"):
                figures.setdefault(f"{load} {name}", 0.0)
                figures[f"{load} {name}"] = max(figures[f"{load} {name}"], result[name])
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    pauses: dict[str, list[float]] = {"1": [], "2": []}
    for line in log.read_text().splitlines():
        generation, milliseconds = line.split()
        pauses[generation].append(float(milliseconds))
    for generation, taken in pauses.items():
        figures[f"gen {generation} collections"] = len(taken)
        figures[f"gen {generation} median ms"] = statistics.median(taken) if taken else 0.0
        figures[f"gen {generation} longest ms"] = max(taken, default=0.0)
    shutil.rmtree(folder, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--before", type=Path, help="a checkout whose code to compare with")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")
    codes = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    results: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
    for number in range(args.runs):
        for label, code in codes.items():
            figures = run(code, args.db, args.seconds)
            results[label].append(figures)
            print(f"run {number + 1}, {label}: {figures}", flush=True)
    print(
        f"\nmedians of {args.runs} runs; rates are the better of two loads, p50 and p99 the worse"
    )
    print(f"{'':24}" + "".join(f"{label:>12}" for label in codes))
    for name in results["after"][0]:
        values = [statistics.median(run[name] for run in results[label]) for label in codes]
        print(f"{name:24}" + "".join(f"{value:12.2f}" for value in values))


if __name__ == "__main__":
    main()
