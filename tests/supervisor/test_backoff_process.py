"""Backoff with real processes: a routine that raises `RetryLater` beside a real `stateous
serve`, whose planned attempt shows in `token show` and `GET /tasks`, and comes once after
a kill -9 of the control plane."""

from __future__ import annotations

import signal
from datetime import datetime
from pathlib import Path

from tests.conftest import run_stateous
from tests.control.serving import Launcher
from tests.supervisor.support import APPROVE, Supervisors, write_folder, write_straight_graph
from tests.supervisor.test_supervise_process import entries, start_token, wait_status

#: A draft routine that asks for its next attempt in 4 seconds once, then submits.
RATE_LIMITED = """
from stateous import RetryLater


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    if ctx.attempt == 1:
        raise RetryLater(4, "429")
    return events.submitted
"""


def write_graph(path: Path) -> Path:
    """`orders` with a draft retried after 1 minute: a wait a routine's own shortens."""
    return write_straight_graph(path, retries=2, retry_delay="1m", retry_delay_max="10m")


def test_retry_later_waits_shows_in_token_show_and_tasks_and_survives_a_kill_9(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph, db = write_graph(tmp_path / "orders.json"), tmp_path / "orders.sqlite"
    first = launcher.serve(graph, db)
    box = supervisors.serving(write_folder(tmp_path / "box-1", first.url, graph, RATE_LIMITED))
    start_token(first, "ORDER-1")
    history = first.wait_history("ORDER-1", "timer_set", timeout=15)
    assert box.stop() == 0

    planned = entries(history, "timer_set")[-1][1]
    assert (planned["kind"], planned["task"], planned["attempt"]) == ("retry", 1, 2)
    failed = entries(history, "task_failed")[-1][1]
    assert failed["error"].startswith("RetryLater: 429 (")
    set_at = datetime.fromisoformat(history[-1]["at"])
    due = datetime.fromisoformat(planned["due_at"])
    assert 3.9 <= (due - set_at).total_seconds() <= 4.1
    tasks = first.ok("GET", "/tasks")
    assert [(row["task"], row["status"], row["attempt"]) for row in tasks] == [(1, "waiting", 1)]
    shown = run_stateous("token", "show", "ORDER-1", "--url", first.url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    line = f"task 1 waits: attempt 2 at {due.strftime('%Y-%m-%d %H:%M:%S')}"
    assert any(text.endswith(line) for text in shown.stdout.splitlines()), shown.stdout

    assert first.kill() == -signal.SIGKILL
    second = launcher.serve(graph, db)
    folder = write_folder(
        tmp_path / "box-2", second.url, graph, RATE_LIMITED, APPROVE, name="box-2"
    )
    supervisors.serving(folder, "box-2")
    wait_status(second, "ORDER-1", "completed", timeout=30)

    history = second.history("ORDER-1")
    kinds = ("task_claimed", "task_failed", "timer_fired", "task_retrying")
    assert [kind for kind, _ in entries(history, *kinds)][:5] == [
        "task_claimed",
        "task_failed",
        "timer_fired",
        "task_retrying",
        "task_claimed",
    ]
    assert entries(history, "task_retrying") == [("task_retrying", {"task": 1, "attempt": 2})]
    queued_again = next(e for e in history if e["kind"] == "task_retrying")
    assert datetime.fromisoformat(queued_again["at"]) >= due
