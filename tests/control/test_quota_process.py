"""Quota parking and the failure-storm breaker with real `stateous serve` and `stateous
supervise` processes on both backends: a routine's quota report closes its `llm` key until
the reset without spending an attempt, one probe and then cohorts 1, 2, 4, 8 reopen it (read
from the ledger), across a kill -9 of the control plane too; and three identical failures
on one repo trip that repo's key while another repo's work goes on."""

from __future__ import annotations

import json
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.fingerprints import fingerprint
from stateous.model.graph_file import dump
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.control.support import Backend, connected
from tests.supervisor.support import Supervisors, free_port, wait_until, write_settings

IMPORTS = """\
from __future__ import annotations

import os
import time
from pathlib import Path

from stateous import QuotaExhausted, on_state

from contract import JobContext, events, states

HERE = Path(__file__).resolve().parent
"""
#: Seconds after the parking began within which a claim may have run beside it.
WHILE_PARKING = 0.5
#: The provider answers 429 to the first call of all (the marker file says it was made).
QUOTA_ONCE = """
@on_state(states.code)
def code(ctx: JobContext) -> events.done:
    try:
        os.close(os.open(HERE / "called", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        time.sleep(0.2)
        return events.done
    raise QuotaExhausted(resource="llm", retry_after=WAIT, reason="429 from the provider")
"""
#: A build that always fails on the repo `broken`, with a number that changes each time.
BROKEN = """
@on_state(states.code)
def code(ctx: JobContext) -> events.done:
    if ctx["repo"] == "broken":
        raise RuntimeError(f"build failed after {time.monotonic_ns()} ns")
    time.sleep(0.05)
    return events.done
"""


class Job(msgspec.Struct):
    repo: str


def coding(resource: str, slots: int, breaker: int | None = None) -> Workflow:
    """`code` takes one slot of its repo's key of `resource`."""
    flow = Workflow("coding", context=Job)
    flow.resource(resource, slots=slots, breaker=breaker)
    code = flow.state("code", uses={resource: "ctx['repo']"}, retries=5)
    flow.transition(START, code)
    flow.transition(code, END, on=flow.event("done"))
    return flow


def serve(
    launcher: Launcher, backend: Backend, flow: Workflow, *options: str, **keywords: Any
) -> Served:
    graph = backend.folder / "coding.json"
    graph.write_bytes(dump(compile_workflow(flow)))
    return launcher.serve(graph, None, "--db", backend.db, *options, **keywords)


def folder_for(url: str, backend: Backend, routine: str, tasks: int) -> Path:
    folder = backend.folder / "box-1"
    graph = backend.folder / "coding.json"
    made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=backend.folder)
    assert made.returncode == 0, made.stderr
    (folder / "code_routine.py").write_text(IMPORTS + textwrap.dedent(routine))
    write_settings(folder, url, "box-1", tasks)
    return folder


def start_all(served: Served, tokens: list[str], repo: str) -> None:
    for token in tokens:
        status, body = served.request(
            "POST", "/tokens", {"token": token, "context": {"repo": repo}}
        )
        assert status == 201, body


def completed(served: Served, tokens: list[str]) -> bool:
    listed = served.ok("GET", "/tokens?status=completed&limit=1000")
    rows = listed["tokens"] if isinstance(listed, dict) else listed
    return {row["token"] for row in rows} >= set(tokens)


def ledger(backend: Backend) -> list[tuple[str, str, float, dict[str, Any]]]:
    """(token, kind, at, data) of every ledger row, in the order of commit."""
    with connected(backend) as run:
        rows = run("SELECT token, kind, at, data FROM ledger ORDER BY pos")
    return [
        (token, kind, datetime.fromisoformat(at).timestamp(), _json(data))
        for token, kind, at, data in rows
    ]


def _json(data: str | dict[str, Any]) -> dict[str, Any]:
    """A ledger row's data: JSON text on SQLite, already read on Postgres."""
    return json.loads(data) if isinstance(data, str) else data


def attempts(backend: Backend) -> list[int]:
    with connected(backend) as run:
        return [row[0] for row in run("SELECT attempt FROM tasks")]


def check_parked_then_probe_and_cohorts(backend: Backend, wait: float) -> None:
    """The key closed for `wait` seconds, let nothing in meanwhile, then one probe and
    cohorts of 1, 2, 4 and 8 reopened it; the quota report spent no attempt."""
    rows = ledger(backend)
    [parked] = [row for row in rows if row[1] == "resource_parked"]
    assert parked[3]["cause"] == "quota" and parked[3]["key"] == "acct-1"
    assert parked[3]["reason"] == "429 from the provider"
    [given_back] = [row for row in rows if row[1] == "task_parked"]
    assert given_back[0] == parked[0]
    after = rows[rows.index(parked) :]
    # On Postgres a claim that locked its task before the parking's transaction reached it
    # commits first, though its ledger position may come after the parking's (positions.py):
    # such a claim began while the parking ran. Any later claim waits for the reset.
    claims = [at for _, kind, at, _ in after if kind == "task_claimed"]
    late = [at for at in claims if at > parked[2] + WHILE_PARKING]
    assert late and min(late) >= parked[2] + wait - 0.01, (parked[2], claims[:3])
    assert [kind for _, kind, _, _ in after].count("resource_probe") == 1
    cohorts = [data["size"] for _, kind, _, data in after if kind == "resource_cohort"]
    assert cohorts == [1, 2, 4, 8]
    assert [kind for _, kind, _, _ in after].count("resource_reopened") == 1
    assert set(attempts(backend)) == {1}


def test_a_quota_report_parks_the_key_then_a_probe_and_cohorts_reopen_it(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding("llm", slots=8))
    tokens = [f"T-{n:02}" for n in range(30)]
    start_all(served, tokens, "acct-1")
    folder = folder_for(served.url, backend, QUOTA_ONCE.replace("WAIT", "2"), tasks=8)
    supervisors.serving(folder, "box-1")
    wait_until(lambda: completed(served, tokens), "all 30 completed", timeout=60, every=0.5)
    check_parked_then_probe_and_cohorts(backend, 2.0)
    [resource] = served.ok("GET", "/resources")
    assert resource["in_use"] == 0 and resource["parkings"] == 1
    assert resource["keys"] == []  # open whole again: its parking is forgotten
    connection = served.connect()
    connection.request("GET", "/metrics")
    metrics = connection.getresponse().read().decode()
    assert 'stateous_resource_parkings_total{resource="llm",cause="quota"} 1' in metrics
    assert 'stateous_reports_total{outcome="quota"} 1' in metrics


def test_a_parked_key_stays_parked_across_a_kill_9_of_the_control_plane(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    port = free_port()
    listen = {"listen": f"127.0.0.1:{port}"}
    first = serve(launcher, backend, coding("llm", slots=8), **listen)
    tokens = [f"T-{n:02}" for n in range(30)]
    start_all(first, tokens, "acct-1")
    folder = folder_for(first.url, backend, QUOTA_ONCE.replace("WAIT", "4"), tasks=8)
    supervisors.serving(folder, "box-1")
    wait_until(
        lambda: any(row[1] == "resource_parked" for row in ledger(backend)), "parked", timeout=30
    )
    first.kill()
    again = serve(launcher, backend, coding("llm", slots=8), **listen)
    [key] = again.ok("GET", "/resources")[0]["keys"]
    assert key["parked"]["cause"] == "quota" and key["closed_until"] is not None
    waiting = [task["waits_for"] for task in again.ok("GET", "/tasks?status=queued")]
    line = f"waits for llm=acct-1: parked: llm=acct-1 until {key['closed_until'][11:19]}, "
    assert waiting and all(text.startswith(line) for text in waiting), waiting
    assert waiting[0].endswith("tasks waiting; reason: 429 from the provider")
    wait_until(lambda: completed(again, tokens), "all 30 completed", timeout=60, every=0.5)
    check_parked_then_probe_and_cohorts(backend, 4.0)


def test_three_identical_failures_trip_one_repo_while_another_repo_goes_on(
    backend: Backend, launcher: Launcher, supervisors: Supervisors
) -> None:
    served = serve(launcher, backend, coding("repo", slots=1, breaker=3))
    start_all(served, ["B-1", "B-2"], "broken")
    good = [f"G-{n}" for n in range(6)]
    start_all(served, good, "acme/api")
    supervisors.serving(folder_for(served.url, backend, BROKEN, tasks=4), "box-1")
    wait_until(lambda: completed(served, good), "the good repo's work completed", timeout=30)
    wait_until(
        lambda: any(row[1] == "resource_parked" for row in ledger(backend)), "tripped", timeout=30
    )
    rows = ledger(backend)
    [tripped] = [row for row in rows if row[1] == "resource_parked"]
    failures = [row for row in rows[: rows.index(tripped)] if row[1] == "task_failed"]
    assert len(failures) == 3
    shapes = {fingerprint(row[3]["error"]) for row in failures}
    assert shapes == {tripped[3]["fingerprint"]}
    assert (tripped[3]["cause"], tripped[3]["key"]) == ("breaker", "broken")
    later = [row for row in rows[rows.index(tripped) :] if row[1] == "task_claimed"]
    assert all(row[0] not in ("B-1", "B-2") for row in later)
    [key] = [key for key in served.ok("GET", "/resources")[0]["keys"] if key["key"] == "broken"]
    assert key["parked"]["cause"] == "breaker"
    listed = run_stateous("resource", "list", "--url", served.url, cwd=backend.folder)
    assert "parked: repo=broken until " in listed.stdout, listed.stdout
    opened = run_stateous(
        "resource", "open", "repo=broken", "--url", served.url, cwd=backend.folder
    )
    assert opened.returncode == 0, opened.stderr
    assert "parked:" not in opened.stdout, opened.stdout  # the key as the open left it
    status, body = served.request("POST", "/resources/repo/open", {"key": "acme/api"})
    assert (status, body["code"]) == (409, "key_not_parked")
    assert body["error"] == "repo=acme/api is not parked"
    status, body = served.request("POST", "/resources/nope/open", {"key": "x"})
    assert (status, body["code"]) == (404, "resource_not_found")
