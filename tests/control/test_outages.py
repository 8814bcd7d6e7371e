"""Outages of the control plane cost no lease: a supervisor that keeps heartbeating loses
nothing, however long no control plane served (docs/concepts/reliability.md)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from tests.control.serving import Launcher, Served, orders, write_graph
from tests.control.support import failure
from tests.control.test_serve_process import check_seqs, claim, heartbeat, start_token

LEASE = 2.0


def report(served: Served, task: int, attempt: int, supervisor: str) -> tuple[int, Any]:
    body = {"kind": "event", "event": "submitted", "attempt": attempt, "supervisor": supervisor}
    return served.request("POST", f"/tasks/{task}/report", body)


def claimed_then_killed(launcher: Launcher, tmp_path: Path) -> tuple[Path, Path, int]:
    """Serve `orders` with a lease of 2 s, let box-1 claim ORDER-1's task and beat once, then
    kill -9 the control plane; answer the graph file, the database and the task."""
    graph, db = tmp_path / "orders.json", tmp_path / "orders.sqlite"
    write_graph(graph, orders())
    first = launcher.serve(graph, db, "--lease", "2s")
    start_token(first, "ORDER-1")
    task = claim(first, "box-1")["task"]
    assert heartbeat(first, "box-1", task) == []
    assert first.kill() == -signal.SIGKILL
    return graph, db, task


def test_a_lease_does_not_end_for_the_time_no_control_plane_served(
    launcher: Launcher, tmp_path: Path
) -> None:
    graph, db, task = claimed_then_killed(launcher, tmp_path)
    time.sleep(3 * LEASE)  # three whole leases with no control plane
    again = launcher.serve(graph, db, "--lease", "2s")
    # The supervisor's heartbeats, tried all along, get through again: nothing was lost.
    for _ in range(4):
        assert heartbeat(again, "box-1", task) == []
        time.sleep(LEASE / 4)
    status, token = report(again, task, 1, "box-1")

    assert (status, token["state"]) == (200, "review"), token
    entries = again.history("ORDER-1")
    kinds = [entry["kind"] for entry in entries]
    assert kinds.count("task_claimed") == 1 and "task_failed" not in kinds, kinds
    check_seqs(entries)
    assert again.stop() == 0
    assert "1 claimed tasks get a full lease from this start" in " ".join(again.lines)


def test_after_a_start_a_silent_supervisor_still_loses_its_lease_after_one_whole_lease(
    launcher: Launcher, tmp_path: Path
) -> None:
    graph, db, task = claimed_then_killed(launcher, tmp_path)
    time.sleep(LEASE)

    again = launcher.serve(graph, db, "--lease", "2s")
    began = time.monotonic()
    entries = again.wait_history("ORDER-1", "task_retrying", every=0.1)

    waited = time.monotonic() - began
    assert waited >= LEASE - 0.5, f"the lease ended {waited:.2f} s after the start"
    failed = [entry for entry in entries if entry["kind"] == "task_failed"]
    assert [entry["data"] for entry in failed] == [
        failure(task, "box-1 stopped answering: no heartbeat for 2 seconds")
    ]
    assert again.stop() == 0
