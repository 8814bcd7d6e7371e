"""`stop_on_repeat` with real processes: a routine that always raises the same error (its
numbers aside) under a real `stateous supervise`, beside a real `stateous serve`, is tried
three times of its eleven, and `token show` says why, with the failure's fingerprint."""

from __future__ import annotations

from pathlib import Path

from stateous.model.fingerprints import fingerprint
from tests.conftest import run_stateous
from tests.control.serving import Launcher
from tests.supervisor.support import APPROVE, Supervisors, write_folder, write_straight_graph
from tests.supervisor.test_supervise_process import entries, start_token, wait_status

#: A draft routine that fails the same way at each attempt, but for a number in its message.
BROKEN = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    raise ValueError(f"branch {ctx.attempt * 17} has no commit")
"""


def write_graph(path: Path) -> Path:
    """`orders` whose draft has ten retries, of which the third same failure ends the rest."""
    return write_straight_graph(path, retries=10, stop_on_repeat=3)


def test_a_routine_that_always_fails_the_same_way_is_tried_three_times_not_eleven(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = write_graph(tmp_path / "orders.json")
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    supervisors.serving(write_folder(tmp_path / "box-1", served.url, graph, BROKEN, APPROVE))
    start_token(served, "ORDER-1")
    wait_status(served, "ORDER-1", "failed", timeout=20)

    history = served.history("ORDER-1")
    claims = entries(history, "task_claimed")
    assert [data["attempt"] for _, data in claims] == [1, 2, 3]
    failed = [data for _, data in entries(history, "task_failed")]
    assert [row["error"].split(" (")[0] for row in failed] == [
        f"ValueError: branch {17 * attempt} has no commit" for attempt in (1, 2, 3)
    ]
    assert failed[0]["error"].endswith("(routines.py:15)")
    assert len({row["fingerprint"] for row in failed}) == 1
    assert failed[0]["fingerprint"] == fingerprint(failed[0]["error"])
    (stop,) = [data for _, data in entries(history, "retries_stopped")]
    assert stop == {
        "task": 1,
        "fingerprint": failed[0]["fingerprint"],
        "shape": "ValueError: branch # has no commit (routines.py:15)",
        "repeats": 3,
    }

    shown = run_stateous("token", "show", "ORDER-1", "--url", served.url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    said = "task 1: the same failure 3 times with the same input: not tried again"
    at = next(index for index, line in enumerate(lines) if line.endswith(said))
    assert lines[at + 1] == f"          fingerprint {failed[0]['fingerprint']}"
