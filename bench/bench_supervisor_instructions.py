"""Benchmark: the instructions a real `stateous supervise` runs per task, counted by callgrind.

Run: .venv/bin/python bench/bench_supervisor_instructions.py [--tokens 100] [--runs 3]
[--steps 2] [--before CHECKOUT] [--after CHECKOUT]
Needs valgrind. A real `serve` (this checkout, not counted) and a real `supervise` of 8
slots under callgrind with its counting off; a workflow of `--steps` states in a row
(bench_supervise.py's two by default) whose `def` routines return at once, and whose
reports ask `next` (eager), so each step but a token's first is granted in the answer of
the report before it. 20 tokens warm the supervisor up; then the counting goes on,
`--tokens` tokens are started and run to their end (`--steps` tasks each), and the count
is divided by the tasks. All threads of the process are counted (the loop, the routines'
and the requests' threads), but not the kernel's work (sockets, futexes, the outbox's
writes), and under callgrind the threads take turns, so a hand-off costs its Python and
no wait. The figure does not move with the load of a shared machine, as CPU seconds do.
`--before` alternates with another checkout's supervisor (`--after`: another than this
one); medians of `--runs` runs.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_instructions import instructions  # noqa: E402
from bench_supervise import ROUTINES, Item, call, make_folder, start_serve, workflow  # noqa: E402

from stateous import END, START, Workflow  # noqa: E402
from stateous.compiler.compile import compile_workflow  # noqa: E402
from stateous.model.graph_file import dump  # noqa: E402

WARM = 20


def chain(steps: int) -> tuple[Workflow, str]:
    """A workflow of `steps` states one after another (bench_supervise.py's for two), and
    its routines, each returning its event at once."""
    if steps == 2:
        return workflow(), ROUTINES
    flow = Workflow("bench", context=Item)
    states = [flow.state(f"s{number}") for number in range(1, steps + 1)]
    flow.transition(START, states[0])
    routines = "from stateous import on_state\n\nfrom contract import ItemContext, events, states\n"
    for number, state in enumerate(states, 1):
        following = states[number] if number < steps else END
        event = flow.event(f"done{number}")
        flow.transition(state, following, on=event)
        routines += (
            f"\n\n@on_state(states.s{number})\ndef s{number}(ctx: ItemContext) -> "
            f"events.done{number}:\n    return events.done{number}\n"
        )
    return flow, routines


def run_tokens(port: int, first: int, tokens: int) -> None:
    """Start tokens `first`.. and wait until all of them completed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    for number in range(first, first + tokens):
        call(connection, "POST", "/tokens", {"token": f"T-{number}", "context": {"title": "t"}})
    deadline = time.monotonic() + 600
    while len(call(connection, "GET", "/tokens?status=completed&limit=1000")) < first + tokens:
        if time.monotonic() > deadline:
            raise SystemExit("the tokens did not complete within 600 s")
        time.sleep(0.2)
    connection.close()


def count(code: Path, tokens: int, steps: int) -> float:
    """Thousands of instructions per task of the supervisor of checkout `code`."""
    work = Path(tempfile.mkdtemp(prefix="bench-supervisor-instructions-"))
    graph = work / "bench.json"
    flow, routines = chain(steps)
    graph.write_bytes(dump(compile_workflow(flow)))
    serve, port = start_serve(work, graph)
    supervise: subprocess.Popen[bytes] | None = None
    try:
        folder = make_folder(work, graph, port, routines)
        log = work / "supervise.log"
        supervise = subprocess.Popen(
            [
                *("valgrind", "--tool=callgrind", "--instr-atstart=no"),
                f"--callgrind-out-file={work / 'callgrind.out'}",
                *(sys.executable, "-m", "stateous", "supervise", str(folder)),
            ],
            cwd=work,
            env={**os.environ, "PYTHONPATH": str(code), "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        deadline = time.monotonic() + 300
        while " serves " not in log.read_text():
            if supervise.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"supervise did not start: {log.read_text()}")
            time.sleep(0.2)
        run_tokens(port, 0, WARM)
        time.sleep(1)
        subprocess.run(["callgrind_control", "-i", "on", str(supervise.pid)], capture_output=True)
        run_tokens(port, WARM, tokens)
        subprocess.run(["callgrind_control", "-d", str(supervise.pid)], capture_output=True)
        return instructions(work) / (steps * tokens) / 1e3
    finally:
        for process in (supervise, serve):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="states a token goes through")
    parser.add_argument("--before", type=Path, help="a checkout whose supervisor to compare")
    parser.add_argument("--after", type=Path, default=ROOT, help="the checkout to count")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is needed: apt-get install valgrind")
    if not 1 <= args.tokens <= 1000 - WARM:
        sys.exit(f"--tokens is 1 to {1000 - WARM}")
    if args.steps < 1:
        sys.exit("--steps is at least 1")
    codes = {
        "after": args.after.resolve(),
        **({"before": args.before.resolve()} if args.before else {}),
    }
    figures: dict[str, list[float]] = {name: [] for name in codes}
    for _ in range(args.runs):
        for name, code in codes.items():
            figures[name].append(count(code, args.tokens, args.steps))
    for name, runs in figures.items():
        listed = ", ".join(f"{run:.0f}" for run in runs)
        print(
            f"{name:6} {statistics.median(runs):.0f} K instructions per task of the supervisor"
            f" ({listed}; {codes[name]})"
        )


if __name__ == "__main__":
    main()
