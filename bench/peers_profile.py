"""Where the CPU of bench_peers.py's processes goes: py-spy samples sorted into parts.

`bench_peers.py --profile DIR` records every process of a Stateous system during its
throughput workloads with `py-spy record --native --format raw` (py-spy from the
project's venv: `.venv/bin/pip install py-spy`; it needs ptrace, so root or
`kernel.yama.ptrace_scope=0`), then prints each process's parts and its top
functions. `python bench/peers_profile.py FILE...` prints them again for files kept.
A sample goes to the first part that any frame of its stack matches, in this order:
a thread waiting for a lock or the GIL (its innermost frame), the outbox (with its
SQLite), SQL (APSW, SQLite, psycopg, the store), JSON (msgspec, json), HTTP (waitress,
Falcon, http.client and its header parsing, sockets), the routine, Stateous's own
code (the engine or the supervisor), asyncio, threads (their start and queues),
else other. py-spy sees user space only: a process's kernel time is read from
/proc beside it. The samples are of active threads only.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

PY_SPY = Path(sys.executable).parent / "py-spy"
RATE = 100

#: (part, what a frame's text contains), tried in order over the whole stack.
PARTS = [
    ("the outbox", re.compile(r"stateous/supervisor/outbox\.py")),
    ("SQL", re.compile(r"apsw|libsqlite|\bsqlite3\w*|psycopg|libpq|stateous/control/store/")),
    ("JSON", re.compile(r"msgspec|json/|_json")),
    (
        "HTTP",
        re.compile(
            r"waitress/|falcon/|http/client\.py|email/|socket\.py|_socket|selectors\.py|"
            r"stateous/client/http\.py|stateous/control/(edge|outlet|waits|access)\.py|"
            r"\b(sock_\w+|__libc_(send|recv)\w*|send|recv|sendto|recvfrom|epoll_wait|poll|select)\b"
        ),
    ),
    ("the routine", re.compile(r"bench-supervisor/routines\.py")),
    ("Stateous: engine", re.compile(r"stateous/control/")),
    ("Stateous: supervisor", re.compile(r"stateous/supervisor/|stateous/model/")),
    ("asyncio", re.compile(r"asyncio/|_asyncio")),
    ("threads", re.compile(r"threading\.py|concurrent/futures|queue\.py")),
]
#: An innermost frame that waits for a lock or the GIL.
WAITING = re.compile(r"take_gil|drop_gil|pthread_cond|pthread_mutex|sem_\w*wait|futex|lll_lock")


def record(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """Start sampling a process until `finish`."""
    options = ["--native", "--format", "raw", "--rate", str(RATE), "--output", str(output)]
    return subprocess.Popen(
        [str(PY_SPY), "record", "--pid", str(pid), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def finish(recorders: list[subprocess.Popen[bytes]]) -> None:
    """Stop the samplers as Ctrl-C does, so that each writes its file."""
    for recorder in recorders:
        recorder.send_signal(signal.SIGINT)
    for recorder in recorders:
        recorder.wait(timeout=60)


def part_of(frames: list[str]) -> str:
    if WAITING.search(frames[-1]):
        return "waiting: locks, GIL"
    for part, pattern in PARTS:
        if any(pattern.search(frame) for frame in frames):
            return part
    return "other"


def function(frame: str) -> str:
    """A frame without its line number: `name (file)`."""
    return re.sub(r":\d+\)$", ")", frame)


def python_leaf(frames: list[str]) -> str:
    """The innermost frame of Python code (a `.py` file), where a sample's time is spent."""
    for frame in reversed(frames):
        if ".py:" in frame:
            return function(frame)
    return function(frames[-1])


def read(path: Path) -> list[tuple[list[str], int]]:
    """The stacks of a raw py-spy file, each with its count of samples."""
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


def summary(path: Path, top: int = 12) -> str:
    """The parts of a process's samples, and the Python functions they were in."""
    stacks = read(path)
    total = sum(count for _, count in stacks) or 1
    parts: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for frames, count in stacks:
        parts[part_of(frames)] += count
        leaves[python_leaf(frames)] += count
    lines = [f"{path.stem}: {total} samples"]
    lines.append(
        "  parts: " + ", ".join(f"{part} {n / total:.0%}" for part, n in parts.most_common())
    )
    lines.append("  top functions (self):")
    lines += [f"    {n / total:5.1%}  {name}" for name, n in leaves.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(summary(Path(name)))
