"""`stateous supervise` as a real process, beside a real `stateous serve` on a real port.

Each test writes the `orders` graph and a supervisor's folder (contract.py, stateous.yaml,
routines.py), starts the processes, and reads the supervisor's log lines, the token's
history over HTTP, and the folder's outbox file. Routines wait on files that the test
creates, so the test decides when a routine returns; every wait polls in short steps.
"""

from __future__ import annotations

import re
import signal
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.control.support import failure
from tests.supervisor.support import (
    APPROVE,
    ROUTINE_IMPORTS,
    ClaimDropper,
    NotAControlPlane,
    Supervisors,
    free_port,
    outbox,
    wait_until,
    write_folder,
    write_graph,
)

#: A draft routine that returns `submitted` when the file `gate` appears in its folder.
GATED = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / "started").touch()
    while not (HERE / "gate").exists():
        time.sleep(0.02)
    return events.submitted
"""


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    """The graph file of `orders`: draft (retries=1), then review."""
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orders.sqlite"


def start_token(served: Served, token: str, title: str = "an order") -> None:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"title": title}})
    assert status == 201, body


def status_of(served: Served, token: str) -> str:
    return str(served.ok("GET", f"/tokens/{token}")["status"])


def wait_status(served: Served, token: str, status: str, timeout: float = 15.0) -> None:
    wait_until(lambda: status_of(served, token) == status, f"{token} {status}", timeout)


def entries(history: list[dict[str, Any]], *kinds: str) -> list[tuple[str, dict[str, Any]]]:
    """The (kind, data) of the entries of these kinds, in order."""
    return [(entry["kind"], entry["data"]) for entry in history if entry["kind"] in kinds]


# the happy path


def test_tokens_complete_through_a_supervisor_and_a_rejected_order_waits_in_its_second_draft(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph)
    supervisor = supervisors.serving(folder)

    start_token(served, "ORDER-1")
    wait_status(served, "ORDER-1", "completed")
    start_token(served, "ORDER-2", "reject me")
    history = served.wait_history("ORDER-2", "task_waiting")

    assert supervisor.log[0] == f"box-1 serves draft, review; the control plane is {served.url}"
    # The report's line comes once the outbox has dropped it; the next task's grant may be
    # logged first, as its claim waits and is woken by that report's commit.
    claimed = supervisor.log.index("task 1: draft of ORDER-1, attempt 1")
    assert supervisor.log.index("task 1 of ORDER-1: reported submitted") > claimed
    assert "task 2 of ORDER-1: reported reviewed" in supervisor.log
    token = served.ok("GET", "/tokens/ORDER-2")
    assert (token["state"], token["visit"], token["status"]) == ("draft", 2, "active")
    assert entries(history, "note", "task_waiting")[-2:] == [
        ("note", {"task": 5, "text": "sent back: not this one"}),
        ("task_waiting", {"task": 5}),
    ]
    assert supervisor.stop() == 0
    assert outbox(folder) == []


# crashes and lost answers


def test_after_a_kill_9_the_lease_ends_and_a_second_supervisor_resumes_with_the_memory(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    stuck = """
    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        ctx.memory["session"] = "abc"
        while not (HERE / "never").exists():
            time.sleep(0.05)
        return events.submitted
    """
    resumes = """
    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        ctx.note(f"attempt {ctx.attempt} resumes session {ctx.memory.get('session')}")
        del ctx.memory["session"]
        return events.submitted
    """
    first = supervisors.serving(write_folder(tmp_path / "box-1", served.url, graph, stuck))
    start_token(served, "ORDER-1")
    served.wait_history("ORDER-1", "memory_set", timeout=15)
    assert first.kill() == -signal.SIGKILL

    second_folder = tmp_path / "box-2"
    write_folder(second_folder, served.url, graph, resumes, APPROVE, name="box-2")
    supervisors.serving(second_folder, "box-2")
    wait_status(served, "ORDER-1", "completed")

    history = served.history("ORDER-1")
    ended = "box-1 stopped answering: no heartbeat for 2 seconds"
    assert entries(history, "task_claimed", "task_failed", "task_retrying")[:4] == [
        ("task_claimed", {"task": 1, "supervisor": "box-1", "attempt": 1}),
        ("task_failed", failure(1, ended)),
        ("task_retrying", {"task": 1, "attempt": 2}),
        ("task_claimed", {"task": 1, "supervisor": "box-2", "attempt": 2}),
    ]
    assert entries(history, "note", "memory_set", "memory_deleted") == [
        ("memory_set", {"task": 1, "state": "draft", "memory_key": "session"}),
        ("note", {"task": 1, "text": "attempt 2 resumes session abc"}),
        ("memory_deleted", {"task": 1, "state": "draft", "memory_key": "session"}),
    ]


def test_heartbeats_keep_the_lease_of_a_routine_that_runs_longer_than_the_lease(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    folder = write_folder(tmp_path / "box-1", served.url, graph, GATED, APPROVE)
    supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")

    # twice the lease, polled: the clock would end the lease within a second of it
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        assert "task_failed" not in served.kinds("ORDER-1")
        time.sleep(0.2)
    (folder / "gate").touch()
    wait_status(served, "ORDER-1", "completed")

    kinds = served.kinds("ORDER-1")
    assert "task_failed" not in kinds
    assert kinds.count("task_claimed") == 2


def test_a_report_waits_in_the_outbox_while_the_control_plane_is_down_and_lands_after(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    first = launcher.serve(graph, db, "--lease", "1m")
    folder = write_folder(tmp_path / "box-1", first.url, graph, GATED, APPROVE)
    supervisor = supervisors.serving(folder)
    start_token(first, "ORDER-1")
    supervisor.wait_log("task 1: draft of ORDER-1, attempt 1")
    assert first.kill() == -signal.SIGKILL

    (folder / "gate").touch()
    wait_until(lambda: outbox(folder) == [("report", 1, 1, "ORDER-1")], "one report kept")
    supervisor.wait_log(
        re.compile(re.escape(f"cannot reach the control plane at {first.url} ") + r".*")
    )
    second = launcher.serve(graph, db, "--lease", "1m", listen=f"127.0.0.1:{first.port}")
    wait_status(second, "ORDER-1", "completed", timeout=20)

    wait_until(lambda: outbox(folder) == [], "an empty outbox")
    assert "task 1 of ORDER-1: reported submitted" in supervisor.log
    history = second.history("ORDER-1")
    assert entries(history, "task_claimed", "task_done", "task_failed")[:2] == [
        ("task_claimed", {"task": 1, "supervisor": "box-1", "attempt": 1}),
        ("task_done", {"task": 1}),
    ]


def stopped_while_down(
    launcher: Launcher,
    supervisors: Supervisors,
    graph: Path,
    db: Path,
    folder: Path,
    routine: str,
) -> tuple[Served, Any]:
    """Serve, start ORDER-1 under a supervisor whose `routine` waits for a gate, kill the
    control plane, stop the supervisor, open the gate; answer the control plane that was
    killed and the supervisor, which has ended with exit code 0."""
    first = launcher.serve(graph, db, "--lease", "1m")
    write_folder(folder, first.url, graph, routine, APPROVE)
    supervisor = supervisors.serving(folder)
    start_token(first, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")
    assert first.kill() == -signal.SIGKILL
    supervisor.send(signal.SIGTERM)
    supervisor.wait_log(
        "stopping: no new tasks; waiting for 1 routine(s) (signal again to stop now)"
    )

    (folder / "gate").touch()

    assert supervisor.wait() == 0
    return first, supervisor


def test_a_stop_while_the_control_plane_is_down_keeps_the_report_for_the_next_start(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "box-1"
    first, supervisor = stopped_while_down(launcher, supervisors, graph, db, folder, GATED)
    assert supervisor.log[-1] == (
        "task 1 of ORDER-1: the control plane cannot be reached; the report stays in the "
        "outbox for the next start"
    )
    assert outbox(folder) == [("report", 1, 1, "ORDER-1")]

    second = launcher.serve(graph, db, "--lease", "1m", listen=f"127.0.0.1:{first.port}")
    again = supervisors.serving(folder)
    wait_status(second, "ORDER-1", "completed")
    assert again.log[1:3] == [
        "sending 1 message(s) left in the outbox",
        "task 1 of ORDER-1: reported submitted",
    ]
    wait_until(lambda: outbox(folder) == [], "an empty outbox")


def test_a_memory_write_kept_at_a_stop_while_the_control_plane_is_down_is_named_so(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    remembers = """
    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        (HERE / "started").touch()
        while not (HERE / "gate").exists():
            time.sleep(0.02)
        ctx.memory["session"] = "abc"
        return events.submitted
    """
    folder = tmp_path / "box-1"
    _, supervisor = stopped_while_down(launcher, supervisors, graph, db, folder, remembers)
    assert supervisor.log[-1] == (
        "task 1 of ORDER-1: the control plane cannot be reached; the memory write stays in "
        "the outbox for the next start"
    )
    assert outbox(folder) == [("memory", 1, 1, "ORDER-1"), ("report", 1, 1, "ORDER-1")]


def test_a_memory_write_the_control_plane_refuses_is_logged_and_the_routine_goes_on(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    too_deep = """
    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        value = []
        for _ in range(70):
            value = [value]
        ctx.memory["deep"] = value
        return events.submitted
    """
    folder = write_folder(tmp_path / "box-1", served.url, graph, too_deep, APPROVE)
    supervisor = supervisors.serving(folder)

    start_token(served, "ORDER-1")
    wait_status(served, "ORDER-1", "completed")

    supervisor.wait_log(
        "task 1 of ORDER-1: the control plane refused a memory write: "
        "the body nests more than 64 levels"
    )
    assert "memory_set" not in served.kinds("ORDER-1")
    wait_until(lambda: outbox(folder) == [], "an empty outbox")


def test_a_claim_whose_answer_is_lost_is_sent_again_and_gets_the_same_task_and_attempt(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    proxy = ClaimDropper(served.port)
    try:
        folder = write_folder(tmp_path / "box-1", proxy.url, graph)
        supervisor = supervisors.serving(folder)
        start_token(served, "ORDER-1")
        wait_status(served, "ORDER-1", "completed")
    finally:
        proxy.close()

    (dropped,) = proxy.dropped
    request = dropped["ask"]["request"]
    assert [claim["request"] for claim in proxy.claims].count(request) == 2
    again = proxy.granted[0]
    assert (again["task"], again["attempt"]) == (dropped["grant"]["task"], 1)
    claimed = entries(served.history("ORDER-1"), "task_claimed")
    assert [data for _, data in claimed if data["task"] == 1] == [
        {"task": 1, "supervisor": "box-1", "attempt": 1}
    ]
    assert supervisor.log.count("task 1: draft of ORDER-1, attempt 1") == 1


# refusals at start


def test_a_second_supervisor_on_the_same_folder_refuses_to_start(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph)
    supervisors.serving(folder)

    code, lines = supervisors.refused(folder)

    assert (code, lines) == (
        1,
        [f"error: another supervisor runs on {folder} now: stop it, or use another folder"],
    )


def test_a_contract_for_another_version_of_the_workflow_refuses_to_start(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    served_checksum = served.ok("GET", "/health")["checksum"]
    other = graph.parent / "other.json"
    other_checksum = write_graph(other, review_timeout="2h")
    folder = write_folder(tmp_path / "box-1", served.url, other)

    code, lines = supervisors.refused(folder)

    assert code == 1
    (line,) = lines
    assert line.startswith(f"error: {folder / 'contract.py'} is for another version of the ")
    assert other_checksum in line and served_checksum in line
    assert other_checksum != served_checksum
    assert line.endswith(f"run `python -m stateous init supervisor --refresh {folder}`")


# cancelled tokens


def test_an_async_routine_is_cancelled_when_its_token_is_cancelled(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    sleeps = """
    @on_state(states.draft)
    async def draft(ctx: ItemContext) -> events.submitted:
        (HERE / "started").touch()
        try:
            await asyncio.sleep(3600)
        finally:
            (HERE / "ended").touch()
        return events.submitted
    """
    folder = write_folder(tmp_path / "box-1", served.url, graph, sleeps)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")

    served.ok("POST", "/tokens/ORDER-1/cancel")

    supervisor.wait_log("task 1 of ORDER-1: the control plane took it back; cancelling its routine")
    wait_until((folder / "ended").exists, "the routine's finally ran")
    assert served.kinds("ORDER-1")[-1] == "cancelled"
    assert outbox(folder) == []
    assert supervisor.stop() == 0


def test_the_late_result_of_a_def_routine_whose_token_was_cancelled_is_ignored(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    late = """
    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        if ctx.token == "ORDER-1":
            (HERE / "started").touch()
            while not (HERE / "gate").exists():
                time.sleep(0.02)
        return events.submitted
    """
    folder = write_folder(tmp_path / "box-1", served.url, graph, late, APPROVE, tasks=1)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")
    served.ok("POST", "/tokens/ORDER-1/cancel")
    supervisor.wait_log("task 1 of ORDER-1: the control plane took it back; cancelling its routine")
    start_token(served, "ORDER-2")

    (folder / "gate").touch()
    # One routine at a time: ORDER-2 is claimed only after ORDER-1's routine returned.
    wait_status(served, "ORDER-2", "completed")

    history = served.history("ORDER-1")
    assert [entry["kind"] for entry in history][-2:] == ["task_cancelled", "cancelled"]
    assert "event_rejected" not in [entry["kind"] for entry in history]
    wait_until(lambda: outbox(folder) == [], "an empty outbox")
    assert not any(line.startswith("task 1 of ORDER-1: report") for line in supervisor.log)


# stopping


def test_a_graceful_stop_waits_for_the_running_routine_and_sends_its_report(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph, GATED, APPROVE)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")

    supervisor.send(signal.SIGTERM)
    supervisor.wait_log(
        "stopping: no new tasks; waiting for 1 routine(s) (signal again to stop now)"
    )
    (folder / "gate").touch()

    assert supervisor.wait() == 0
    assert supervisor.log[-1] == "task 1 of ORDER-1: reported submitted"
    token = served.ok("GET", "/tokens/ORDER-1")
    assert (token["state"], token["status"]) == ("review", "active")
    assert outbox(folder) == []


def test_a_second_stop_signal_cancels_the_running_routine_and_exits_1(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph, GATED)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")

    supervisor.send(signal.SIGTERM)
    supervisor.wait_log(
        "stopping: no new tasks; waiting for 1 routine(s) (signal again to stop now)"
    )
    supervisor.send(signal.SIGTERM)

    assert supervisor.wait() == 1
    assert supervisor.log[-2:] == [
        "stopping now: cancelling 1 routine(s) and giving their tasks back",
        "task 1 of ORDER-1: reported a failed attempt: box-1 was stopped: task given back",
    ]
    assert served.kinds("ORDER-1")[-3:] == ["task_claimed", "task_failed", "task_retrying"]


# bad outcomes and bad folders

BAD_OUTCOMES = """
from stateous import Occurrence


class counted(Occurrence[int]):
    name = "submitted"


@on_state(states.draft)
def draft(ctx: ItemContext) -> object:
    title = ctx["title"]
    if title == "raises":
        raise RuntimeError("the routine broke")
    if title == "a number":
        return 42
    if title == "a number payload":
        return counted(7)
    if title == "wrong event":
        return events.reviewed(Verdict(approved=True))
    if title == "unknown field":
        ctx["colour"] = "red"
    return events.submitted
"""


def line_of(code: str, text: str) -> int:
    """The number of the line of routines.py, written from `code`, that holds `text`."""
    lines = (ROUTINE_IMPORTS + textwrap.dedent(code)).splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


BROKE_LINE = line_of(BAD_OUTCOMES, 'raise RuntimeError("the routine broke")')


@pytest.mark.parametrize(
    ("title", "fits"),
    [
        (
            "raises",
            lambda error: error == f"RuntimeError: the routine broke (routines.py:{BROKE_LINE})",
        ),
        (
            "a number",
            lambda error: (
                error == "the routine returned 42, which is neither an event of 'draft' nor None"
            ),
        ),
        (
            "a number payload",
            lambda error: bool(
                re.fullmatch(
                    r"TypeError: the payload of 'submitted' is not an object "
                    r"\(/.+/stateous/supervisor/routine\.py:\d+\)",
                    error,
                )
            ),
        ),
        (
            "wrong event",
            lambda error: error == "the routine returned 'reviewed', which 'draft' cannot emit",
        ),
        (
            "unknown field",
            lambda error: (
                error.startswith("the control plane refused the report: ") and "colour" in error
            ),
        ),
    ],
    ids=[
        "raises",
        "not-an-event",
        "a-payload-that-is-no-object",
        "event-the-state-cannot-emit",
        "field-the-model-lacks",
    ],
)
def test_a_bad_outcome_fails_each_attempt_with_its_reason_and_the_supervisor_keeps_running(
    launcher: Launcher,
    supervisors: Supervisors,
    graph: Path,
    db: Path,
    tmp_path: Path,
    title: str,
    fits: Callable[[str], bool],
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph, BAD_OUTCOMES, APPROVE)
    supervisor = supervisors.serving(folder)

    start_token(served, "BAD-1", title)
    wait_status(served, "BAD-1", "failed")
    start_token(served, "GOOD-1")
    wait_status(served, "GOOD-1", "completed")

    failures = entries(served.history("BAD-1"), "task_failed", "task_retrying")
    assert [kind for kind, _ in failures] == ["task_failed", "task_retrying", "task_failed"]
    errors = [data["error"] for kind, data in failures if kind == "task_failed"]
    assert all(fits(error) for error in errors), errors
    assert f"task 1 of BAD-1: reported a failed attempt: {errors[-1]}" in supervisor.log
    assert served.kinds("BAD-1")[-1] == "failed"
    assert supervisor.process.poll() is None
    assert outbox(folder) == []


#: Draft routines that raise: in the routine itself, in a helper of a package of the
#: folder that calls the standard library, and in a library installed inside the folder.
RAISING = """
import sys

sys.path.append(str(HERE / "venv" / "lib" / "site-packages"))


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    title = ctx["title"]
    if title == "a missing key":
        ctx["no_such_key"]
    if title == "bad json":
        from checks.parse import parse

        parse("not json")
    if title == "a strict library":
        import strict

        strict.check(title)
    return events.submitted
"""

MISSING_KEY = 'ctx["no_such_key"]'

#: The files of the folder that RAISING calls.
HELPERS = {
    "checks/__init__.py": "",
    "checks/parse.py": "import json\n\n\ndef parse(text):\n    return json.loads(text)\n",
    "venv/lib/site-packages/strict.py": (
        "def check(text):\n    raise ValueError(f'{text!r} is not strict enough')\n"
    ),
}


@pytest.mark.parametrize(
    ("title", "error", "raising"),
    [
        (
            "a missing key",
            f"KeyError: 'no_such_key' (routines.py:{line_of(RAISING, MISSING_KEY)})",
            MISSING_KEY,
        ),
        (
            "bad json",
            "JSONDecodeError: Expecting value: line 1 column 1 (char 0) (checks/parse.py:5)",
            "return json.loads(text)",
        ),
        (
            "a strict library",
            "ValueError: 'a strict library' is not strict enough "
            f"(routines.py:{line_of(RAISING, 'strict.check(title)')})",
            "raise ValueError(f'{text!r} is not strict enough')",
        ),
    ],
    ids=["in-the-routine", "in-a-helper-of-the-folder", "in-a-library-inside-the-folder"],
)
def test_a_routine_that_raises_fails_with_the_line_of_the_folder_and_logs_its_traceback(
    launcher: Launcher,
    supervisors: Supervisors,
    graph: Path,
    db: Path,
    tmp_path: Path,
    title: str,
    error: str,
    raising: str,
) -> None:
    served = launcher.serve(graph, db)
    folder = write_folder(tmp_path / "box-1", served.url, graph, RAISING, APPROVE)
    for name, text in HELPERS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    supervisor = supervisors.serving(folder)

    start_token(served, "BAD-1", title)
    wait_status(served, "BAD-1", "failed")
    supervisor.wait_log(f"task 1 of BAD-1: reported a failed attempt: {error}")
    shown = run_stateous("token", "show", "BAD-1", "--url", served.url, cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    failures = [line for line in shown.stdout.splitlines() if " task 1 failed: " in line]
    assert [line.split(" task 1 failed: ", 1)[1] for line in failures] == [error, error]
    assert supervisor.log.count(f"task 1 of BAD-1: the routine failed: {error}") == 2
    assert supervisor.lines.count("Traceback (most recent call last):") == 2
    assert sum(line.strip() == raising for line in supervisor.lines) == 2


def _settings(text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / "stateous.yaml").write_text(text)


def _routines(text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / "routines.py").write_text(ROUTINE_IMPORTS + text)


TWO_FOR_DRAFT = """
@on_state(states.draft)
def one(ctx: ItemContext) -> None:
    return None


@on_state(states.draft)
def two(ctx: ItemContext) -> None:
    return None
"""


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (
            _settings('url: "http://127.0.0.1:1\ntasks: [\n'),
            "stateous.yaml cannot be read: ",
        ),
        (
            _settings('url: "http://127.0.0.1:1"\ntasks: 0\n'),
            "stateous.yaml: tasks must be a whole number from 1 to 1000",
        ),
        (
            _settings('url: "http://127.0.0.1:1"\ntaks: 4\n'),
            "stateous.yaml: unknown key 'taks'; "
            "the keys are url, tasks, name, token_file, ca_file, eager and labels",
        ),
        (
            _settings('url: "http://127.0.0.1:1"\nlabels: {gpu: true, os: macos}\n'),
            "stateous.yaml: labels: 'gpu' must be a string of 1 to 64 characters, not True "
            '(quote it: "true")',
        ),
        (
            _settings('url: "http://127.0.0.1:1"\nname: "box\\tone"\n'),
            "stateous.yaml: name must have 1 to 128 characters and no control characters",
        ),
        (lambda folder: (folder / "contract.py").unlink(), "contract.py does not exist"),
        (_routines(""), "has no routine; mark a function with @on_state"),
        (_routines(TWO_FOR_DRAFT), "two routines for 'draft': routines.py:one and routines.py:two"),
        (_routines("import no_such_module\n"), "routines.py does not import: ModuleNotFoundError"),
    ],
    ids=[
        "bad-yaml",
        "tasks-0",
        "unknown-key",
        "labels-not-strings",
        "name-with-a-tab",
        "no-contract",
        "no-routine",
        "two-routines",
        "no-import",
    ],
)
def test_a_broken_folder_refuses_to_start_with_one_error_line(
    supervisors: Supervisors,
    tmp_path: Path,
    graph: Path,
    spoil: Callable[[Path], None],
    says: str,
) -> None:
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)
    spoil(folder)

    code, lines = supervisors.refused(folder)

    assert code == 1
    (line,) = lines
    assert line.startswith("error: ") and says in line, line


@pytest.mark.parametrize("status", [404, 200], ids=["404", "html"])
def test_a_url_that_is_not_a_stateous_control_plane_refuses_to_start(
    supervisors: Supervisors, tmp_path: Path, graph: Path, status: int
) -> None:
    server = NotAControlPlane(status)
    try:
        folder = write_folder(tmp_path / "box-1", server.url, graph)
        code, lines = supervisors.refused(folder)
    finally:
        server.close()

    assert code == 1
    (line,) = lines
    assert line.startswith(f"error: {server.url} did not answer as a Stateous control plane: ")


def test_an_unreachable_control_plane_is_tried_again_with_a_growing_wait_until_a_stop(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    folder = write_folder(tmp_path / "box-1", url, graph)
    supervisor = supervisors.start(folder)

    for wait in ("1s", "2s"):
        supervisor.wait_log(
            re.compile(
                re.escape(f"cannot reach the control plane at {url} (")
                + r".+"
                + re.escape(f"); trying again in {wait}")
            )
        )

    assert supervisor.stop() == 0


# serve --supervise


def test_serve_with_supervise_of_a_contract_for_another_version_stops_with_one_line(
    launcher: Launcher, graph: Path, db: Path, tmp_path: Path
) -> None:
    other = graph.parent / "other.json"
    write_graph(other, review_timeout="2h")
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", other)
    served = launcher.serve(graph, db, "--supervise", str(folder))

    code = served.process.wait(timeout=10)
    served.rest(5)

    assert code == 1
    assert not [line for line in served.lines if "Traceback" in line]
    (error,) = [line for line in served.lines if line.startswith("error: ")]
    assert error.startswith(f"error: {folder / 'contract.py'} is for another version of the ")
    assert error.endswith("; this control plane stopped")


def test_serve_with_supervise_runs_both_in_one_process_and_sigint_stops_both(
    launcher: Launcher, graph: Path, db: Path, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)
    served = launcher.serve(graph, db, "--supervise", str(folder))

    start_token(served, "ORDER-1")
    wait_status(served, "ORDER-1", "completed")

    assert served.stop(signal.SIGINT) == 0
    assert served.lines[-1] == "stopped"
    said = [line.split("stateous.supervisor: ", 1)[-1] for line in served.lines]
    assert f"box-1 serves draft, review; the control plane is {served.url}" in said
    assert "task 2 of ORDER-1: reported reviewed" in said
    assert outbox(folder) == []
