"""bench/bench_peers.py: a quick run of its Stateous side, and how its profile sorts samples.

The run is real (`stateous serve`, `stateous supervise`, the starter, each a process,
on SQLite; the peers are left out, as they are installed from the network), and
its table must carry every figure. The parts of a profile decide what the next
optimisations aim at, so the rules that sort a stack are pinned here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import ROOT

BENCH = ROOT / "bench"


def load(name: str) -> ModuleType:
    sys.path[:0] = [str(BENCH)]
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_a_quick_run_of_stateous_on_sqlite_prints_every_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_peers.py"), "--quick", "--systems", "stateous-sqlite"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    number = r"\d+(\.\d+)?"
    row = rf"\| Stateous, SQLite \| {number} / {number} \| {number} / {number} \|"
    row += rf" {number} \| {number} \| {number} \| {number} \|"
    assert re.search(row, done.stdout), done.stdout
    assert re.search(r"control plane [\d.]+, supervisor [\d.]+, starter [\d.]+ ms", done.stdout)
    assert "Stateous, SQLite: journal_mode=WAL, synchronous=FULL" in done.stdout


def test_an_unknown_system_is_refused_with_the_known_ones() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_peers.py"), "--systems", "temporal"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "unknown: temporal (systems: stateous-sqlite," in done.stderr


def test_a_sample_goes_to_its_innermost_part_or_to_the_outbox() -> None:
    profile = load("peers_profile")
    serve = ["run (threading.py:975)", "handle (waitress/channel.py:400)"]
    assert profile.part_of([*serve, "decode (msgspec/_core.so)"]) == "JSON"
    assert profile.part_of([*serve, "send (socket.py:200)"]) == "HTTP"
    assert profile.part_of([*serve, "claim (stateous/control/engine.py:90)"]) == "Stateous: engine"
    assert (
        profile.part_of(
            [*serve, "claim (stateous/control/engine.py:90)", "sqlite3VdbeExec (apsw.so)"]
        )
        == "SQL and the store"
    )
    assert (
        profile.part_of(["add (stateous/supervisor/outbox.py:120)", "execute (apsw.so)"])
        == "the outbox"
    )
    assert profile.part_of(["_run_once (asyncio/base_events.py:1900)"]) == "asyncio"
    assert profile.part_of(["_bootstrap (threading.py:995)"]) == "threads"
    assert profile.part_of(["_serve (stateous/supervisor/workers.py:60)"]) == "threads"
    assert profile.part_of(["_claim (stateous/supervisor/supervisor.py:60)"]) == (
        "Stateous: supervisor"
    )


def test_a_peer_that_cannot_be_installed_says_why(tmp_path: Path, monkeypatch: Any) -> None:
    install = load("peers_install")
    monkeypatch.setattr(install, "PEERS", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm there
    assert install.install("restate") == "npm is not installed (apt-get install npm)"
