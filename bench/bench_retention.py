"""Benchmark: retention (`serve --keep-ended`) beside the writes, with real `serve` processes.

Run: .venv/bin/python bench/bench_retention.py [--trees 5000] [--seconds 5] [--db URL]
     .venv/bin/python bench/bench_retention.py --minutes 30 [--rate 50] [--csv FILE]

Without `--minutes`: fills a database with `--trees` ended tokens and 200 live ones,
then fires events on the live ones from 4 threads for `--seconds` with retention off
(the baseline), and again while a `serve --keep-ended 1s` removes every ended tree;
prints the fires' time (p50, p99, max) both ways, the removal's pace and its longest
batch (from the log). Target: no fire waits behind a batch for more than a few
milliseconds: p99 during removal within `THRESHOLD_MS` of the baseline's.

With `--minutes`: a soak at a steady `--rate` tokens a second (each a start and a
fire that ends it) on `serve --keep-ended 1m`; every 10 seconds, the database's size
(SQLite: the file and its WAL; Postgres: pg_database_size) and the p99 of the
window's requests, written to `--csv` and printed. Target: both flat once the first
minute has passed. A PNG plot of the size is saved beside the CSV when matplotlib
is importable (it is no dependency of stateous).
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

SERVING = re.compile(r"serving on http://127\.0\.0\.1:(\d+) ")
BATCH_MS = re.compile(r"retention: removed .* ran ([0-9.]+) ms")
THRESHOLD_MS = 10.0
LIVE = 200
FIRERS = 4
SAMPLE_SECONDS = 10
STATEOUS = (sys.executable, "-m", "stateous")


def workflow() -> Workflow:
    """One state, `step`, that `poke` visits again and `done` ends."""
    flow = Workflow("soak")
    step = flow.state("step")
    flow.transition(START, step)
    flow.transition(step, step, on=flow.event("poke"))
    flow.transition(step, END, on=flow.event("done"))
    return flow


class Serve:
    """A `stateous serve` process; its stderr lines are kept."""

    def __init__(self, folder: Path, db: str, *options: str) -> None:
        graph = folder / "soak.json"
        graph.write_bytes(dump(compile_workflow(workflow())))
        self.process = subprocess.Popen(
            [*STATEOUS, "serve", str(graph), "--db", db, "--listen", "127.0.0.1:0", *options],
            cwd=folder,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = SERVING.search(line)
            if found:
                self.port = int(found[1])
                break
        else:
            raise SystemExit(f"serve did not start: {''.join(self.lines)}")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def link(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def send(link: http.client.HTTPConnection, method: str, path: str, body: object = None) -> float:
    """Send one request, check it succeeded, answer its time in milliseconds."""
    started = time.perf_counter()
    data = None if body is None else json.dumps(body).encode()
    link.request(method, path, body=data, headers={"Content-Type": "application/json"})
    answer = link.getresponse()
    answer.read()
    assert answer.status < 300, (method, path, answer.status)
    return (time.perf_counter() - started) * 1000


def removed_total(serve: Serve) -> int:
    link = serve.link()
    link.request("GET", "/metrics")
    text = link.getresponse().read().decode()
    link.close()
    for line in text.splitlines():
        if line.startswith("stateous_retention_removed_tokens_total"):
            return int(float(line.split()[-1]))
    return 0


def fill(serve: Serve, trees: int) -> None:
    link = serve.link()
    for n in range(trees):
        send(link, "POST", "/tokens", {"token": f"E-{n}"})
        send(link, "POST", f"/tokens/E-{n}/events/done")
    for n in range(LIVE):
        send(link, "POST", "/tokens", {"token": f"L-{n}"})
    link.close()


def fire_while(serve: Serve, going: Callable[[], bool]) -> list[float]:
    """Fire `poke` on the live tokens from `FIRERS` threads while `going()`; answer the times."""
    times: list[float] = []

    def firer(worker: int) -> None:
        link = serve.link()
        n = worker
        while going():
            times.append(send(link, "POST", f"/tokens/L-{n % LIVE}/events/poke"))
            n += FIRERS
        link.close()

    threads = [threading.Thread(target=firer, args=(w,)) for w in range(FIRERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def percentiles(times: list[float]) -> str:
    cuts = statistics.quantiles(times, n=100)
    return (
        f"{len(times)} fires, p50 {cuts[49]:.1f} ms, p99 {cuts[98]:.1f} ms, max {max(times):.1f} ms"
    )


def delay(folder: Path, db: str, args: argparse.Namespace) -> None:
    serve = Serve(folder, db)
    began = time.monotonic()
    fill(serve, args.trees)
    print(
        f"filled {args.trees} ended trees and {LIVE} live tokens "
        f"in {time.monotonic() - began:.0f} s"
    )
    until = time.monotonic() + args.seconds
    baseline = fire_while(serve, lambda: time.monotonic() < until)
    serve.stop()
    print(f"baseline, retention off:   {percentiles(baseline)}")
    serve = Serve(folder, db, "--keep-ended", "1s")
    began = time.monotonic()
    done = threading.Event()

    def watch() -> None:
        while removed_total(serve) < args.trees:
            time.sleep(0.05)
        done.set()

    threading.Thread(target=watch, daemon=True).start()
    during = fire_while(serve, lambda: not done.is_set())
    took = time.monotonic() - began
    serve.stop()
    batches = [float(found[1]) for line in serve.lines if (found := BATCH_MS.search(line))]
    print(f"during removal:            {percentiles(during)}")
    print(
        f"removal: {args.trees} trees in {took:.1f} s ({args.trees / took:.0f} a second, "
        f"counting the first second's wait), {len(batches)} batches, longest "
        f"{max(batches):.1f} ms, median {statistics.median(batches):.1f} ms"
    )
    grew = statistics.quantiles(during, n=100)[98] - statistics.quantiles(baseline, n=100)[98]
    verdict = "ok" if grew <= THRESHOLD_MS else "OVER"
    print(f"p99 grew by {grew:.1f} ms (target: at most {THRESHOLD_MS:g} ms): {verdict}")


def size_of(db: str) -> tuple[int, int]:
    """The database's size and, on SQLite, its WAL's (bounded by the checkpoints apart)."""
    if db.startswith("sqlite:///"):
        path = db[len("sqlite:///") :]
        wal = f"{path}-wal"
        return os.path.getsize(path), os.path.getsize(wal) if os.path.exists(wal) else 0
    import psycopg

    with psycopg.connect(db) as connection:
        row = connection.execute("SELECT pg_database_size(current_database())").fetchone()
    return (int(row[0]) if row else 0), 0


def soak(folder: Path, db: str, args: argparse.Namespace) -> None:
    serve = Serve(folder, db, "--keep-ended", "1m")
    began = time.monotonic()
    window: list[float] = []
    rows: list[tuple[int, int, int, float, int]] = []
    link = serve.link()
    n = 0
    next_sample = began + SAMPLE_SECONDS
    print("seconds  size (kB)  WAL (kB)  p99 (ms)  removed")
    while time.monotonic() - began < args.minutes * 60:
        due = began + n / args.rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        window.append(send(link, "POST", "/tokens", {"token": f"S-{n}"}))
        window.append(send(link, "POST", f"/tokens/S-{n}/events/done"))
        n += 1
        if time.monotonic() >= next_sample:
            p99 = statistics.quantiles(window, n=100)[98]
            row = (round(time.monotonic() - began), *size_of(db), p99, removed_total(serve))
            rows.append(row)
            print(
                f"{row[0]:7d}  {row[1] // 1000:9d}  {row[2] // 1000:8d}  {row[3]:8.1f}  "
                f"{row[4]:7d}",
                flush=True,
            )
            window.clear()
            next_sample += SAMPLE_SECONDS
    link.close()
    serve.stop()
    out = Path(args.csv)
    with open(out, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["seconds", "size_bytes", "wal_bytes", "p99_ms", "removed_tokens"])
        writer.writerows(rows)
    print(f"wrote {out}; {n} tokens at {args.rate}/s")
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError:
        print("matplotlib is not importable: no PNG, the CSV holds the figures")
        return
    seconds = [r[0] for r in rows]
    figure, (size, p99) = pyplot.subplots(2, 1, sharex=True, figsize=(8, 6))
    size.plot(seconds, [r[1] / 1e6 for r in rows], label="database")
    size.plot(seconds, [(r[1] + r[2]) / 1e6 for r in rows], label="database and WAL")
    size.set_ylabel("size (MB)")
    size.set_ylim(bottom=0)
    size.legend()
    p99.plot(seconds, [r[3] for r in rows])
    p99.set_ylabel("p99 of 10 s (ms)")
    p99.set_ylim(bottom=0)
    p99.set_xlabel("seconds")
    figure.suptitle(f"serve --keep-ended 1m, {args.rate:g} tokens/s")
    figure.savefig(out.with_suffix(".png"))
    print(f"wrote {out.with_suffix('.png')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trees", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--minutes", type=float, help="soak for this long instead")
    parser.add_argument("--rate", type=float, default=50, help="tokens a second in the soak")
    parser.add_argument("--csv", default="retention-soak.csv", help="the soak's figures")
    parser.add_argument("--db", help="postgresql://... (an empty database); default: SQLite")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stateous-retention-"))
    db = args.db or f"sqlite:///{folder / 'bench.db'}"
    try:
        (soak if args.minutes else delay)(folder, db, args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
