"""Stubs that are never claimed, and a running supervisor that notices a changed graph.

`still_matching` is tested on compiled graphs; the rest with real `stateous serve` and
`stateous supervise` processes: a folder whose review routine is still init's stub serves
only its draft, and a supervisor whose control plane comes back on another graph says
which states still match and goes on serving those.
"""

from __future__ import annotations

import time
from pathlib import Path

import msgspec

from stateous import END, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import GraphFile, dump
from stateous.supervisor.versions import still_matching
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
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
        "matching: draft; not served until contract.py matches again: review",
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
