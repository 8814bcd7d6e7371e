"""Benchmark: Stateous beside Restate and DBOS Transact, the same runs on each, on this machine.

Run: .venv/bin/python bench/bench_peers.py [--rounds 3] [--systems a,b] [--workloads a,b] [--quick]
Systems: stateous-sqlite, stateous-postgres (real `stateous serve` and `stateous supervise`
of 8 slots; stateous-sqlite-claims and stateous-postgres-claims, not run unless named: the
same with `eager: false`, every step claimed), restate-1 and restate-24 (`restate-server`
from npm with 1 partition, and with 24, its default; the Python SDK on hypercorn),
dbos-sqlite and dbos-postgres (DBOS Transact in one process, 8 executor threads). The
peers are installed by the bench into `bench/.peers/` (peers_install.py); one that cannot
be installed is skipped with a line. Postgres: a fresh database per system and round, made through
`$PEERS_POSTGRES` (default postgresql://postgres@127.0.0.1:5432/test).
Every run is 1 or 5 steps that return at once. Workloads:
  pickup      1-step runs started one at a time, 50-100 ms apart (the workers idle):
              from the start sent to the first step's code beginning (p50, p99)
  sequential  5-step runs one after the other: from the start sent to the run's end
  rate1       2,000 1-step runs started by 8 starters at once, 8 slots: runs per second
              from the first start to the last end, and the CPU of every process per run
  rate5       the same with 500 5-step runs
Each round starts every system afresh and runs each workload once, the systems in
turn (the order shifts by one each round); the table shows the median of the rounds
and their range, then the CPU per run by process, then each system's fsync settings.
`--quick` (a smoke run): one round, 10 pickups, 10 sequential runs, 200 and 50 runs.
bench/README.md says how each workload maps to each system and what is not alike.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from peers_install import install, versions  # noqa: E402
from peers_processes import reading, used_between  # noqa: E402
from peers_profile import Sampling  # noqa: E402
from peers_systems import Dbos, Restate, Stateous, System  # noqa: E402

SYSTEMS: dict[str, Callable[[str], System]] = {
    "stateous-sqlite": lambda tag: Stateous("sqlite", tag),
    "stateous-postgres": lambda tag: Stateous("postgres", tag),
    # The supervisor's reports do not ask for its next task (`eager: false`): as before.
    "stateous-sqlite-claims": lambda tag: Stateous("sqlite", tag, eager=False),
    "stateous-postgres-claims": lambda tag: Stateous("postgres", tag, eager=False),
    "restate-1": lambda tag: Restate(1, tag),
    "restate-24": lambda tag: Restate(24, tag),
    "dbos-sqlite": lambda tag: Dbos("sqlite", tag),
    "dbos-postgres": lambda tag: Dbos("postgres", tag),
}
#: workload -> (steps, runs, runs in --quick)
WORKLOADS = {
    "pickup": (1, 50, 10),
    "sequential": (5, 50, 10),
    "rate1": (1, 2000, 200),
    "rate5": (5, 500, 50),
}
STARTERS = 8

#: One round of one system: workload -> figure -> value.
Figures = dict[str, dict[str, Any]]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def latencies(began: dict[str, float], ends: dict[str, float]) -> dict[str, Any]:
    """p50 and p99 in ms of the runs that have both moments, and how many lack one."""
    spans = [(ends[run] - moment) * 1000 for run, moment in began.items() if run in ends]
    return {
        "p50": percentile(spans, 0.5),
        "p99": percentile(spans, 0.99),
        "lost": len(began) - len(spans),
    }


def measure(
    system: System, workload: str, answer: dict[str, Any], used: dict[str, float]
) -> dict[str, Any]:
    """The figures of one workload from the driver's answer and the system's own records."""
    began = answer["began"]
    if workload == "pickup":
        return latencies(began, system.stamps(answer))
    if workload == "sequential":
        return latencies(began, answer["ended"] or system.ends(list(began)))
    seconds = system.last_end(answer) - min(began.values())
    per_run = {role: spent * 1000 / len(began) for role, spent in used.items()}
    return {"rate": len(began) / seconds, "cpu": per_run}


def trial(
    system: System,
    workloads: list[str],
    quick: bool,
    folder: Path,
    tag: str,
    profile: Path | None = None,
) -> Figures:
    """Start the system afresh, warm it with 5 runs, run each workload once, stop it;
    with `profile`, sample a Stateous system's processes in its throughputs there."""
    folder.mkdir(parents=True)
    system.open(folder)
    figures: Figures = {}
    try:
        figures["fsync"] = {"settings": system.durability()}
        system.driver.ask({"workload": "sequential", "runs": 5, "steps": 1, "prefix": "warm"})
        for workload in workloads:
            steps, runs, few = WORKLOADS[workload]
            command = {
                "workload": workload if workload in ("pickup", "sequential") else "throughput",
                "runs": few if quick else runs,
                "steps": steps,
                "starters": STARTERS,
                "prefix": f"{tag}-{workload}",
            }
            sampled = profile is not None and isinstance(system, Stateous) and command["runs"] > 100
            if sampled:
                sampling = Sampling(system.processes, profile, f"{tag}-{workload}")
            before, began = reading(system.processes, system.database), time.monotonic()
            answer = system.driver.ask(command)
            used = used_between(before, reading(system.processes, system.database))
            figures[workload] = measure(system, workload, answer, used)
            figures[workload]["seconds"] = time.monotonic() - began
            if sampled:
                print(sampling.report(command["runs"]), flush=True)
    finally:
        system.close()
    return figures


def spread(values: list[float], digits: int) -> str:
    """The median of the rounds, and their range when there are several."""
    middle = f"{statistics.median(values):.{digits}f}"
    if len(values) < 2:
        return middle
    return f"{middle} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def system_cpu(cpu: dict[str, float]) -> float:
    """A run's CPU in the system's processes: all but a starter of its own."""
    return sum(used for role, used in cpu.items() if role != "starter")


def table(results: dict[str, list[Figures]], labels: dict[str, str], workloads: list[str]) -> str:
    """The main table, a row per system, each figure the median of the rounds (range)."""
    columns = {
        "pickup": [("pickup p50 / p99 ms", lambda f: f["pickup"], "lat")],
        "sequential": [("5-step run p50 / p99 ms", lambda f: f["sequential"], "lat")],
        "rate1": [
            ("1-step runs/s", lambda f: f["rate1"]["rate"], 0),
            ("CPU per 1-step run, ms", lambda f: system_cpu(f["rate1"]["cpu"]), 2),
        ],
        "rate5": [
            ("5-step runs/s", lambda f: f["rate5"]["rate"], 0),
            ("CPU per 5-step run, ms", lambda f: system_cpu(f["rate5"]["cpu"]), 2),
        ],
    }
    chosen = [column for workload in workloads for column in columns[workload]]
    lines = ["| | " + " | ".join(title for title, _, _ in chosen) + " |"]
    lines.append("|---" * (len(chosen) + 1) + "|")
    for key, rounds in results.items():
        cells = []
        for _, pick, digits in chosen:
            if digits == "lat":
                found = [pick(figures) for figures in rounds]
                cells.append(
                    spread([f["p50"] for f in found], 1)
                    + " / "
                    + spread([f["p99"] for f in found], 1)
                )
            else:
                cells.append(spread([pick(figures) for figures in rounds], digits))
        lines.append(f"| {labels[key]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_table(results: dict[str, list[Figures]], labels: dict[str, str], workload: str) -> str:
    """The CPU per run of each process of each system (medians of the rounds)."""
    lines = []
    for key, rounds in results.items():
        if workload not in rounds[0]:
            continue
        roles = rounds[0][workload]["cpu"]
        parts = [
            f"{role} {statistics.median(f[workload]['cpu'].get(role, 0.0) for f in rounds):.2f}"
            for role in roles
        ]
        lines.append(f"- {labels[key]}: " + ", ".join(parts) + " ms")
    return "\n".join(lines)


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None, help="default 3, 1 with --quick")
    shown = [key for key in SYSTEMS if not key.endswith("-claims")]
    parser.add_argument("--systems", default=",".join(shown))
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: few runs, one round")
    parser.add_argument(
        "--profile", type=Path, help="sample Stateous's processes in throughputs (py-spy), to here"
    )
    args = parser.parse_args()
    keys, workloads = args.systems.split(","), args.workloads.split(",")
    unknown = [key for key in keys if key not in SYSTEMS] + [
        w for w in workloads if w not in WORKLOADS
    ]
    if unknown:
        raise SystemExit(
            f"unknown: {', '.join(unknown)} (systems: {', '.join(SYSTEMS)}; "
            f"workloads: {', '.join(WORKLOADS)})"
        )
    rounds = args.rounds or (1 if args.quick else 3)
    for peer in sorted({key.split("-")[0] for key in keys} - {"stateous"}):
        reason = install(peer)
        if reason:
            print(f"skipped {peer}: it could not be installed here: {reason}")
            keys = [key for key in keys if not key.startswith(peer)]
    base = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    results: dict[str, list[Figures]] = {key: [] for key in keys}
    labels = {key: SYSTEMS[key]("").label for key in keys}
    loads = [os.getloadavg()[0]]
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}; {versions()}", flush=True)
    try:
        for number in range(rounds):
            order = keys[number % len(keys) :] + keys[: number % len(keys)]
            for key in order:
                tag = f"{os.getpid()}_{number}"
                began, folder = time.monotonic(), base / f"{key}-{number}"
                try:
                    results[key].append(
                        trial(SYSTEMS[key](tag), workloads, args.quick, folder, tag, args.profile)
                    )
                except (RuntimeError, OSError) as ex:
                    print(f"round {number + 1}, {labels[key]}: failed: {ex}", flush=True)
                    continue
                loads.append(os.getloadavg()[0])
                took = ", ".join(
                    f"{workload} {results[key][-1][workload]['seconds']:.1f}"
                    for workload in workloads
                )
                print(
                    f"round {number + 1}, {labels[key]}: {time.monotonic() - began:.0f} s "
                    f"({took}), load {loads[-1]:.1f}",
                    flush=True,
                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results = {key: rounds_of for key, rounds_of in results.items() if rounds_of}
    print()
    print(table(results, labels, workloads))
    for workload in ("rate1", "rate5"):
        if workload in workloads:
            print(
                f"\nCPU per run by process, {workload} (ms; 'CPU per run' above leaves out a "
                "starter of its own):"
            )
            print(cpu_table(results, labels, workload))
    print("\nfsync settings:")
    for key, rounds_of in results.items():
        print(f"- {labels[key]}: {rounds_of[0]['fsync']['settings']}")
    print(
        f"\n1-minute load average: {min(loads):.1f} to {max(loads):.1f} "
        f"(median {statistics.median(loads):.1f}) on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
