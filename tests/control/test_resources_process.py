"""Resources with real `stateous serve` and `stateous supervise` processes on both backends:
one repo key of one slot is never claimed twice at once (read from the ledger), a rate
holds over a run, a lease that ends gives the slot to the next task, and a paused
resource lets nothing in until resumed."""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.control.support import Backend, connected
from tests.supervisor.support import Supervisors, wait_until, write_settings

IMPORTS = """\
from __future__ import annotations

import time
from pathlib import Path

from stateous import on_state

from contract import JobContext, events, states

HERE = Path(__file__).resolve().parent
"""
#: A routine that works a tenth of a second, or for ever on a repo named `stuck`.
WORK = """
@on_state(states.code)
def code(ctx: JobContext) -> events.done:
    while ctx["repo"] == "stuck":
        time.sleep(0.05)
    time.sleep(0.1)
    return events.done
"""


class Job(msgspec.Struct):
    repo: str


def coding(rate: str | None = None) -> Workflow:
    """`code` takes one slot of its repo; with a `rate`, one token of `llm` too."""
    flow = Workflow("coding", context=Job)
    flow.resource("repo", slots=1)
    uses: dict[str, str | int] = {"repo": "ctx['repo']"}
    if rate is not None:
        flow.resource("llm", slots=1000, rate=rate)
        uses = {"llm": 1}
    code = flow.state("code", uses=uses)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


def serve(launcher: Launcher, backend: Backend, flow: Workflow, *options: str) -> Served:
    graph = backend.folder / "coding.json"
    graph.write_bytes(dump(compile_workflow(flow)))
    return launcher.serve(graph, None, "--db", backend.db, *options)


def folder_for(served: Served, backend: Backend, name: str, tasks: int = 2) -> Path:
    """A supervisor's folder for `coding`, named `name`."""
    folder = backend.folder / name
    graph = backend.folder / "coding.json"
    made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=backend.folder)
    assert made.returncode == 0, made.stderr
    (folder / "code_routine.py").write_text(IMPORTS + textwrap.dedent(WORK))
    write_settings(folder, served.url, name, tasks)
    return folder


def start(served: Served, token: str, repo: str) -> None:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"repo": repo}})
    assert status == 201, body


def completed(served: Served, tokens: list[str]) -> bool:
    return all(served.ok("GET", f"/tokens/{token}")["status"] == "completed" for token in tokens)


def claims_and_ends(backend: Backend) -> list[tuple[str, str, str]]:
    """(token, kind, at) of every claim and every end of a task, in the order of commit."""
    with connected(backend) as run:
        rows = run(
            "SELECT token, kind, at FROM ledger WHERE kind IN "
            "('task_claimed', 'task_done', 'task_failed', 'task_cancelled') ORDER BY pos"
        )
    return [(token, kind, at) for token, kind, at in rows]


def test_one_slot_of_a_repo_is_never_claimed_twice_at_once_by_four_supervisors(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding())
    tokens = [f"PR-{n}" for n in range(20)]
    for token in tokens:
        start(served, token, "acme/api")
    for n in range(4):
        supervisors.serving(folder_for(served, backend, f"box-{n}"), f"box-{n}")
    wait_until(lambda: completed(served, tokens), "all 20 completed", timeout=90, every=0.5)
    claimed, most = set(), 0
    for token, kind, _ in claims_and_ends(backend):
        if kind == "task_claimed":
            claimed.add(token)
        else:
            claimed.discard(token)
        most = max(most, len(claimed))
    assert most == 1
    assert served.ok("GET", "/resources")[0]["in_use"] == 0


def test_a_rate_of_ten_a_second_holds_over_a_five_second_run(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding(rate="10/second"))
    tokens = [f"T-{n}" for n in range(200)]
    for token in tokens:
        start(served, token, f"r{token}")
    for n in range(2):
        supervisors.serving(folder_for(served, backend, f"box-{n}", tasks=16), f"box-{n}")
    moments = wait_until(
        lambda: (found := claimed_at(backend)) and found[-1] - found[0] >= 5.0 and found,
        "claims over five seconds",
        timeout=60,
        every=0.5,
    )
    run = [at for at in moments if at < moments[0] + 5.0]
    # A bucket of 10 lets 10 in at once, then 10 a second, and at most 10 wait let in
    # ahead of their claims: at most 10 + 10 + 50 claims in 5 s.
    assert 35 <= len(run) <= 70, len(run)
    for second in range(5):  # in any one second: the bucket, those ahead, the rate
        within = [at for at in moments if moments[0] + second <= at < moments[0] + second + 1]
        assert len(within) <= 30, (second, len(within))


def claimed_at(backend: Backend) -> list[float]:
    return sorted(
        datetime.fromisoformat(at).timestamp()
        for _, kind, at in claims_and_ends(backend)
        if kind == "task_claimed"
    )


def test_a_lease_that_ends_gives_the_slot_to_the_next_task(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding(), "--lease", "3s")
    start(served, "A", "stuck")
    start(served, "B", "stuck")
    first = supervisors.serving(folder_for(served, backend, "box-1"), "box-1")
    wait_until(lambda: claims_and_ends(backend), "A claimed", timeout=20)
    assert served.ok("GET", "/tokens/B")["waits_for"].startswith("waits for repo=stuck, held by")
    first.kill()
    # The lease ends: A's only attempt failed, so A failed and B was let in.
    wait_until(lambda: served.ok("GET", "/tokens/A")["status"] == "failed", "A failed", timeout=30)
    [task] = served.ok("GET", "/tasks")
    assert (task["token"], task["status"], task["waits_for"]) == ("B", "queued", None)


def test_a_paused_resource_lets_nothing_in_until_resumed(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding())
    url = ["--url", served.url]
    paused = run_stateous("resource", "pause", "repo", *url, cwd=backend.folder)
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith("repo  1 slot(s) a key  0 in use, 0 waiting  paused")
    for token, repo in (("A", "acme/api"), ("B", "acme/web")):
        start(served, token, repo)
    supervisors.serving(folder_for(served, backend, "box-1"), "box-1")
    tasks: list[dict[str, Any]] = served.ok("GET", "/tasks")
    assert [task["waits_for"] for task in tasks] == [
        "waits for repo=acme/api (paused)",
        "waits for repo=acme/web (paused)",
    ]
    listed = run_stateous("tasks", *url, cwd=backend.folder)
    assert "waits for repo=acme/api (paused)" in listed.stdout, listed.stdout
    assert claims_and_ends(backend) == []
    resumed = run_stateous("resource", "resume", "repo", *url, cwd=backend.folder)
    assert resumed.returncode == 0, resumed.stderr
    wait_until(lambda: completed(served, ["A", "B"]), "A and B completed", timeout=30)
    status, body = served.request("POST", "/resources/no-such/pause")
    assert (status, body["code"]) == (404, "resource_not_found")
    status, body = served.request("POST", "/resources/repo/set", {"slots": 0})
    assert (status, body["code"]) == (422, "invalid_slots")
