"""A build matrix end to end: the parent routes on what its children's routines returned.

`flow.py` runs two builds side by side; each build's routine ends its child with
`built {"ok": ..., "log": ...}`, and the parent ships only when
`branches.all(result.ok == true)`. It is compiled by `stateous compile`, served by
`stateous serve` on a SQLite file, and worked by `stateous supervise`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.control.serving import Launcher
from tests.parallel.support import Running, build_project, run_project
from tests.supervisor.support import Supervisors

FLOW = '''\
"""A build matrix: one build per platform, shipped when every build is ok."""

import msgspec

from stateous import END, START, Workflow


class Change(msgspec.Struct):
    repo: str
    branch: str


class Checkout(msgspec.Struct):
    repo: str


class Built(msgspec.Struct):
    ok: bool
    log: str


def platform(name: str) -> Workflow:
    """One build: `building` ends the child with `built`."""
    child = Workflow(name, context=Checkout)
    building = child.state("building")
    child.transition(START, building)
    child.transition(building, END, on=child.event("built", payload=Built))
    return child


flow = Workflow("release", context=Change)
builds = flow.state("builds", parallel=[platform("linux"), platform("mac")], inputs=["repo"])
shipping = flow.state("shipping")
fixing = flow.state("fixing")
flow.transition(START, builds)
flow.transition(builds, shipping, on="joined", when="branches.all(result.ok == true)")
flow.transition(builds, fixing, on="joined", otherwise=True)
flow.transition(shipping, END, on=flow.event("shipped"))
flow.transition(fixing, END, on=flow.event("fixed"))
'''

ROUTINES_HEAD = """\
from __future__ import annotations

from stateous import on_state

from contract import Built, CheckoutContext, events, states
"""
#: The build of one platform: red when the repo names it, green otherwise.
BUILD = """
@on_state(states.{name}.building)
def {name}_building(ctx: CheckoutContext) -> events.{name}.built:
    ok = "red-{name}" not in ctx["repo"]
    return events.{name}.built(Built(ok=ok, log="{name}: " + ("green" if ok else "red")))
"""
PLATFORMS = ("linux", "mac")


def run(tmp_path: Path, launcher: Launcher, supervisors: Supervisors) -> Running:
    """Compile the matrix, serve it on a fresh SQLite file, and supervise its builds."""
    routines = ROUTINES_HEAD + "".join(BUILD.format(name=name) for name in PLATFORMS)
    project = build_project(tmp_path, FLOW, routines, name="release")
    return run_project(project, launcher, supervisors, tmp_path / "release.sqlite")


def results(running: Running, token: str) -> dict[str, Any]:
    """The result of each branch of the token's `joined`, by workflow."""
    [accepted] = [
        data for _, data in running.entries(token, "event_accepted") if data["event"] == "joined"
    ]
    return {branch["workflow"]: branch["result"] for branch in accepted["payload"]["branches"]}


def test_the_parent_ships_when_every_build_returned_ok(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors)

    running.start("R-1", "acme/api")
    running.wait_token("R-1", state="shipping")

    assert results(running, "R-1") == {
        "linux": {"ok": True, "log": "linux: green"},
        "mac": {"ok": True, "log": "mac: green"},
    }
    shown = running.cli("show", "R-1")
    assert shown.returncode == 0, shown.stderr
    [line] = [line for line in shown.stdout.splitlines() if "joined in builds" in line]
    assert '"result": {"ok": true, "log": "linux: green"}' in line


def test_a_build_that_returned_not_ok_sends_the_parent_to_fixing(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors)

    running.start("R-2", "acme/red-mac")
    running.wait_token("R-2", state="fixing")

    assert results(running, "R-2") == {
        "linux": {"ok": True, "log": "linux: green"},
        "mac": {"ok": False, "log": "mac: red"},
    }
