"""Supervisor labels and a state's needs, over real HTTP on both backends: a claim takes only
the tasks whose state's needs its labels meet, and the task listing says when no supervisor
seen in the last hour could take a task."""

from __future__ import annotations

from typing import Any

import pytest

from stateous import END, START, Workflow
from stateous.compiler.compile import compile_workflow
from stateous.model.errors import DefinitionError
from stateous.model.graph_file import dump
from tests.conftest import run_stateous
from tests.control.conftest import Served, serving
from tests.control.serving import Launcher
from tests.control.serving import Served as Process
from tests.control.support import Backend, plane_for

MACOS = "no supervisor with os=macos seen in the last hour"


def builds() -> Workflow:
    """`lint` runs anywhere, then `build` only on a Mac."""
    flow = Workflow("builds")
    lint = flow.state("lint")
    build = flow.state("build", needs={"os": "macos"})
    flow.transition(START, lint)
    flow.transition(lint, build, on=flow.event("linted"))
    flow.transition(build, END, on=flow.event("built"))
    return flow


def claim(served: Served, name: str, labels: dict[str, Any] | None) -> Any:
    body: dict[str, Any] = {"supervisor": name, "states": ["lint", "build"]}
    if labels is not None:
        body["labels"] = labels
    status, _, grant = served.request("POST", "/tasks/claim", body)
    assert status in (200, 204), grant
    return grant if status == 200 else None


def done(served: Served, name: str, grant: Any, event: str) -> None:
    report = {"supervisor": name, "kind": "event", "event": event, "attempt": grant["attempt"]}
    status, _, answer = served.request("POST", f"/tasks/{grant['task']}/report", report)
    assert status == 200, answer


def test_a_task_that_needs_os_macos_is_never_claimed_by_a_supervisor_without_it(
    backend: Backend,
) -> None:
    plane = plane_for(builds(), backend)
    with serving(plane.engine) as served:
        for index in range(6):
            assert served.request("POST", "/tokens", {"token": f"B-{index}"})[0] == 201
        linted = 0
        for name, labels in (("linux-1", {"os": "linux"}), ("plain", None)):
            while (grant := claim(served, name, labels)) is not None:
                assert grant["state"] == "lint", (name, grant)
                done(served, name, grant, "linted")
                linted += 1
        assert linted == 6  # every build now queued, none taken by these two
        taken = []
        while (grant := claim(served, "mac-1", {"os": "macos", "gpu": "true"})) is not None:
            taken.append(grant["state"])
            done(served, "mac-1", grant, "built")
        assert taken == ["build"] * 6
        history = served.request("GET", "/tokens/B-0/history")[2]
        claimed = [entry["data"] for entry in history if entry["kind"] == "task_claimed"]
        assert [entry["supervisor"] for entry in claimed][1:] == ["mac-1"]


def test_a_report_that_asks_next_is_granted_only_what_its_labels_meet(backend: Backend) -> None:
    plane = plane_for(builds(), backend)
    with serving(plane.engine) as served:
        served.request("POST", "/tokens", {"token": "B-1"})
        grant = claim(served, "linux-1", {"os": "linux"})
        body = {"supervisor": "linux-1", "kind": "event", "event": "linted", "attempt": 1}
        states = ["lint", "build"]
        asked = {"states": states, "request": "n-1", "labels": {"os": "linux"}}
        status, _, answer = served.request(
            "POST", f"/tasks/{grant['task']}/report", {**body, "next": asked}
        )
        assert status == 200, answer
        assert answer["state"] == "build" and answer["grant"] is None
        [task] = served.request("GET", "/tasks")[2]
        assert (task["state"], task["status"]) == ("build", "queued")
        mac = claim(served, "mac-1", {"os": "macos"})
        assert (mac["token"], mac["state"]) == ("B-1", "build")


def test_the_listing_says_when_no_supervisor_seen_in_the_last_hour_could_take_a_task(
    backend: Backend,
) -> None:
    plane = plane_for(builds(), backend)
    with serving(plane.engine) as served:
        served.request("POST", "/tokens", {"token": "B-1"})
        done(served, "linux-1", claim(served, "linux-1", {"os": "linux"}), "linted")
        [task] = served.request("GET", "/tasks")[2]
        assert (task["state"], task["waits"]) == ("build", MACOS)
        plane.clock.advance(3000)
        mac = claim(served, "mac-1", {"os": "macos"})
        done(served, "mac-1", mac, "built")  # a Mac was here, and took the build
        served.request("POST", "/tokens", {"token": "B-2"})
        done(served, "linux-1", claim(served, "linux-1", {"os": "linux"}), "linted")
        plane.clock.advance(601)
        assert served.request("GET", "/tasks")[2][0]["waits"] is None  # seen 601 s ago
        plane.clock.advance(3000)
        assert claim(served, "linux-1", {"os": "linux"}) is None
        [task] = served.request("GET", "/tasks")[2]
        assert (task["token"], task["waits"]) == ("B-2", MACOS)
        assert claim(served, "mac-2", {"os": "macos"})["token"] == "B-2"
        [task] = served.request("GET", "/tasks")[2]
        assert (task["status"], task["waits"]) == ("claimed", None)


def test_a_token_and_token_show_say_when_no_supervisor_seen_in_the_last_hour_could_take_its_task(
    backend: Backend,
) -> None:
    plane = plane_for(builds(), backend)
    with serving(plane.engine) as served:
        served.request("POST", "/tokens", {"token": "B-1"})
        done(served, "linux-1", claim(served, "linux-1", {"os": "linux"}), "linted")
        plane.clock.advance(3601)
        token = served.request("GET", "/tokens/B-1")[2]
        assert (token["state"], token["waits"]) == ("build", MACOS)
        assert "waits_for" not in token
        shown = run_stateous("token", "show", "B-1", "--url", served.url, cwd=backend.folder)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[1].startswith("accepts now: ") and lines[2] == f"its task waits: {MACOS}"
        assert claim(served, "mac-1", {"os": "macos"})["token"] == "B-1"
        assert "waits" not in served.request("GET", "/tokens/B-1")[2]  # claimed now
        served.request("POST", "/tokens", {"token": "B-2"})  # in lint: needs nothing
        assert "waits" not in served.request("GET", "/tokens/B-2")[2]


def ports() -> Workflow:
    """`lint` runs anywhere, then `build` only on a Mac, or `port` only on Windows."""
    flow = Workflow("ports")
    lint = flow.state("lint")
    build = flow.state("build", needs={"os": "macos"})
    port = flow.state("port", needs={"os": "windows"})
    flow.transition(START, lint)
    flow.transition(lint, build, on=flow.event("linted"))
    flow.transition(lint, port, on=flow.event("ported"))
    built = flow.event("built")
    flow.transition(build, END, on=built)
    flow.transition(port, END, on=built)
    return flow


def waits_by_state(served: Process) -> dict[str, Any]:
    status, tasks = served.request("GET", "/tasks")
    assert status == 200, tasks
    return {task["state"]: task["waits"] for task in tasks}


def test_the_labels_of_the_supervisors_seen_survive_a_restart_of_serve(
    backend: Backend, launcher: Launcher
) -> None:
    graph = backend.folder / "ports.json"
    graph.write_bytes(dump(compile_workflow(ports())))
    served = launcher.serve(graph, None, "--db", backend.db)
    assert served.request("POST", "/tokens", {"token": "B-1"})[0] == 201
    assert served.request("POST", "/tokens", {"token": "P-1"})[0] == 201
    mac = {"supervisor": "mac-1", "states": ["build"], "labels": {"os": "macos"}}
    assert served.request("POST", "/tasks/claim", mac)[0] == 204  # seen, with nothing to do
    for token, event in (("B-1", "linted"), ("P-1", "ported")):
        body = {"supervisor": "linux-1", "states": ["lint"], "labels": {"os": "linux"}}
        status, grant = served.request("POST", "/tasks/claim", body)
        assert (status, grant["token"]) == (200, token)
        report = {"supervisor": "linux-1", "kind": "event", "event": event, "attempt": 1}
        assert served.request("POST", f"/tasks/{grant['task']}/report", report)[0] == 200
    assert served.stop() == 0

    again = launcher.serve(graph, None, "--db", backend.db)
    # A Mac and a Linux box were seen a moment ago, before the restart; no Windows box.
    windows = "no supervisor with os=windows seen in the last hour"
    assert waits_by_state(again) == {"build": None, "port": windows}


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"gpu": True}, "'gpu' must be a string"),
        (["os"], "labels are a mapping"),
        ({"os": ""}, "'os' must be a string of 1 to 64 characters"),
    ],
)
def test_a_claim_whose_labels_are_not_strings_is_refused(
    backend: Backend, labels: Any, says: str
) -> None:
    plane = plane_for(builds(), backend)
    with serving(plane.engine) as served:
        body = {"supervisor": "s", "states": ["lint"], "labels": labels}
        status, _, answer = served.request("POST", "/tasks/claim", body)
        assert status == 422, answer
        assert answer["code"] in ("invalid_argument", "invalid_body")
        if answer["code"] == "invalid_argument":
            assert says in answer["error"]


def test_needs_are_in_the_graph_file_and_needs_no_supervisor_could_send_are_refused() -> None:
    graph = compile_workflow(builds())
    assert graph.states["build"].needs == {"os": "macos"}
    assert graph.states["lint"].needs is None
    flow = Workflow("bad")
    with pytest.raises(DefinitionError, match="state 'x': needs: 'gpu' must be a string"):
        flow.state("x", needs={"gpu": True})  # type: ignore[dict-item]
    with pytest.raises(DefinitionError, match="labels are a mapping"):
        flow.state("y", needs=["os"])  # type: ignore[arg-type]


def worktrees() -> Workflow:
    """`work` prefers the box that holds the token's worktree, for 30 seconds."""
    flow = Workflow("worktrees")
    work = flow.state("work", prefers={"box": "ctx['box']"}, prefer_for="30s")
    flow.transition(START, work)
    flow.transition(work, END, on=flow.event("done"))
    return flow


def claim_work(served: Served, name: str, labels: dict[str, str]) -> Any:
    body = {"supervisor": name, "states": ["work"], "labels": labels}
    status, _, grant = served.request("POST", "/tasks/claim", body)
    assert status in (200, 204), grant
    return grant["token"] if status == 200 else None


def test_a_preferred_box_gets_its_task_when_it_claims_within_prefer_for(backend: Backend) -> None:
    plane = plane_for(worktrees(), backend)
    with serving(plane.engine) as served:
        for token, box in (("W-1", "ws-3"), ("W-2", "ws-3"), ("W-3", "ws-1")):
            body = {"token": token, "context": {"box": box}}
            assert served.request("POST", "/tokens", body)[0] == 201
        # ws-1 passes over the two tasks that prefer ws-3, and takes its own.
        assert claim_work(served, "b1", {"box": "ws-1"}) == "W-3"
        assert claim_work(served, "b1", {"box": "ws-1"}) is None
        assert claim_work(served, "b3", {"box": "ws-3", "os": "linux"}) == "W-1"
        plane.clock.advance(29)
        assert claim_work(served, "b1", {"box": "ws-1"}) is None
        plane.clock.advance(1)  # prefer_for is over: the task goes to any box
        assert claim_work(served, "b1", {"box": "ws-1"}) == "W-2"


def test_a_report_s_next_passes_over_a_task_preferred_for_another_box(backend: Backend) -> None:
    flow = Workflow("handoff")
    plan = flow.state("plan")
    work = flow.state("work", prefers={"box": "ctx['box']"}, prefer_for="30s")
    flow.transition(START, plan)
    flow.transition(plan, work, on=flow.event("planned"))
    flow.transition(work, END, on=flow.event("done"))
    plane = plane_for(flow, backend)
    with serving(plane.engine) as served:
        assert served.request("POST", "/tokens", {"token": "W-1", "context": {"box": "ws-3"}})[0]
        labels, states = {"box": "ws-1"}, ["plan", "work"]
        body = {"supervisor": "b1", "states": states, "labels": labels}
        status, _, grant = served.request("POST", "/tasks/claim", body)
        assert status == 200, grant
        report = {"kind": "event", "event": "planned", "supervisor": "b1"}
        report |= {"attempt": grant["attempt"], "next": {"states": states, "labels": labels}}
        status, _, answer = served.request("POST", f"/tasks/{grant['task']}/report", report)
        assert status == 200 and answer.get("grant") is None, answer
        assert claim_work(served, "b1", {"box": "ws-1"}) is None
        assert claim_work(served, "b3", {"box": "ws-3"}) == "W-1"


def test_prefers_names_one_label_and_a_key_expression() -> None:
    graph = compile_workflow(worktrees())
    assert (graph.states["work"].prefers, graph.states["work"].prefer_for) == (
        {"box": "ctx['box']"},
        "30s",
    )
    flow = Workflow("bad")
    with pytest.raises(DefinitionError, match="names one label"):
        flow.state("x", prefers={"a": "ctx['a']", "b": "ctx['b']"})
    with pytest.raises(DefinitionError, match="is no key expression"):
        flow.state("y", prefers={"box": "ctx["})
    with pytest.raises(DefinitionError, match="prefer_for= goes with prefers="):
        flow.state("z", prefer_for="10s")
