"""An idle `stateous supervise` waits on the control plane for a task (a claim with `wait`):
a task queued is claimed at once, not at the next poll, and a stop does not wait for the claim."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path

from tests.control.serving import Launcher
from tests.supervisor.support import Supervisors, write_folder, write_graph


def pickup(db: Path, token: str) -> float:
    """Seconds from a token's first task queued to its claim, on the control plane's clock
    (the ledger's times, to the microsecond; the API shows them to the second)."""
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT kind, at FROM ledger WHERE token = ? AND kind IN (?, ?) ORDER BY seq",
            (token, "task_queued", "task_claimed"),
        ).fetchall()
    times = {kind: datetime.fromisoformat(at).timestamp() for kind, at in reversed(rows)}
    return times["task_claimed"] - times["task_queued"]


def test_an_idle_supervisor_claims_a_new_task_at_once_and_stops_at_once(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph, db = tmp_path / "orders.json", tmp_path / "orders.sqlite"
    write_graph(graph)
    served = launcher.serve(graph, db)
    supervisor = supervisors.serving(write_folder(tmp_path / "box-1", served.url, graph))
    # Pauses out of step with a poll of once a second, which would miss most of them.
    for number, pause in enumerate((0.3, 0.5, 0.7, 0.9), start=1):
        time.sleep(pause)  # idle: its claim waits on the control plane
        token = f"ORDER-{number}"
        body = {"token": token, "context": {"title": "x"}}
        status, answer = served.request("POST", "/tokens", body)
        assert status == 201, answer
        served.wait_history(token, "task_claimed", timeout=5, every=0.05)
        assert pickup(db, token) < 0.3
    time.sleep(0.5)
    stopping = time.monotonic()
    assert supervisor.stop() == 0
    assert time.monotonic() - stopping < 3.0
