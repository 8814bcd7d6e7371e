"""The two-reviews workflow of parallel.md as real files and real processes.

A test writes `flow.py` with `flow_source` (join "all" or "any", an optional timeout on
`reviews`, and optionally a `design-review` that runs a parallel state of its own),
compiles it with `stateous compile`, makes a supervisor's folder with `stateous init
supervisor`, replaces the stubs by one file of routines, and runs `stateous serve` and
`stateous supervise` through the launchers of `tests.control.serving` and
`tests.supervisor.support`. A review's routine reads its verdict in the token's `repo`:
`reject-<workflow>` rejects, and `gated` makes it wait for the file `<workflow>-go` in the
supervisor's folder, which the test creates when it wants the routine to go on.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.supervisor.support import Supervised, Supervisors, wait_until, write_settings

#: The children of `reviews`, in the order of `parallel=[...]`.
REVIEWS = ("security-review", "design-review")
#: The children of `panel`, the parallel state of the nested `design-review`.
PANEL = ("ux-review", "api-review")
#: What every `flow.py` starts with: the models and the workflow of one review.
FLOW_HEAD = '''\
"""The two reviews of parallel.md: a change is coded, then reviewed twice at the same time."""

import msgspec

from stateous import END, START, Workflow


class Ticket(msgspec.Struct):
    repo: str
    branch: str


class Review(msgspec.Struct):
    repo: str
    branch: str


class Finding(msgspec.Struct):
    note: str


def review(name: str) -> Workflow:
    """A review: triage approves or rejects, and the verdict's state closes the review."""
    child = Workflow(name, context=Review)
    triage = child.state("triage")
    approved = child.state("approved")
    rejected = child.state("rejected")
    approve = child.event("approve", payload=Finding)
    reject = child.event("reject", payload=Finding)
    close = child.event("close")
    child.transition(START, triage)
    child.transition(triage, approved, on=approve)
    child.transition(triage, rejected, on=reject)
    child.transition(approved, END, on=close)
    child.transition(rejected, END, on=close)
    return child


ALL_APPROVED = "branches.all(status == 'completed' and final == 'approved')"
security = review("security-review")
'''
#: `design-review` as a plain review.
FLAT_DESIGN = """
design = review("design-review")
"""
#: `design-review` as a panel of two reviews: a parallel state inside a child workflow.
NESTED_DESIGN = """
design = Workflow("design-review", context=Review)
panel = design.state(
    "panel", parallel=[review("ux-review"), review("api-review")], inputs=["repo", "branch"]
)
design_approved = design.state("approved")
design_rejected = design.state("rejected")
design_close = design.event("close")
design.transition(START, panel)
design.transition(panel, design_approved, on="joined", when=ALL_APPROVED)
design.transition(panel, design_rejected, on="joined", otherwise=True)
design.transition(design_approved, END, on=design_close)
design.transition(design_rejected, END, on=design_close)
"""
#: The parent, `sdlc`; `{options}` are the extra arguments of the parallel state.
FLOW_PARENT = """
flow = Workflow("sdlc", context=Ticket)
coding = flow.state("coding")
reviews = flow.state(
    "reviews", parallel=[security, design], inputs=["repo", "branch"]{options}
)
merging = flow.state("merging")
done = flow.event("done")
withdraw = flow.event("withdraw")
merged = flow.event("merged")
flow.transition(START, coding)
flow.transition(coding, reviews, on=done)
flow.transition(reviews, merging, on="joined", when=ALL_APPROVED)
flow.transition(reviews, coding, on="joined", otherwise=True)
flow.transition(reviews, coding, on="timeout")
flow.transition(reviews, coding, on=withdraw)
flow.transition(merging, END, on=merged)
"""


def flow_source(join: str = "all", timeout: str | None = None, nested: bool = False) -> str:
    """The text of `flow.py`: `reviews` with this join and timeout; `nested` adds a panel."""
    options = f", join={join!r}" + ("" if timeout is None else f", timeout={timeout!r}")
    design = NESTED_DESIGN if nested else FLAT_DESIGN
    return FLOW_HEAD + design + FLOW_PARENT.format(options=options)


#: What the file of routines starts with: the verdict of a review, read from `repo`.
ROUTINES_HEAD = '''\
from __future__ import annotations

import asyncio
from pathlib import Path

from stateous import on_state

from contract import Finding, ReviewContext, events, states

HERE = Path(__file__).resolve().parent


async def approves(ctx: ReviewContext, workflow: str) -> bool:
    """Wait for `<workflow>-go` when the repo says `gated`; reject on `reject-<workflow>`."""
    (HERE / f"{ctx.token}.started").touch()
    if "gated" in ctx["repo"]:
        while not (HERE / f"{workflow}-go").exists():
            await asyncio.sleep(0.02)
    return f"reject-{workflow}" not in ctx["repo"]
'''
#: The triage of one review workflow.
TRIAGE = """
@on_state(states.{attr}.triage)
async def {attr}_triage(ctx: ReviewContext) -> events.{attr}.approve | events.{attr}.reject:
    if await approves(ctx, "{name}"):
        return events.{attr}.approve(Finding(note="{name} approves"))
    return events.{attr}.reject(Finding(note="{name} rejects"))
"""
#: The states that close a review, with its verdict.
CLOSE = """
@on_state(states.{attr}.approved)
def {attr}_approved(ctx: ReviewContext) -> events.{attr}.close:
    return events.{attr}.close


@on_state(states.{attr}.rejected)
def {attr}_rejected(ctx: ReviewContext) -> events.{attr}.close:
    return events.{attr}.close
"""


def attribute(workflow: str) -> str:
    """The name of a workflow in contract.py: `design-review` is `design_review`."""
    return workflow.replace("-", "_")


def routines_source(nested: bool = False) -> str:
    """Routines for every task state of the child workflows; `sdlc`'s own states have none."""
    pieces = [ROUTINES_HEAD]
    triaged = ("security-review", *PANEL) if nested else REVIEWS
    for workflow in triaged:
        pieces.append(TRIAGE.format(attr=attribute(workflow), name=workflow))
    for workflow in (*REVIEWS, *PANEL) if nested else REVIEWS:
        pieces.append(CLOSE.format(attr=attribute(workflow)))
    return "\n".join(pieces)


def stateous(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python -m stateous ARGS` in `cwd`; it must succeed."""
    done = run_stateous(*args, cwd=cwd)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@dataclass
class Project:
    """A compiled `flow.py` and a supervisor's folder made from it."""

    graph: Path
    folder: Path
    #: The files that `stateous init supervisor` said it wrote.
    written: list[str]


def make_project(
    root: Path, join: str = "all", timeout: str | None = None, nested: bool = False
) -> Project:
    """The project of the two reviews, with this join, timeout and nesting."""
    return build_project(root, flow_source(join, timeout, nested), routines_source(nested))


def build_project(root: Path, flow: str, routines: str, name: str = "sdlc") -> Project:
    """Write and compile `flow` in `root/<name>`; make `root/box-1` with init; replace its
    stubs by `routines`."""
    source = root / name
    source.mkdir()
    (source / "flow.py").write_text(flow)
    stateous("compile", "flow.py", "--out", f"{name}.json", cwd=source)
    graph = source / f"{name}.json"
    folder = root / "box-1"
    made = stateous("init", "supervisor", str(graph), str(folder), cwd=root)
    written = [
        Path(line.split()[1]).name for line in made.stdout.splitlines() if line.startswith("wrote")
    ]
    for stub in written:
        if stub.endswith(".py") and stub != "contract.py":
            (folder / stub).unlink()
    (folder / "routines.py").write_text(routines)
    return Project(graph, folder, written)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """Poll `check` every 50 ms until it returns something true; return it."""
    return wait_until(check, what, timeout)


@dataclass
class Running:
    """A control plane and (maybe) a supervisor, serving one project."""

    project: Project
    served: Served
    supervisor: Supervised | None

    @property
    def folder(self) -> Path:
        return self.project.folder

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run `stateous token ARGS --url URL`, whatever its exit code."""
        return run_stateous("token", *args, "--url", self.served.url, cwd=self.folder.parent)

    def token(self, token: str) -> dict[str, Any]:
        return self.served.ok("GET", f"/tokens/{token}")  # type: ignore[no-any-return]

    def start(self, token: str, repo: str, branch: str = "feature") -> None:
        body = {"token": token, "context": {"repo": repo, "branch": branch}}
        status, answer = self.served.request("POST", "/tokens", body)
        assert status == 201, answer

    def fire(self, token: str, event: str) -> dict[str, Any]:
        return self.served.ok("POST", f"/tokens/{token}/events/{event}")  # type: ignore[no-any-return]

    def children(self, parent: str) -> list[dict[str, Any]]:
        return self.served.ok("GET", f"/tokens?parent={parent}")  # type: ignore[no-any-return]

    def entries(self, token: str, *kinds: str) -> list[tuple[str, dict[str, Any]]]:
        """The (kind, data) of the token's ledger entries of these kinds (all without kinds)."""
        return [
            (entry["kind"], entry["data"])
            for entry in self.served.history(token)
            if not kinds or entry["kind"] in kinds
        ]

    def wait_token(self, token: str, timeout: float = 15.0, **expected: Any) -> dict[str, Any]:
        """Poll the token until its fields have the `expected` values; return it."""

        def check() -> dict[str, Any] | None:
            seen = self.token(token)
            return seen if all(seen[key] == value for key, value in expected.items()) else None

        return wait_for(check, f"{token} with {expected}", timeout)  # type: ignore[no-any-return]

    def wait_started(self, *tokens: str, timeout: float = 15.0) -> None:
        """Wait until the routine of each token has started in the supervisor."""
        for token in tokens:
            path = self.folder / f"{token}.started"
            wait_for(path.exists, f"the routine of {token} started", timeout)

    def release(self, workflow: str) -> None:
        """Let the gated routines of `workflow` go on."""
        (self.folder / f"{workflow}-go").touch()


def run_project(
    project: Project,
    launcher: Launcher,
    supervisors: Supervisors,
    db: Path,
    *options: str,
    supervise: bool = True,
) -> Running:
    """Serve the project's graph on `db` (with serve's `options`), and supervise its folder."""
    served = launcher.serve(project.graph, db, *options)
    write_settings(project.folder, served.url)
    supervisor = supervisors.serving(project.folder) if supervise else None
    return Running(project, served, supervisor)


def children_of(parent: str, state: str = "reviews", visit: int = 1) -> tuple[str, str]:
    """The ids of the two reviews that `parent` runs in `state` on this visit."""
    security, design = REVIEWS
    return f"{parent}.{state}.{visit}.{security}", f"{parent}.{state}.{visit}.{design}"
