"""Benchmark: what one write costs inside the control plane, without HTTP.

Run: .venv/bin/python bench/bench_write_path.py [--fires 3000] [--runs 3] [--before CHECKOUT]
Fires `remind` (a state that runs a routine entered again: its old task cancelled, a new one
queued, four ledger rows) through `Engine.fire` in one thread, on a fresh SQLite file with
200 tokens, as `serve` builds the engine but with no HTTP in front. Prints, per fire, the
process's CPU time (every thread's: the checkpointer's too), the WAL frames written (pages
of 4 KiB, counted with checkpoints off in a second pass), and the time SQLite spent in each
kind of statement. `--before` runs the same against another checkout's code, alternating
with this one. No target: it says where a fire's cost lies, which HTTP's noise hides.
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
import collections, json, os, sys, tempfile, time
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
from bench_serve import workflow
from stateous.compiler.compile import compile_workflow
from stateous.control.engine import Engine
from stateous.control.graph import Graph
from stateous.control.store.sqlite import SqliteStore
from stateous.model.graph_file import dump, load

fires, checkpoints = int(sys.argv[1]), sys.argv[2] == "on"
raw = dump(compile_workflow(workflow()))
folder = tempfile.mkdtemp()
path = os.path.join(folder, "bench.db")
store = SqliteStore(path)
if not checkpoints:
    store._writer.set_wal_hook(None)
    store._writer.execute("PRAGMA wal_autocheckpoint = 0")
engine = Engine(Graph(load(raw), raw), store)
for index in range(200):
    engine.start(f"F-{index}", {"title": "x"})
for index in range(500):
    engine.fire(f"F-{index % 200}", "remind")
spent = collections.Counter()
store._writer.set_profile(lambda sql, ns: spent.update({sql.split(" (")[0][:40]: ns}))
wal = os.path.getsize(path + "-wal")
cpu = time.process_time()
for index in range(fires):
    engine.fire(f"F-{index % 200}", "remind")
cpu = time.process_time() - cpu
frames = (os.path.getsize(path + "-wal") - wal) / (4096 + 24)
store.close()
print(json.dumps({
    "cpu_us": cpu / fires * 1e6,
    "frames": frames / fires,
    "sql_us": {sql: ns / fires / 1000 for sql, ns in spent.most_common(8)},
}))
"""


def run(checkout: Path, fires: int, checkpoints: bool) -> dict:
    """One pass of the worker in `checkout`: its figures per fire."""
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(fires), "on" if checkpoints else "off"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fires", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="a checkout whose code to compare with")
    args = parser.parse_args()
    codes = {"after": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    results: dict[str, list[dict]] = {name: [] for name in codes}
    for _ in range(args.runs):
        for name, checkout in codes.items():
            figures = run(checkout, args.fires, checkpoints=True)
            # With the WAL never copied back, its growth is every frame the fires wrote.
            figures["frames"] = run(checkout, args.fires // 3, checkpoints=False)["frames"]
            results[name].append(figures)
    for name, runs in results.items():
        cpu = statistics.median(figures["cpu_us"] for figures in runs)
        frames = statistics.median(figures["frames"] for figures in runs)
        print(f"{name} ({codes[name]}): CPU {cpu:.0f} us a fire, {frames:.1f} WAL frames a fire")
        last = runs[len(runs) // 2]["sql_us"]
        for sql, micros in last.items():
            print(f"  {micros:7.1f} us  {sql}")


if __name__ == "__main__":
    main()
