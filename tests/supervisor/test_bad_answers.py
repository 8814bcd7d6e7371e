"""A real `stateous supervise` process against a fake control plane that answers badly.

The fake control plane (`fake_plane.py`) is a real HTTP server on a real port. It
answers claims with grants that lack fields, have wrong types or values out of bounds,
nest too deep, or name a state that the folder does not serve; with answers that never
end, trickle, or say they are a terabyte long; with heartbeat answers and refusals of
the wrong shape. After each bad answer comes a good grant: the supervisor must run it
and report it, log one line for the bad answer without a traceback, keep its memory
bounded, and exit 0 on SIGTERM with a clean outbox.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stateous.supervisor.outbox import SCHEMA
from tests.supervisor.fake_plane import (
    Answer,
    Declared,
    Endless,
    FakePlane,
    Halved,
    Raw,
    Trickle,
    Written,
    grant,
    json,
    nested,
    without,
)
from tests.supervisor.support import (
    Supervised,
    Supervisors,
    outbox,
    wait_until,
    write_folder,
    write_graph,
)

#: The log line of a bad answer to a claim, with its reason.
BAD_CLAIM = re.compile(
    re.escape("a bad answer from the control plane to POST /tasks/claim: ")
    + r"(.+); trying again in \d+s"
)
#: A draft routine that notes it ran, then submits once the file `gate` is there.
GATED = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / f"ran-{ctx.task}").touch()
    while not (HERE / "gate").exists():
        time.sleep(0.02)
    return events.submitted
"""
#: A draft routine that notes it ran and submits.
NOTED = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / f"ran-{ctx.task}").touch()
    return events.submitted
"""
#: How a traceback, or a log line that could not be written, begins on stderr.
BROKEN = ("Traceback (most recent call last):", "--- Logging error ---")
SUBMITTED = {
    "kind": "event",
    "event": "submitted",
    "payload": None,
    "attempt": 1,
    "supervisor": "box-1",
}


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


def fake(graph: Path, **answers: list[Answer]) -> FakePlane:
    return FakePlane(graph, **answers)


def folder_of(plane: FakePlane, tmp_path: Path, graph: Path, *routines: str, tasks: int = 4):
    return write_folder(tmp_path / "box-1", plane.url, graph, *routines, tasks=tasks)


def reported(plane: FakePlane, task: int, timeout: float = 15.0) -> dict[str, Any]:
    """Wait for the first report of `task` and return its body."""
    return wait_until(lambda: next(iter(plane.reported(task)), None), f"task {task}", timeout)


def assert_clean_stop(supervisor: Supervised, folder: Path) -> None:
    """The supervisor exits 0 on SIGTERM, its stderr holds no traceback, its outbox is empty."""
    assert supervisor.process.poll() is None, supervisor.lines
    assert supervisor.stop() == 0
    assert not [line for line in supervisor.lines if line.startswith(BROKEN)], supervisor.lines
    assert outbox(folder) == []


def claimed_again_and_run(
    plane: FakePlane, tmp_path: Path, graph: Path, supervisors: Supervisors
) -> Supervised:
    """Serve a supervisor on `plane`, whose first claim's answer is lost: its task 2 is run
    and reported, and its second claim sent the first's request id again."""
    folder = folder_of(plane, tmp_path, graph, NOTED)
    supervisor = supervisors.serving(folder)
    assert reported(plane, 2) == SUBMITTED
    first, second = plane.seen.claim_requests[:2]
    assert first == second
    return supervisor


def bad_claim_reasons(supervisor: Supervised) -> list[str]:
    return [match[1] for match in map(BAD_CLAIM.fullmatch, supervisor.log) if match]


# bad grants

BAD_GRANTS: dict[str, tuple[Answer, str]] = {
    "no-task": (json(without("task")), "Object missing required field `task`"),
    "no-token": (json(without("token")), "Object missing required field `token`"),
    "no-state": (json(without("state")), "Object missing required field `state`"),
    "no-attempt": (json(without("attempt")), "Object missing required field `attempt`"),
    "nested-5000-deep": (nested(5000), "the answer nests more than 66 levels"),
    "nested-100-deep": (nested(100), "the answer nests more than 66 levels"),
    "a-state-it-does-not-serve": (
        json(grant(1, "ORDER-1", state="shipping")),
        "it grants task 1 of 'shipping', a state that box-1 does not serve",
    ),
    "task-as-text": (json(grant("%s")), "Expected `int`, got `str` - at `$.task`"),
    "task-as-a-fraction": (json(grant(7.5)), "Expected `int`, got `float` - at `$.task`"),
    "task-zero": (json(grant(0)), "Expected `int` >= 1 - at `$.task`"),
    "task-past-64-bits": (
        json(grant(2**63)),
        "Expected `int` <= 9223372036854775807 - at `$.task`",
    ),
    "attempt-zero": (json(grant(1, attempt=0)), "Expected `int` >= 1 - at `$.attempt`"),
    "lease-minus-one": (json(grant(1, lease=-1)), "Expected `int` >= 1 - at `$.lease`"),
    "lease-of-a-century": (
        json(grant(1, lease=100 * 365 * 86400)),
        "Expected `int` <= 315360000 - at `$.lease`",
    ),
    "visit-as-text": (json(grant(1, visit="one")), "Expected `int`, got `str` - at `$.visit`"),
    "context-a-list": (
        json(grant(1, context=[])),
        "Expected `object`, got `array` - at `$.context`",
    ),
    "token-not-a-token-id": (json(grant(1, "../etc")), "at `$.token`"),
    "not-json": (Raw(b"<html>busy</html>", kind="text/html"), "Expected `object`, got `str`"),
    "a-json-list": (json([grant(1)]), "Expected `object`, got `array`"),
}


@pytest.mark.parametrize(
    ("answer", "reason"), list(BAD_GRANTS.values()), ids=list(BAD_GRANTS.keys())
)
def test_a_bad_grant_is_one_log_line_and_the_next_good_grant_is_run_and_reported(
    supervisors: Supervisors,
    tmp_path: Path,
    graph: Path,
    answer: Answer,
    reason: str,
) -> None:
    plane = fake(graph, claims=[answer, json(grant(2, "ORDER-2"))])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)

        assert reported(plane, 2) == SUBMITTED
        supervisor.wait_log("task 2 of ORDER-2: reported submitted")
        (said,) = bad_claim_reasons(supervisor)
        assert reason in said, said
        assert [path.name for path in folder.glob("ran-*")] == ["ran-2"]
        assert [task for task, _ in plane.seen.reports] == [2]
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


@pytest.mark.parametrize("task", ["%s", 7.5], ids=["percent-s", "a-fraction"])
def test_a_grant_whose_task_is_no_task_id_leaves_nothing_in_the_outbox_for_the_next_start(
    supervisors: Supervisors, tmp_path: Path, graph: Path, task: Any
) -> None:
    plane = fake(graph, claims=[json(grant(task))])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        first = supervisors.serving(folder)
        first.wait_log(BAD_CLAIM)
        assert first.stop() == 0
        assert outbox(folder) == []

        plane.claims.append(json(grant(2, "ORDER-2")))
        again = supervisors.serving(folder)
        assert reported(plane, 2) == SUBMITTED
        assert_clean_stop(again, folder)
    finally:
        plane.close()


def test_a_grant_cut_off_halfway_is_claimed_again_with_the_same_request_id(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    whole = json(grant(2, "ORDER-2"))
    plane = fake(graph, claims=[Halved(whole), whole])
    try:
        supervisor = claimed_again_and_run(plane, tmp_path, graph, supervisors)
        assert bad_claim_reasons(supervisor) == []
        assert any("trying again in 1s" in line for line in supervisor.log), supervisor.log
        assert_clean_stop(supervisor, supervisor.folder)
    finally:
        plane.close()


# answer heads as HTTP allows them, and heads without end

GRANT_2 = msgspec.json.encode(grant(2, "ORDER-2"))
CHUNKED = b"".join(
    b"%x\r\n%s\r\n" % (len(piece), piece) for piece in (GRANT_2[:10], GRANT_2[10:], b"")
)
HEADS: dict[str, bytes] = {
    "http-1.0-to-its-close": b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + GRANT_2,
    "chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\nConnection: close\r\n\r\n"
    + CHUNKED,
    "names-in-any-case-and-spaces": b"HTTP/1.1 200 Fine\r\nX-Other:\r\nCONTENT-LENGTH:  "
    + str(len(GRANT_2)).encode()
    + b" \r\n\n"
    + GRANT_2,
}


@pytest.mark.parametrize("head", list(HEADS.values()), ids=list(HEADS.keys()))
def test_a_grant_in_an_answer_of_any_head_that_http_allows_is_run_and_reported(
    supervisors: Supervisors, tmp_path: Path, graph: Path, head: bytes
) -> None:
    plane = fake(graph, claims=[Written(head)])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)

        assert reported(plane, 2) == SUBMITTED
        assert not any("trying again" in line for line in supervisor.log), supervisor.log
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


ENDLESS_HEADS: dict[str, tuple[bytes, str]] = {
    "header-lines-without-end": (
        b"HTTP/1.1 200 OK\r\n" + b"X-More: yes\r\n" * 10_000,
        "the answer's headers are malformed or too many",
    ),
    "a-header-line-past-64-kib": (
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"x" * 100_000 + b"\r\n\r\n",
        "got more than 65536 bytes when reading header line",
    ),
    "a-status-line-past-64-kib": (
        b"HTTP/1.1 200 " + b"x" * 100_000 + b"\r\n\r\n",
        "got more than 65536 bytes when reading status line",
    ),
    "no-http": (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "SSH-2.0-OpenSSH_9.6"),
}


@pytest.mark.parametrize(
    ("head", "reason"), list(ENDLESS_HEADS.values()), ids=list(ENDLESS_HEADS.keys())
)
def test_an_answer_whose_head_passes_the_bounds_is_lost_and_claimed_again_with_its_id(
    supervisors: Supervisors, tmp_path: Path, graph: Path, head: bytes, reason: str
) -> None:
    plane = fake(graph, claims=[Written(head), json(grant(2, "ORDER-2"))])
    try:
        supervisor = claimed_again_and_run(plane, tmp_path, graph, supervisors)
        assert any(reason in line and "trying again" in line for line in supervisor.log), (
            supervisor.log
        )
        assert_clean_stop(supervisor, supervisor.folder)
    finally:
        plane.close()


# answers too large or too slow


def rss_bytes(supervisor: Supervised) -> int:
    """The resident memory of the supervisor's process now."""
    status = Path(f"/proc/{supervisor.process.pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) * 1024


@pytest.mark.parametrize(
    "answer",
    [Endless(), Endless(chunked=True), Declared()],
    ids=["endless", "endless-chunked", "a-terabyte-declared"],
)
def test_an_answer_longer_than_the_limit_is_cut_off_and_the_memory_stays_bounded(
    supervisors: Supervisors, tmp_path: Path, graph: Path, answer: Answer
) -> None:
    plane = fake(graph, claims=[answer, json(grant(2, "ORDER-2"))])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)
        most = 0
        while not plane.reported(2) and supervisor.process.poll() is None:
            most = max(most, rss_bytes(supervisor))
            assert most < 80 * 1024 * 1024, f"the supervisor holds {most} bytes"
            time.sleep(0.01)

        assert reported(plane, 2) == SUBMITTED
        reasons = bad_claim_reasons(supervisor)
        assert reasons == ["the answer is longer than 4 MiB"], supervisor.log
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


def test_a_trickling_answer_is_given_up_after_30_seconds_and_the_next_claim_follows(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    plane = fake(graph, claims=[Trickle(seconds=60), json(grant(2, "ORDER-2"))])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)
        wait_until(lambda: len(plane.seen.claims) >= 2, "a second claim", timeout=36)

        first, second = plane.seen.claims[:2]
        assert 30 <= second - first < 33
        assert reported(plane, 2) == SUBMITTED
        assert (
            f"the control plane at {plane.url} did not send its whole answer within 30 seconds; "
            "trying again in 1s"
        ) in supervisor.log
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


# heartbeats and refusals


def test_a_heartbeat_answer_of_the_wrong_shape_is_one_log_line_and_the_task_goes_on(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    plane = fake(graph, claims=[json(grant(2, "ORDER-2"))], heartbeats=[json(["task 2 is lost"])])
    try:
        folder = folder_of(plane, tmp_path, graph, GATED)
        supervisor = supervisors.serving(folder)
        supervisor.wait_log(
            "a bad answer from the control plane to POST /tasks/heartbeat: "
            "Expected `object`, got `array`; trying again in 1s"
        )
        wait_until(lambda: len(plane.seen.heartbeats) >= 2, "a second heartbeat")
        (folder / "gate").touch()

        assert reported(plane, 2) == SUBMITTED
        assert [beat for beat in supervisor.log if "heartbeat" in beat] == [
            "a bad answer from the control plane to POST /tasks/heartbeat: "
            "Expected `object`, got `array`; trying again in 1s",
            "a heartbeat reached the control plane again; 1 before it failed",
        ]
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


def test_a_refusal_without_a_code_is_tried_again_and_the_report_is_not_lost(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    proxy_page = Raw(b"<html>502 Bad Gateway</html>", status=502, kind="text/html")
    plane = fake(graph, claims=[json(grant(2, "ORDER-2"))], report_answers=[proxy_page])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)
        supervisor.wait_log("task 2 of ORDER-2: reported submitted")

        assert plane.reported(2) == [SUBMITTED, SUBMITTED]
        assert (
            "a bad answer from the control plane to POST /tasks/2/report: "
            "a refusal without a code (HTTP 502); trying again in 1s"
        ) in supervisor.log
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


def test_heartbeats_never_come_faster_than_four_a_second_and_a_lease_of_minus_1_is_refused(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    claims = [json(grant(1, "ORDER-1", lease=-1))]
    claims += [json(grant(task, f"ORDER-{task}", lease=1)) for task in range(2, 10)]
    plane = fake(graph, claims=claims)
    try:
        folder = folder_of(plane, tmp_path, graph, GATED, tasks=8)
        supervisor = supervisors.serving(folder)
        wait_until(lambda: len(list(folder.glob("ran-*"))) == 8, "eight routines")
        time.sleep(2)
        (folder / "gate").touch()
        for task in range(2, 10):
            reported(plane, task)

        times = [at for at, _ in plane.seen.heartbeats]
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        assert len(times) >= 8
        assert min(gaps) >= 0.2, gaps
        assert not (folder / "ran-1").exists()
        assert bad_claim_reasons(supervisor) == ["Expected `int` >= 1 - at `$.lease`"]
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


def test_a_grant_without_a_lease_as_stateous_0_2_2_sends_it_is_run_and_reported(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    of_0_2_2 = grant(2, "ORDER-2")
    del of_0_2_2["lease"]
    plane = fake(graph, claims=[json(of_0_2_2)])
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        supervisor = supervisors.serving(folder)

        assert reported(plane, 2) == SUBMITTED
        assert bad_claim_reasons(supervisor) == []
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


# contexts that break the model

#: A draft routine without annotations: the contract's one context type is its model.
UNTYPED = """
@on_state(states.draft)
def draft(ctx):
    (HERE / f"ran-{ctx.task}").touch()
    return events.submitted
"""


@pytest.mark.parametrize(
    ("context", "reason", "routine"),
    [
        ({}, "Object missing required field `title`", NOTED),
        ({"title": 5}, "Expected `str`, got `int` - at `$.title`", NOTED),
        ({"title": "an order", "colour": "red"}, "Object contains unknown field `colour`", NOTED),
        ({"title": 5}, "Expected `str`, got `int` - at `$.title`", UNTYPED),
    ],
    ids=[
        "a-missing-field",
        "a-field-of-the-wrong-type",
        "a-field-the-model-lacks",
        "a-routine-without-annotations",
    ],
)
def test_a_grant_whose_context_breaks_the_model_fails_the_attempt_without_running_the_routine(
    supervisors: Supervisors,
    tmp_path: Path,
    graph: Path,
    context: dict[str, Any],
    reason: str,
    routine: str,
) -> None:
    plane = fake(graph, claims=[json(grant(2, "ORDER-2", context=context))])
    try:
        folder = folder_of(plane, tmp_path, graph, routine)
        supervisor = supervisors.serving(folder)

        error = f"the context does not fit the model Item: {reason}"
        assert reported(plane, 2) == {
            "kind": "failed",
            "error": error,
            "attempt": 1,
            "supervisor": "box-1",
        }
        supervisor.wait_log(f"task 2 of ORDER-2: reported a failed attempt: {error}")
        assert not (folder / "ran-2").exists()
        assert_clean_stop(supervisor, folder)
    finally:
        plane.close()


# an outbox left by an older supervisor

POISONED = [
    ("%s", 1, "ORDER-1", "report", '{"kind": "event", "event": "submitted"}'),
    (7.5, 1, "ORDER-1", "report", '{"kind": "event", "event": "submitted"}'),
    (3, "first", "ORDER-3", "note", '{"text": "hello"}'),
    (4, 1, "ORDER-4", "note", "not json"),
    (5, 1, "ORDER-5", "report", '{"kind": "finished"}'),
    (6, 1, "ORDER-6", "memory", '{"value": 1}'),
]


def test_messages_of_an_old_outbox_that_the_control_plane_can_never_take_are_dropped(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    plane = fake(graph)
    try:
        folder = folder_of(plane, tmp_path, graph, NOTED)
        (folder / ".stateous").mkdir()
        with sqlite3.connect(folder / ".stateous" / "outbox.db") as db:
            db.execute(SCHEMA)
            rows = [*POISONED, (9, 1, "ORDER-9", "note", '{"text": "still here"}')]
            db.executemany(
                "INSERT INTO messages (task, attempt, token, kind, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, 0)",
                rows,
            )
        db.close()
        supervisor = supervisors.serving(folder)

        wait_until(lambda: plane.seen.notes, "the good note")
        assert plane.seen.notes == [
            (9, {"text": "still here", "attempt": 1, "supervisor": "box-1"})
        ]
        dropped = [line for line in supervisor.log if "can never take" in line]
        assert len(dropped) == len(POISONED), supervisor.log
        assert dropped[0] == (
            "dropped a report of task '%s' from the outbox, which the control plane can never "
            "take: Expected `int`, got `str` - at `$.task`"
        )
        assert "`$.attempt`" in dropped[2] and "not JSON" in dropped[3]
        assert "`$.kind`" in dropped[4] and "`key`" in dropped[5]
        assert_clean_stop(supervisor, folder)
        again = supervisors.serving(folder)
        assert_clean_stop(again, folder)
    finally:
        plane.close()
