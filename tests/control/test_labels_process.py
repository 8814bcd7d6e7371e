"""Labels with real processes on both backends: two `stateous supervise` beside a real
`stateous serve`, one with `os: linux` and one with `os: macos`; the state that needs a
Mac goes only to the Mac."""

from __future__ import annotations

from pathlib import Path

from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump
from tests.control.serving import Launcher
from tests.control.support import Backend
from tests.supervisor.support import Supervisors, orders, wait_until, write_folder


def test_a_task_that_needs_os_macos_is_claimed_only_by_the_supervisor_with_it(
    backend: Backend, launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    flow = orders()
    review = flow.states.pop("review")
    flow.states["review"] = type(review)(
        flow, "review", timeout=review.timeout, needs={"os": "macos"}
    )
    graph = tmp_path / "orders.json"
    graph.write_bytes(dump(compile_workflow(flow)))
    served = launcher.serve(graph, None, "--db", backend.db)
    boxes = {}
    for name, os_name in (("linux-1", "linux"), ("mac-1", "macos")):
        folder = write_folder(tmp_path / name, served.url, graph, name=name)
        with (folder / "stateous.yaml").open("a") as settings:
            settings.write(f"labels: {{os: {os_name}}}\n")
        boxes[name] = supervisors.serving(folder, name)
    tokens = [f"ORDER-{index}" for index in range(8)]
    for token in tokens:
        body = {"token": token, "context": {"title": "an order"}}
        assert served.request("POST", "/tokens", body)[0] == 201

    def completed() -> bool:
        return all(
            served.ok("GET", f"/tokens/{token}")["status"] == "completed" for token in tokens
        )

    wait_until(completed, "every order completed", 30)
    by_state: dict[str, set[str]] = {"draft": set(), "review": set()}
    for token in tokens:
        history = served.ok("GET", f"/tokens/{token}/history")
        queued = {
            e["data"]["task"]: e["data"]["state"] for e in history if e["kind"] == "task_queued"
        }
        for entry in history:
            if entry["kind"] == "task_claimed":
                by_state[queued[entry["data"]["task"]]].add(entry["data"]["supervisor"])
    assert by_state["review"] == {"mac-1"}
    for box in boxes.values():
        assert box.stop() == 0
