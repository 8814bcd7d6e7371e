"""Benchmark: `python stateous.py token show ID` as a whole process, against a local serve.

Run: .venv/bin/python bench/bench_token_show.py [--runs 40]
It serves a small workflow on a free port, gives one token a history of about twenty
entries, then times the whole command from a checkout, start to exit, and prints the
median, the 90th percentile and the fastest run, beside `python stateous.py --version`
(the floor: the interpreter and the package's imports). Target: median < 150 ms.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402

from stateous import END, START, Client, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

SERVING = re.compile(r"serving on (http://\S+) ")
TOKEN = "BENCH-1"


class Ticket(msgspec.Struct):
    repo: str


def workflow() -> Workflow:
    flow = Workflow("bench", context=Ticket)
    coding = flow.state("coding", timeout="6h", retries=2)
    testing = flow.state("testing", timeout="1h")
    done = flow.event("done")
    failed = flow.event("failed")
    flow.transition(START, coding)
    flow.transition(coding, testing, on=done)
    flow.transition(testing, coding, on=failed, when="count('failed') < 5")
    flow.transition(testing, END, on=failed, otherwise=True)
    return flow


def serve(folder: Path) -> tuple[subprocess.Popen[str], str]:
    graph = folder / "bench.json"
    graph.write_bytes(dump(compile_workflow(workflow())))
    argv = [sys.executable, str(ROOT / "stateous.py"), "serve", str(graph)]
    argv += ["--db", f"sqlite:///{folder / 'bench.db'}", "--listen", "127.0.0.1:0"]
    process = subprocess.Popen(argv, cwd=folder, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        found = SERVING.search(line)
        if found:
            return process, found[1]
    raise SystemExit(f"serve did not start (exit code {process.wait()})")


def give_history(url: str) -> int:
    """Move the token back and forth so its history has about twenty entries."""
    with Client(url) as client:
        client.start(TOKEN, {"repo": "acme/api"})
        client.pause(TOKEN)
        client.fire(TOKEN, "done")
        client.resume(TOKEN)
        client.fire(TOKEN, "failed")
        client.fire(TOKEN, "done")
        return len(client.history(TOKEN))


def timed(argv: list[str], runs: int) -> list[float]:
    """Run a command `runs` times; return each run's wall time in milliseconds."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - began) * 1000)
    return times


def report(name: str, times: list[float]) -> None:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    print(
        f"{name:<32} median {statistics.median(ordered):6.1f} ms   "
        f"p90 {p90:6.1f} ms   fastest {ordered[0]:6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    script = [sys.executable, str(ROOT / "stateous.py")]
    with tempfile.TemporaryDirectory() as folder:
        process, url = serve(Path(folder))
        try:
            entries = give_history(url)
            print(f"{TOKEN} has {entries} history entries; {args.runs} runs each")
            timed([*script, "token", "show", TOKEN, "--url", url], 3)
            report("stateous.py --version", timed([*script, "--version"], args.runs))
            show = timed([*script, "token", "show", TOKEN, "--url", url], args.runs)
            report(f"stateous.py token show {TOKEN}", show)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=15)


if __name__ == "__main__":
    main()
