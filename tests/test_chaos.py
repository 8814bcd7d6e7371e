"""A small, seeded run of bench/chaos.py, and its checks caught in the act.

The run is real: `stateous serve` and two `stateous supervise` processes, kill -9 of
both on the seed's schedule, a tenth of the requests cut by the run's proxy; and the same
with a second `serve --standby` that takes over at each kill of the serving one. The seed
fixes what is killed when; the checks must hold under any timing.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.control.support import BACKENDS, open_backend

SMALL = [
    "--seed", "7", "--tokens", "30", "--supervisors", "2", "--kills", "2",
    "--control-kills", "1", "--cut", "0.1", "--lease", "2s", "--work", "0.1",
    "--timeout", "60",
]  # fmt: skip
# A kill of the serving control plane waits until the last one killed is back (1 to 3 s
# with this lease): the run must last past that, or its later kills never come.
STANDBY = [
    "--standby", "--seed", "7", "--tokens", "60", "--supervisors", "2", "--kills", "2",
    "--control-kills", "2", "--cut", "0.1", "--lease", "2s", "--work", "0.1",
    "--timeout", "60",
]  # fmt: skip


@pytest.fixture(scope="module")
def chaos() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("chaos", ROOT / "bench" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["chaos"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_seeded_chaos_run_ends_every_token_and_passes_every_check(
    chaos: ModuleType, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_backend(backend, tmp_path) as opened:
        db = "sqlite" if backend == "sqlite" else opened.db
        code = chaos.main([*SMALL, "--db", db])
    out = capsys.readouterr().out
    assert code == 0, out
    assert ", eager grants on" in out, out
    assert "tokens: 30 (30 completed)" in out, out
    assert "kills: 2 of supervisors, 1 of the control plane" in out, out
    assert out.rstrip().endswith("all checks passed"), out


def test_a_small_seeded_chaos_run_with_a_standby_takes_over_at_each_kill_and_passes_every_check(
    chaos: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    code = chaos.main([*STANDBY, "--db", "sqlite"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "tokens: 60 (60 completed)" in out, out
    assert "kills: 2 of supervisors, 2 of the control plane" in out, out
    took = re.search(r"takeovers: 2; from the kill to the standby serving: max ([\d.]+) s", out)
    assert took and float(took[1]) < 2.0, out
    assert out.rstrip().endswith("all checks passed"), out


def entry(kind: str, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "data": data}


def test_the_checks_name_overlapping_attempts_late_messages_and_an_event_applied_twice(
    chaos: ModuleType,
) -> None:
    history = [
        entry("entered", state="draft", visit=1),
        entry("task_claimed", task=1, supervisor="box-1", attempt=1),
        entry("task_claimed", task=1, supervisor="box-2", attempt=2),
        entry("task_failed", task=1, error="box-2 stopped answering: no heartbeat for 2s"),
        entry("note", task=1, text="late"),
        entry("event_accepted", event="approved", state="draft", payload=None),
        entry("event_accepted", event="approved", state="draft", payload=None),
    ]
    found = chaos.Findings()
    chaos.check_history("T-1", history, found)
    assert found.problems == [
        "T-1: task 1 claimed by box-2 (attempt 2) while attempt 1 of box-1 was live",
        "T-1: note of task 1 accepted when no attempt of it was live",
        "T-1: 2 events applied in draft (visit 1)",
        "T-1: approved applied 2 times",
    ]
    assert found.ended_leases == [("T-1", 1, 2)]
