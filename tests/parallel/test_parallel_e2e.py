"""Parallel states end to end: the two reviews of parallel.md on real processes.

Each test writes `flow.py`, compiles it with `stateous compile`, makes a supervisor's
folder with `stateous init supervisor`, and runs `stateous serve` (on a SQLite file and a
free port) and `stateous supervise`; it steers tokens with `stateous token ...` and reads
them over HTTP. Routines that must not finish on their own wait for a file that the test
creates (`gated` in the token's repo), so every wait is a short poll.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.conftest import run_stateous
from tests.control.serving import Launcher
from tests.parallel.support import (
    PANEL,
    REVIEWS,
    Running,
    children_of,
    flow_source,
    make_project,
    run_project,
)
from tests.supervisor.support import Supervisors

SECURITY, DESIGN = children_of("T-1")
#: A lease of two seconds: the supervisor beats every half second, so a task taken back
#: from it is noticed quickly.
SHORT_LEASE = ("--lease", "2s")


def run(
    tmp_path: Path,
    launcher: Launcher,
    supervisors: Supervisors,
    *options: str,
    join: str = "all",
    timeout: str | None = None,
    nested: bool = False,
    supervise: bool = True,
) -> Running:
    """Make the project in `tmp_path`, serve it on a fresh SQLite file, and supervise it."""
    project = make_project(tmp_path, join, timeout, nested)
    db = tmp_path / "sdlc.sqlite"
    return run_project(project, launcher, supervisors, db, *options, supervise=supervise)


def to_reviews(running: Running, repo: str, token: str = "T-1") -> None:
    """Start `token` on `repo` and move it into `reviews` with `done`."""
    running.start(token, repo)
    assert running.fire(token, "done")["state"] == "reviews"


def joined(running: Running, token: str = "T-1") -> list[list[dict[str, Any]]]:
    """The branches of every `joined` that the token took, in order."""
    return [
        data["payload"]["branches"]
        for _, data in running.entries(token, "event_accepted")
        if data["event"] == "joined"
    ]


def took_back(token: str) -> re.Pattern[str]:
    """The supervisor's log line when the control plane took the task of `token` back."""
    return re.compile(
        rf"task \d+ of {re.escape(token)}: the control plane took it back; cancelling its routine"
    )


def load_contract(path: Path) -> ModuleType:
    """Import a folder's contract.py in this process, under a name of its own."""
    spec = importlib.util.spec_from_file_location("parallel_contract", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["parallel_contract"] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["parallel_contract"]
    return module


# the files


def test_init_supervisor_writes_a_stub_per_state_of_each_child_and_none_for_the_parallel_state(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path)

    stubs = [name for name in project.written if name.endswith(".py") and name != "contract.py"]
    assert sorted(stubs) == sorted(
        [
            "coding.py",
            "merging.py",
            *(
                f"{workflow.replace('-', '_')}_{state}.py"
                for workflow in REVIEWS
                for state in ("triage", "approved", "rejected")
            ),
        ]
    )
    assert "reviews.py" not in project.written
    contract = load_contract(project.folder / "contract.py")
    assert contract.states.design_review.triage.name == "design-review/triage"
    assert contract.states.security_review.approved.name == "security-review/approved"
    assert not hasattr(contract.states, "reviews")
    assert contract.events.design_review.approve.name == "approve"


def test_a_nested_child_workflow_gets_its_own_contract_class_and_stubs(tmp_path: Path) -> None:
    project = make_project(tmp_path, nested=True)

    assert {"ux_review_triage.py", "api_review_triage.py"} <= set(project.written)
    assert "design_review_panel.py" not in project.written
    assert "design_review_triage.py" not in project.written
    contract = load_contract(project.folder / "contract.py")
    assert contract.states.ux_review.triage.name == "ux-review/triage"
    assert contract.states.design_review.approved.name == "design-review/approved"
    assert not hasattr(contract.states.design_review, "panel")


def test_compile_refuses_a_nesting_whose_child_ids_could_pass_128_characters(
    tmp_path: Path,
) -> None:
    long_name = "ux-review-of-every-screen-and-every-button"
    (tmp_path / "flow.py").write_text(
        flow_source(nested=True).replace('"ux-review"', repr(long_name).replace("'", '"'))
    )

    done = run_stateous("compile", "flow.py", cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "error: workflow 'sdlc' is not valid:",
        f"  - parallel state 'panel' of workflow 'design-review': a child id for {long_name!r} "
        "would have 145 characters with a top id of 64, more than 128; "
        "shorten the names of the states or workflows",
    ]
    assert not (tmp_path / "build").exists()


# the join


def test_two_approving_reviews_take_the_parent_to_merging(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors)

    to_reviews(running, "acme/api")
    running.wait_token("T-1", state="merging")

    history = running.entries("T-1")
    assert [data for kind, data in history if kind == "branch_started"] == [
        {"workflow": "security-review", "token": SECURITY},
        {"workflow": "design-review", "token": DESIGN},
    ]
    [branches] = joined(running)
    assert [sorted(branch) for branch in branches] == [
        ["final", "payload", "result", "status", "token", "workflow"]
    ] * 2
    assert sorted(
        (branch["workflow"], branch["token"], branch["status"], branch["final"])
        for branch in branches
    ) == [
        ("design-review", DESIGN, "completed", "approved"),
        ("security-review", SECURITY, "completed", "approved"),
    ]
    for child in (SECURITY, DESIGN):
        token = running.token(child)
        assert (token["status"], token["state"], token["parent"]) == (
            "completed",
            "approved",
            "T-1",
        )
        assert token["context"] == {"repo": "acme/api", "branch": "feature"}
    assert running.supervisor is not None
    for workflow, child in zip(REVIEWS, (SECURITY, DESIGN), strict=True):
        claimed = rf"task \d+: {workflow}/triage of {re.escape(child)}, attempt 1"
        running.supervisor.wait_log(re.compile(claimed))


def test_a_branch_carries_the_payload_of_the_event_that_brought_the_child_into_its_final_state(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors)

    to_reviews(running, "acme/api")
    running.wait_token("T-1", state="merging")

    [branches] = joined(running)
    assert {branch["workflow"]: branch["payload"] for branch in branches} == {
        "security-review": {"note": "security-review approves"},
        "design-review": {"note": "design-review approves"},
    }
    # `close`, which ends each review, carries nothing: there is no result
    assert [branch["result"] for branch in branches] == [None, None]


def test_one_rejecting_review_sends_the_parent_back_to_coding(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors)

    to_reviews(running, "acme/reject-design-review")
    running.wait_token("T-1", state="coding", visit=2)

    [branches] = joined(running)
    finals = {branch["workflow"]: (branch["status"], branch["final"]) for branch in branches}
    assert finals == {
        "security-review": ("completed", "approved"),
        "design-review": ("completed", "rejected"),
    }
    assert running.token(DESIGN)["state"] == "rejected"
    assert running.token("T-1")["status"] == "active"


def test_join_any_goes_on_with_the_first_review_and_cancels_the_slower_one(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, *SHORT_LEASE, join="any")
    assert running.supervisor is not None

    to_reviews(running, "acme/gated")
    running.wait_started(SECURITY, DESIGN)
    running.release("security-review")
    running.wait_token("T-1", state="merging")

    [branches] = joined(running)
    assert [(branch["token"], branch["status"], branch["final"]) for branch in branches] == [
        (SECURITY, "completed", "approved")
    ]
    assert running.token(DESIGN)["status"] == "cancelled"
    assert running.entries(DESIGN)[-1] == (
        "cancelled",
        {"reason": "the parent left 'reviews' on 'joined'"},
    )
    running.supervisor.wait_log(took_back(DESIGN))
    assert not (running.folder / "design-review-go").exists()


def test_a_timeout_of_the_parallel_state_cancels_both_reviews(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, *SHORT_LEASE, timeout="3s")
    assert running.supervisor is not None

    to_reviews(running, "acme/gated")
    running.wait_started(SECURITY, DESIGN)
    running.wait_token("T-1", state="coding", visit=2, timeout=10.0)

    kinds = [kind for kind, _ in running.entries("T-1", "timer_fired", "event_accepted")]
    assert kinds[-2:] == ["timer_fired", "event_accepted"]
    assert running.entries("T-1", "event_accepted")[-1][1]["event"] == "timeout"
    for child in (SECURITY, DESIGN):
        assert running.token(child)["status"] == "cancelled"
        assert running.entries(child)[-1] == (
            "cancelled",
            {"reason": "the parent left 'reviews' on 'timeout'"},
        )
        running.supervisor.wait_log(took_back(child))
    assert joined(running) == []


# steering the parent


def test_cancelling_the_parent_cancels_its_reviews(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, *SHORT_LEASE)
    assert running.supervisor is not None

    to_reviews(running, "acme/gated")
    running.wait_started(SECURITY, DESIGN)
    done = running.cli("cancel", "T-1")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "T-1: reviews, cancelled\n"
    assert running.entries("T-1")[-1] == ("cancelled", {})
    for child in (SECURITY, DESIGN):
        assert running.token(child)["status"] == "cancelled"
        assert running.entries(child)[-2:] == [
            ("task_cancelled", {"task": running.entries(child, "task_queued")[0][1]["task"]}),
            ("cancelled", {"reason": "the parent was cancelled"}),
        ]
        running.supervisor.wait_log(took_back(child))


def test_pausing_the_parent_pauses_the_reviews_and_held_events_apply_in_arrival_order(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, *SHORT_LEASE, join="any")
    assert running.supervisor is not None
    to_reviews(running, "acme/gated")
    running.wait_started(SECURITY, DESIGN)

    paused = running.cli("pause", "T-1")
    assert (paused.returncode, paused.stdout) == (0, "T-1: reviews, paused\n"), paused.stderr
    assert [running.token(child)["status"] for child in (SECURITY, DESIGN)] == ["paused"] * 2
    fired = [
        (DESIGN, "reject", '{"note": "not this design"}'),
        (DESIGN, "close"),
        ("T-1", "withdraw"),
        (SECURITY, "approve", '{"note": "safe"}'),
        (SECURITY, "close"),
    ]
    for args in fired:
        done = running.cli("fire", *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.endswith(", paused\n"), done.stdout
    arrivals = {
        token: [
            (data["event"], data["arrival"]) for _, data in running.entries(token, "event_deferred")
        ]
        for token in ("T-1", SECURITY, DESIGN)
    }
    order = sorted(
        (arrival, token, event) for token, held in arrivals.items() for event, arrival in held
    )
    assert [(token, event) for _, token, event in order] == [(args[0], args[1]) for args in fired]
    assert running.token("T-1")["state"] == "reviews"

    resumed = running.cli("resume", "T-1")

    assert resumed.returncode == 0, resumed.stderr
    # the design review arrived first: join="any" goes on with its rejection, back to coding;
    # the parent's `withdraw` came after, when coding has no use for it
    assert resumed.stdout == "T-1: coding (visit 2), active\n"
    [branches] = joined(running)
    assert [(branch["token"], branch["final"]) for branch in branches] == [(DESIGN, "rejected")]
    assert running.entries("T-1", "event_dropped") == [
        (
            "event_dropped",
            {"event": "withdraw", "reason": "'coding' has no transition on 'withdraw'"},
        )
    ]
    assert running.token(DESIGN)["status"] == "completed"
    assert running.token(SECURITY)["status"] == "cancelled"
    reason = f"token {SECURITY!r} is cancelled"
    assert running.entries(SECURITY, "cancelled", "event_dropped") == [
        ("cancelled", {"reason": "the parent left 'reviews' on 'joined'"}),
        ("event_dropped", {"event": "approve", "reason": reason}),
        ("event_dropped", {"event": "close", "reason": reason}),
    ]
    for token in ("T-1", SECURITY, DESIGN):
        assert [kind for kind, _ in running.entries(token, "paused", "resumed")] == [
            "paused",
            "resumed",
        ]
    running.supervisor.wait_log(took_back(SECURITY))
    running.supervisor.wait_log(took_back(DESIGN))


# nesting


def test_a_review_with_a_parallel_state_of_its_own_runs_to_the_end(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, nested=True)

    to_reviews(running, "acme/api")
    running.wait_token("T-1", state="merging", timeout=20.0)

    panel = [f"{DESIGN}.panel.1.{workflow}" for workflow in PANEL]
    assert [
        data["token"] for kind, data in running.entries(DESIGN) if kind == "branch_started"
    ] == panel
    listed = running.children(DESIGN)
    assert sorted(token["token"] for token in listed) == sorted(panel)
    for child in listed:
        assert (child["status"], child["state"], child["parent"]) == (
            "completed",
            "approved",
            DESIGN,
        )
    design = running.token(DESIGN)
    assert (design["status"], design["state"]) == ("completed", "approved")
    assert sorted(token["token"] for token in running.children("T-1")) == [DESIGN, SECURITY]
    [branches] = joined(running)
    assert sorted((branch["token"], branch["final"]) for branch in branches) == [
        (DESIGN, "approved"),
        (SECURITY, "approved"),
    ]
    assert running.supervisor is not None
    for workflow, child in zip(PANEL, panel, strict=True):
        claimed = rf"task \d+: {workflow}/triage of {re.escape(child)}, attempt 1"
        running.supervisor.wait_log(re.compile(claimed))


def test_a_grandchild_id_over_128_characters_refuses_the_event_that_enters_reviews(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, nested=True, supervise=False)
    # the child fits (100 + 24 characters); its panel's children do not (100 + 24 + 19)
    parent = "T" * 100
    running.start(parent, "acme/api")

    status, answer = running.served.request("POST", f"/tokens/{parent}/events/done")

    assert status == 409, answer
    assert answer["code"] == "event_not_allowed"
    assert "characters, more than 128" in answer["error"]
    token = running.token(parent)
    assert (token["state"], token["status"]) == ("coding", "active")
    assert running.children(parent) == []
    kind, data = running.entries(parent)[-1]
    assert (kind, data["event"], data["reason"]) == ("event_rejected", "done", answer["error"])


# refusals and what the API and the command show


def test_a_review_cannot_be_paused_resumed_or_cancelled_alone(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, supervise=False)
    to_reviews(running, "acme/api")

    for verb in ("pause", "resume", "cancel"):
        done = running.cli(verb, SECURITY)
        assert done.returncode == 1
        assert done.stderr == (
            f"error: the control plane at {running.served.url} refused (409): token "
            f"{SECURITY!r} is a child of 'T-1'; {verb} its top token instead\n"
        )
        status, answer = running.served.request("POST", f"/tokens/{SECURITY}/{verb}")
        assert (status, answer["code"]) == (409, "child_token")
    assert running.token(SECURITY)["status"] == "active"
    assert running.token("T-1")["status"] == "active"


def test_a_child_id_over_128_characters_refuses_the_event_that_enters_reviews(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, supervise=False)
    # `.reviews.1.security-review` has 26 characters: 102 + 26 fits, 103 + 26 does not
    fits, too_long = "F" * 102, "L" * 103
    running.start(fits, "acme/api")
    running.start(too_long, "acme/api")

    status, answer = running.served.request("POST", f"/tokens/{too_long}/events/done")
    done = running.cli("fire", too_long, "done")

    assert status == 409, answer
    assert answer["code"] == "event_not_allowed"
    assert "129 characters, more than 128" in answer["error"]
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: the control plane at {running.served.url} refused (409): "
    )
    token = running.token(too_long)
    assert (token["state"], token["status"], token["visit"]) == ("coding", "active", 1)
    assert running.children(too_long) == []
    assert [kind for kind, _ in running.entries(too_long)] == [
        "started",
        "event_accepted",
        "entered",
        "task_queued",
        "event_rejected",
        "event_rejected",
    ]
    assert running.fire(fits, "done")["state"] == "reviews"
    assert max(len(child["token"]) for child in running.children(fits)) == 128


def test_token_show_lists_the_reviews_under_the_parent_and_the_api_names_the_parent(
    tmp_path: Path, launcher: Launcher, supervisors: Supervisors
) -> None:
    running = run(tmp_path, launcher, supervisors, supervise=False)
    to_reviews(running, "acme/api")

    shown = running.cli("show", "T-1")

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "T-1: reviews, active"
    assert sorted(lines[1:3]) == [f"  {DESIGN}: triage, active", f"  {SECURITY}: triage, active"]
    assert not lines[3].startswith("  ")
    assert any(f"branch security-review started: {SECURITY}" in line for line in lines[3:])
    listed = running.children("T-1")
    assert sorted(token["token"] for token in listed) == [DESIGN, SECURITY]
    assert {token["parent"] for token in listed} == {"T-1"}
    assert running.token(DESIGN)["parent"] == "T-1"
    assert "parent" not in running.token("T-1")
    child_shown = running.cli("show", DESIGN)
    assert child_shown.stdout.splitlines()[0] == f"{DESIGN}: triage, active"
    assert running.children(DESIGN) == []
