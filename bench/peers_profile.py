"""Where the CPU of bench_peers.py's processes goes: by thread from /proc, by code from py-spy.

`bench_peers.py --profile DIR` watches every process of a Stateous system during its
throughput workloads (py-spy from the project's venv: `.venv/bin/pip install py-spy`;
it needs ptrace, so root or `kernel.yama.ptrace_scope=0`). Two views, each printed
per process: the CPU of each thread (user and kernel, from /proc, exact), named as
Python names them (`py-spy dump`); and samples of the thread that holds the GIL
(`py-spy record --gil --nonblocking --format raw`, kept in DIR), which is where the
Python-level CPU goes. SQLite's own work (APSW lets go of the GIL), fsync and the
kernel's side of the sockets are not in the samples: the threads' kernel time shows
them. `python bench/peers_profile.py FILE...` prints the samples again.
A sample goes to the outbox when the outbox is anywhere in its stack (its SQLite
included), else to the part of its innermost frame that has one: SQL and the store
(APSW, psycopg, the store's modules), JSON (msgspec, json), HTTP (waitress, Falcon,
http.client and its header parsing, sockets), the routine, Stateous's own code (the
engine, the supervisor), asyncio, threads (their start, pools and queues), else other.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

PY_SPY = Path(sys.executable).parent / "py-spy"
TICK = os.sysconf("SC_CLK_TCK")
RATE = 200

OUTBOX = re.compile(r"stateous/supervisor/outbox\.py")
#: (part, what a frame's text contains), tried in order on each frame.
PARTS = [
    (
        "SQL and the store",
        re.compile(r"apsw|libsqlite|\bsqlite3\w*|psycopg|libpq|stateous/control/store/"),
    ),
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
    (
        "threads",
        re.compile(r"threading\.py|concurrent/futures|queue\.py|stateous/supervisor/workers\.py"),
    ),
    ("Stateous: supervisor", re.compile(r"stateous/supervisor/|stateous/model/")),
    ("asyncio", re.compile(r"asyncio/|_asyncio")),
]
#: A thread of `py-spy dump`: its id and its Python name.
THREAD = re.compile(r'^Thread (\d+) \((?:idle|active)\): "(.*)"$', re.MULTILINE)


def record(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """Start sampling a process until `finish`."""
    options = ["--gil", "--nonblocking", "--format", "raw", "--rate", str(RATE)]
    return subprocess.Popen(
        [str(PY_SPY), "record", "--pid", str(pid), *options, "--output", str(output)],
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
    """The outbox when it is anywhere in the stack, else the innermost frame's part."""
    if any(OUTBOX.search(frame) for frame in frames):
        return "the outbox"
    for frame in reversed(frames):
        for part, pattern in PARTS:
            if pattern.search(frame):
                return part
    return "other"


def thread_names(pid: int) -> dict[int, str]:
    """The Python name of each thread of a process, by its id; numbers become `*`, so
    that a pool's threads count together."""
    dumped = subprocess.run(
        [str(PY_SPY), "dump", "--pid", str(pid)], capture_output=True, text=True
    )
    return {int(tid): re.sub(r"\d+", "*", name) for tid, name in THREAD.findall(dumped.stdout)}


def thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    """The user and kernel CPU seconds of each live thread of a process, by its id."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(task.name)] = (int(fields[11]) / TICK, int(fields[12]) / TICK)
    return found


def by_thread(
    before: dict[int, tuple[float, float]],
    after: dict[int, tuple[float, float]],
    names: dict[int, str],
    runs: int,
) -> str:
    """Each named thread's CPU per run, in ms (user + kernel), the largest first."""
    spent: Counter[str] = Counter()
    kernel: Counter[str] = Counter()
    for tid, (user, system) in after.items():
        was = before.get(tid, (0.0, 0.0))
        name = names.get(tid, "(ended or unnamed)")
        spent[name] += (user - was[0]) + (system - was[1])
        kernel[name] += system - was[1]
    return ", ".join(
        f"{name} {used * 1000 / runs:.2f} (kernel {kernel[name] * 1000 / runs:.2f})"
        for name, used in spent.most_common()
        if used > 0
    )


class Sampling:
    """The two views of a set of processes over one workload of `runs` runs."""

    def __init__(self, processes: dict[str, int], folder: Path, label: str) -> None:
        self.processes = processes
        folder.mkdir(parents=True, exist_ok=True)
        self.files = {role: folder / f"{label}-{role}.txt" for role in processes}
        self.before = {role: thread_cpu(pid) for role, pid in processes.items()}
        self.recorders = [record(processes[role], file) for role, file in self.files.items()]
        time.sleep(1)  # py-spy has attached

    def report(self, runs: int) -> str:
        after = {role: thread_cpu(pid) for role, pid in self.processes.items()}
        names = {role: thread_names(pid) for role, pid in self.processes.items()}
        finish(self.recorders)
        lines = []
        for role in self.processes:
            threads = by_thread(self.before[role], after[role], names[role], runs)
            lines.append(f"{role}: CPU per run by thread, ms: {threads}")
            lines.append(summary(self.files[role]))
        return "\n".join(lines)


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
