"""Stubs that are never claimed, a running supervisor that notices a changed graph, and
supervisors of two versions against one control plane.

`still_matching` is tested on compiled graphs; the rest with real `stateous serve` and
`stateous supervise` processes: a folder whose review routine is still init's stub serves
only its draft; a supervisor whose control plane comes back on another graph says which
states still match and is granted the new tokens' tasks of those only; a supervisor of
each version, on SQLite and on Postgres, is granted what its contract allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from stateous import END, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import GraphFile, dump
from stateous.supervisor.versions import still_matching
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.control.support import NO_POSTGRES, POSTGRES, fresh_schema
from tests.supervisor.support import (
    ORDERS,
    Item,
    Supervisors,
    free_port,
    orders,
    wait_until,
    write_folder,
)

#: The draft routine alone: it submits at once.
DRAFT = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    return events.submitted
"""


class Other(msgspec.Struct):
    """Another context model: a number, not a title."""

    number: int


def escalating(context: type = Item) -> Workflow:
    """`orders`, whose review may also emit `escalated` (to END): review's events changed."""
    flow = orders(context=context)
    flow.transition(flow.states["review"], END, on=flow.event("escalated"))
    return flow


def graph_of(flow: Workflow) -> GraphFile:
    return compile_workflow(flow)


def write(path: Path, flow: Workflow) -> Path:
    path.write_bytes(dump(graph_of(flow)))
    return path


def start_token(served: Served, token: str) -> None:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"title": "t"}})
    assert status == 201, body


# which states still match


def test_the_same_graph_matches_every_state_and_a_timeout_changes_none() -> None:
    assert still_matching(graph_of(orders()), graph_of(orders()), ["draft", "review"]) == [
        "draft",
        "review",
    ]
    slower = graph_of(orders(review_timeout="2h"))
    assert still_matching(graph_of(orders()), slower, ["review", "draft"]) == ["draft", "review"]


def test_a_state_with_other_events_no_longer_matches_and_the_others_do() -> None:
    assert still_matching(graph_of(orders()), graph_of(escalating()), ["draft", "review"]) == [
        "draft"
    ]


def test_another_context_model_matches_no_state_and_an_unknown_state_never_matches() -> None:
    other = graph_of(orders(context=Other))
    assert still_matching(graph_of(orders()), other, ["draft", "review"]) == []
    assert still_matching(graph_of(orders()), graph_of(orders()), ["nowhere"]) == []


# stubs


def test_a_stub_is_not_served_named_at_start_and_its_task_stays_queued(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = write(tmp_path / "orders.json", orders())
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    folder = write_folder(tmp_path / "box-1", served.url, graph, DRAFT)
    made = run_stateous("init", "supervisor", "--refresh", str(folder), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "@on_state(states.review, stub=True)" in (folder / "review.py").read_text()

    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    served.wait_history("ORDER-1", "task_queued")
    wait_until(lambda: served.ok("GET", "/tokens/ORDER-1")["state"] == "review", "in review")
    time.sleep(2)

    assert supervisor.log[:2] == [
        f"box-1 serves draft; the control plane is {served.url}",
        "not served: review (its routine is the stub)",
    ]
    token = served.ok("GET", "/tokens/ORDER-1")
    assert (token["state"], token["status"]) == ("review", "active")
    kinds = served.kinds("ORDER-1")
    assert "task_failed" not in kinds
    assert kinds.count("task_claimed") == 1  # the draft's only
    assert supervisor.process.poll() is None


def test_a_folder_whose_every_routine_is_the_stub_refuses_to_start(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = write(tmp_path / "orders.json", orders())
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    folder = tmp_path / "box-1"
    made = run_stateous("init", "supervisor", str(graph), str(folder), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (folder / "stateous.yaml").write_text(f'url: "{served.url}"\nname: box-1\n')

    code, lines = supervisors.refused(folder)

    assert (code, lines) == (
        1,
        [
            f"error: {folder.resolve()} serves nothing: every routine is still the stub "
            "(draft, review); write one and remove its stub=True"
        ],
    )


# a changed graph


def test_a_running_supervisor_names_the_states_that_still_match_and_serves_them(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    listen = f"127.0.0.1:{free_port()}"
    db = tmp_path / "orders.sqlite"
    first = write(tmp_path / "orders.json", orders())
    served = launcher.serve(first, db, listen=listen)
    folder = write_folder(tmp_path / "box-1", served.url, first, ORDERS)
    supervisor = supervisors.serving(folder)
    assert served.stop() == 0

    changed = write(tmp_path / "orders-2.json", escalating())
    served = launcher.serve(changed, db, listen=listen)
    checksum = served.ok("GET", "/health")["checksum"]
    supervisor.wait_log(
        f"the control plane serves another version of the workflow ({checksum}); still "
        "matching, for its new tokens too: draft; for the tokens of contract.py's version "
        "only: review",
        timeout=20,
    )
    start_token(served, "ORDER-1")
    wait_until(lambda: served.ok("GET", "/tokens/ORDER-1")["state"] == "review", "in review")
    time.sleep(2)

    kinds = served.kinds("ORDER-1")
    assert kinds.count("task_claimed") == 1 and "task_failed" not in kinds
    assert served.ok("GET", "/tokens/ORDER-1")["status"] == "active"
    assert supervisor.process.poll() is None
    assert supervisor.stop() == 0


# supervisors of two versions


@pytest.fixture(params=["sqlite", "postgres"])
def serve_on(
    request: pytest.FixtureRequest, launcher: Launcher, tmp_path: Path
) -> Iterator[Callable[..., Served]]:
    """Serve a graph file on one database, SQLite or Postgres, on one port each time."""
    listen = f"127.0.0.1:{free_port()}"
    if request.param == "sqlite":
        db = tmp_path / "orders.sqlite"
        yield lambda graph: launcher.serve(graph, db, listen=listen)
        return
    if POSTGRES is None:
        pytest.skip(NO_POSTGRES)
    with fresh_schema(POSTGRES) as url:
        yield lambda graph: launcher.serve(graph, None, "--db", url, listen=listen)


def claimed_by(served: Served, token: str) -> list[str]:
    """The supervisors that claimed the token's tasks, in order."""
    entries = served.history(token)
    return [entry["data"]["supervisor"] for entry in entries if entry["kind"] == "task_claimed"]


def test_a_supervisor_of_each_version_is_granted_what_its_contract_allows(
    serve_on: Callable[[Path], Served], supervisors: Supervisors, tmp_path: Path
) -> None:
    first = write(tmp_path / "orders.json", orders())
    second = write(tmp_path / "orders-2.json", escalating())  # review's events changed
    served = serve_on(first)
    start_token(served, "OLD")  # its draft and review run version 1's contract
    start_token(served, "OLD-PLAIN")
    served.ok("POST", "/tokens/OLD-PLAIN/events/submitted")
    assert served.stop() == 0

    served = serve_on(second)
    v2 = served.ok("GET", "/health")["checksum"]
    start_token(served, "NEW")
    tasks = served.ok("GET", "/tasks?status=queued")
    v1 = next(task["checksum"] for task in tasks if task["token"] == "OLD")
    assert {task["token"]: task["checksum"] for task in tasks} == {
        "OLD": v1,
        "OLD-PLAIN": v1,
        "NEW": v2,
    }
    # A claim that names no graph (a plain HTTP client) is granted a task of any version.
    plain = {"supervisor": "plain", "states": ["review"]}
    status, grant = served.request("POST", "/tasks/claim", plain)
    assert (status, grant["token"]) == (200, "OLD-PLAIN")
    approve = {"supervisor": "plain", "attempt": 1, "kind": "event", "event": "reviewed"}
    served.ok("POST", f"/tasks/{grant['task']}/report", {**approve, "payload": {"approved": True}})

    box2_folder = write_folder(tmp_path / "box-2", served.url, second, name="box-2")
    box2 = supervisors.serving(box2_folder, "box-2")
    wait_until(lambda: served.ok("GET", "/tokens/NEW")["status"] == "completed", "NEW done")
    wait_until(lambda: served.ok("GET", "/tokens/OLD")["state"] == "review", "OLD in review")
    time.sleep(2)  # box-2 may not take OLD's review, of version 1's contract
    assert claimed_by(served, "NEW") == ["box-2", "box-2"]
    assert claimed_by(served, "OLD") == ["box-2"]  # its draft: the same contract in both
    assert served.ok("GET", "/tokens/OLD")["status"] == "active"

    box1 = supervisors.serving(write_folder(tmp_path / "box-1", served.url, first))
    box1.wait_log(
        f"the control plane serves another version of the workflow ({v2}); still matching, "
        "for its new tokens too: draft; for the tokens of contract.py's version only: review"
    )
    wait_until(lambda: served.ok("GET", "/tokens/OLD")["status"] == "completed", "OLD done")
    assert claimed_by(served, "OLD") == ["box-2", "box-1"]
    assert served.ok("GET", "/tokens/OLD-PLAIN")["status"] == "completed"
    assert [served.ok("GET", f"/tokens/{token}")["checksum"] for token in ("OLD", "NEW")] == [
        v1,
        v2,
    ]
    assert box1.stop() == 0 and box2.stop() == 0
