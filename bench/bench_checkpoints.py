"""Benchmark: writes beside the WAL checkpoints of a big SQLite database, in one process.

Run: .venv/bin/python bench/bench_checkpoints.py [--tokens-in-db 1000000] [--seconds 10]
     [--db FILE]   (a file made by an earlier run with --keep; it is copied, not changed)
Fills a database with ended tokens (as bench_serve.py does), then fires events on 1,000
live tokens from 8 threads straight into the engine (no HTTP) and prints fires per
second, the time of each write (p50, p99, max), how many times the whole WAL was
checkpointed, the longest time the checkpointer held the writes, and the largest WAL
file seen. Target: no write waits behind a checkpoint for more than a few milliseconds
(the held time), and the WAL stays near 16 MiB.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_serve import fill, workflow  # noqa: E402

from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.control.engine import Engine  # noqa: E402
from stateous.control.graph import Graph  # noqa: E402
from stateous.control.store.sqlite import SqliteStore  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

THREADS = 8
LIVE = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens-in-db", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--db", help="a filled database to copy instead of filling one")
    parser.add_argument("--keep", help="keep the filled database at this path")
    parser.add_argument("--checkpoint-pages", type=int, help="the WAL frames that start one")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stateous-checkpoints-"))
    try:
        run(folder, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(folder: Path, args: argparse.Namespace) -> None:
    database = folder / "bench.db"
    if args.db:
        shutil.copyfile(args.db, database)
    else:
        began = time.perf_counter()
        fill(database, args.tokens_in_db)
        print(f"filled {args.tokens_in_db} ended tokens in {time.perf_counter() - began:.1f}s")
        if args.keep:
            shutil.copyfile(database, args.keep)
    graph = folder / "bench.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    pages = {} if args.checkpoint_pages is None else {"checkpoint_pages": args.checkpoint_pages}
    store = SqliteStore(database, **pages)
    held: list[float] = []
    # A checkout from before the checkpointer (to compare) checkpoints in its writes.
    checkpointer = getattr(store, "checkpointer", None)
    if checkpointer is not None:
        pause = store.paused

        @contextlib.contextmanager
        def timed() -> Iterator[None]:
            with pause():
                began = time.perf_counter()
                yield
                held.append(time.perf_counter() - began)

        checkpointer.pause = timed
    engine = Engine(Graph.load(graph), store)
    for index in range(LIVE):
        engine.start(f"F-{index}", {"title": "x"})
    times: list[float] = []
    wal = [0]
    stop = time.monotonic() + args.seconds

    def fire(number: int) -> None:
        count = 0
        while time.monotonic() < stop:
            began = time.perf_counter()
            engine.fire(f"F-{(number * 7919 + count) % LIVE}", "remind")
            times.append(time.perf_counter() - began)
            count += 1

    def watch() -> None:
        while time.monotonic() < stop:
            path = Path(f"{database}-wal")
            wal[0] = max(wal[0], path.stat().st_size if path.exists() else 0)
            time.sleep(0.01)

    threads = [threading.Thread(target=fire, args=(n,)) for n in range(THREADS)]
    threads.append(threading.Thread(target=watch))
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    store.close()
    ms = sorted(seconds * 1000 for seconds in times)
    print(
        f"fires: {len(ms) / elapsed:.0f}/s  p50 {statistics.median(ms):.2f} ms  "
        f"p99 {ms[int(len(ms) * 0.99)]:.2f} ms  max {ms[-1]:.2f} ms"
    )
    longest = max(held, default=0.0) * 1000
    median = statistics.median(held) * 1000 if held else 0.0
    completed = "-" if checkpointer is None else checkpointer.completed
    print(
        f"whole checkpoints: {completed}  writes held: {len(held)} times, "
        f"median {median:.2f} ms, longest {longest:.2f} ms  "
        f"largest WAL file: {wal[0] / 2**20:.1f} MiB"
    )


if __name__ == "__main__":
    main()
