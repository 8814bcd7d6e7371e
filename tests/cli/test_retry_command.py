"""`stateous token retry` against a real `serve`, with real `supervise` processes.

The graph is `orders` with no retries on `draft`: one kill -9 of the supervisor that
holds its task fails the token for good, and only a retry brings it back.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from stateous import END, START, Workflow
from tests.control.serving import Launcher, Served, command, environment, write_graph
from tests.supervisor.support import APPROVE, Item, Supervisors, Verdict, wait_until, write_folder

#: A draft routine that keeps a session in its memory, then never returns.
STUCK = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    ctx.memory["session"] = "abc"
    while not (HERE / "never").exists():
        time.sleep(0.05)
    return events.submitted
"""
#: A draft routine that notes the session an earlier visit kept, then submits.
RESUMES = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    ctx.note(f"attempt {ctx.attempt} resumes session {ctx.memory.get('session')}")
    return events.submitted
"""


def orders() -> Workflow:
    """draft (no retries) submits; review approves to END."""
    flow = Workflow("orders", context=Item)
    draft, review = flow.state("draft"), flow.state("review", timeout="1h")
    reviewed = flow.event("reviewed", payload=Verdict)
    flow.transition(START, draft)
    flow.transition(draft, review, on=flow.event("submitted"))
    flow.transition(review, END, on=reviewed)
    return flow


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


def retry(
    served: Served, folder: Path, *args: str, answer: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `stateous token retry ARGS` with `answer` on its stdin."""
    return subprocess.run(
        command("token", "retry", *args, "--url", served.url),
        cwd=folder,
        env=environment(),
        input=answer,
        capture_output=True,
        text=True,
        timeout=60,
    )


def status_of(served: Served, token: str) -> str:
    return str(served.ok("GET", f"/tokens/{token}")["status"])


def test_a_token_failed_by_a_kill_9_comes_back_with_retry_and_completes(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "orders.sqlite", "--lease", "2s")
    first = supervisors.serving(write_folder(tmp_path / "box-1", served.url, graph, STUCK))
    served.ok("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "an order"}})
    served.wait_history("ORDER-1", "memory_set", timeout=15)
    assert first.kill() == -signal.SIGKILL
    wait_until(lambda: status_of(served, "ORDER-1") == "failed", "ORDER-1 failed", 20)

    done = retry(served, tmp_path, "ORDER-1", "--yes")

    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "ORDER-1: draft (visit 2), active\n",
        "",
    )
    box_2 = write_folder(tmp_path / "box-2", served.url, graph, RESUMES, APPROVE, name="box-2")
    supervisors.serving(box_2, "box-2")
    wait_until(lambda: status_of(served, "ORDER-1") == "completed", "ORDER-1 completed", 20)
    history = [(entry["kind"], entry["data"]) for entry in served.history("ORDER-1")]
    kinds = [kind for kind, _ in history]
    assert kinds.index("failed") < kinds.index("retried") < kinds.index("completed")
    assert ("retried", {"state": "draft", "was": "failed", "changes": {}}) in history
    assert ("task_claimed", {"task": 2, "supervisor": "box-2", "attempt": 1}) in history
    assert ("note", {"task": 2, "text": "attempt 1 resumes session abc"}) in history


def failed_in_review(served: Served, token: str) -> None:
    """Bring a token through draft, then fail its review task."""
    served.ok("POST", "/tokens", {"token": token, "context": {"title": "an order"}})
    for state, report in (
        ("draft", {"kind": "event", "event": "submitted"}),
        ("review", {"kind": "failed", "error": "crash"}),
    ):
        grant = served.ok("POST", "/tasks/claim", {"supervisor": "box-1", "states": [state]})
        served.ok("POST", f"/tasks/{grant['task']}/report", {**report, "supervisor": "box-1"})


def test_retry_names_the_states_that_run_again_and_asks_first(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    failed_in_review(served, "ORDER-1")
    question = (
        "token ORDER-1 is failed; a retry runs these states again: draft, review. Retry it? [y/N] "
    )

    for answer in ("n\n", ""):
        declined = retry(served, tmp_path, "ORDER-1", "--from", "draft", answer=answer)
        assert (declined.returncode, declined.stdout) == (1, "")
        assert (
            declined.stderr == f"{question}error: nothing was retried (answer y, or give --yes)\n"
        )
    assert status_of(served, "ORDER-1") == "failed"

    agreed = retry(
        served, tmp_path, "ORDER-1", "--from", "draft", "--context", '{"title": "again"}',
        answer="y\n",
    )  # fmt: skip

    assert (agreed.returncode, agreed.stdout, agreed.stderr) == (
        0,
        "ORDER-1: draft (visit 2), active\n",
        question,
    )
    assert served.ok("GET", "/tokens/ORDER-1")["context"] == {"title": "again"}
    shown = subprocess.run(
        command("token", "show", "ORDER-1", "--url", served.url),
        env=environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert any(
        line.endswith("retried in draft (it was failed); context changed: title")
        for line in shown.stdout.splitlines()
    ), shown.stdout


def test_retry_refusals_are_one_error_line(launcher: Launcher, graph: Path, tmp_path: Path) -> None:
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    failed_in_review(served, "ORDER-1")
    served.ok("POST", "/tokens", {"token": "LIVE", "context": {"title": "x"}})
    refused = f"error: the control plane at {served.url} refused"
    cases = [
        (("LIVE",), f"{refused} (409): token 'LIVE' is active; only a failed or cancelled "
         "token can be retried"),
        (("ORDER-1", "--from", "nowhere"), f"{refused} (422): the workflow 'orders' has no "
         "state 'nowhere'"),
        (("ORDER-1", "--context", '{"title": 5}'), f"{refused} (422): the context does not "
         "fit the model: "),
        (("ORDER-1", "--context", "[1]"), "error: --context must be a JSON object, like "
         "'{\"key\": 1}'"),
    ]  # fmt: skip
    for args, line in cases:
        result = retry(served, tmp_path, *args, "--yes")
        assert (result.returncode, result.stdout) == (1, ""), args
        assert result.stderr.startswith(line) and result.stderr.count("\n") == 1, result.stderr
    assert status_of(served, "ORDER-1") == "failed"
