"""Outages and stops that cost no work: heartbeats tried again within the lease, tasks given
back at a forced stop, and routines that know their task is gone.

Real `stateous serve` and `stateous supervise` processes on real ports; where connections
must fail, a small TCP proxy of the test stands between them and cuts every request while
it is told to, counting the heartbeats that reach it.
"""

from __future__ import annotations

import itertools
import re
import signal
import socket
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.control.serving import Launcher, Served
from tests.control.support import failure
from tests.supervisor.support import (
    APPROVE,
    Supervisors,
    _read_message,
    outbox,
    wait_until,
    write_folder,
    write_graph,
)
from tests.supervisor.test_supervise_process import GATED, entries, start_token

#: A draft routine that runs until the file `never` appears, which it never does.
FOREVER = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / "started").touch()
    while not (HERE / "never").exists():
        time.sleep(0.02)
    return events.submitted
"""

#: A draft routine that submits at once, for the second supervisor.
SUBMITS = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    return events.submitted
"""

GIVEN_BACK = "box-1 was stopped: task given back"


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "orders.sqlite"


def assert_first_task_ran_once(history: list[dict[str, Any]]) -> None:
    """No attempt failed, and the token's first task (the draft's) was claimed once: the
    review's task may be claimed by now too."""
    assert "task_failed" not in [entry["kind"] for entry in history], history
    claims = [entry["data"] for entry in history if entry["kind"] == "task_claimed"]
    assert [claim["attempt"] for claim in claims if claim["task"] == claims[0]["task"]] == [1]


class Cutter:
    """A TCP proxy to a control plane that, while `cutting`, closes every connection on
    the first request instead of forwarding it. It notes when each heartbeat reached it,
    and whether it went through."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.cutting = False
        #: While set, only reports are cut.
        self.cutting_reports = False
        #: How many more granted claims to forward without passing their answer back.
        self.claim_answers_to_drop = 0
        self.heartbeats: list[tuple[float, bool]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="cutter", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        reader, answers = client.makefile("rb"), upstream.makefile("rb")
        try:
            while first := reader.readline():
                head, _, body = _read_message(reader, first)
                cut = self.cutting or (self.cutting_reports and b"/report " in first)
                if first.startswith(b"POST /tasks/heartbeat "):
                    with self._lock:
                        self.heartbeats.append((time.monotonic(), not cut))
                if cut:
                    return
                upstream.sendall(head + body)
                answer_head, _, answer = _read_message(answers, answers.readline())
                granted = answer_head.startswith(b"HTTP/1.1 200")
                if (
                    first.startswith(b"POST /tasks/claim ")
                    and granted
                    and self.claim_answers_to_drop
                ):
                    self.claim_answers_to_drop -= 1
                    return
                client.sendall(answer_head + answer)
        except OSError:
            return
        finally:
            for closing in (reader, answers, client, upstream):
                closing.close()

    def beats(self, since: float, until: float) -> list[float]:
        with self._lock:
            return [at for at, _ in self.heartbeats if since <= at <= until]

    def close(self) -> None:
        self.listener.close()


def test_cut_heartbeats_are_tried_again_every_eighth_of_the_lease_and_the_lease_holds(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    proxy = Cutter(served.port)
    try:
        folder = write_folder(tmp_path / "box-1", proxy.url, graph, GATED, APPROVE)
        supervisor = supervisors.serving(folder)
        start_token(served, "ORDER-1")
        wait_until((folder / "started").exists, "the routine started")
        wait_until(lambda: len(proxy.heartbeats) >= 2, "two heartbeats")

        # 1.5 s of cut connections: three regular heartbeats would fall in it; with the
        # outbox's 1-2-4 s back-off the lease of 2 s would end.
        proxy.cutting = True
        began = time.monotonic()
        time.sleep(1.5)
        proxy.cutting = False
        ended = time.monotonic()
        wait_until(lambda: any(ok and at > ended for at, ok in proxy.heartbeats), "a beat")
        (folder / "gate").touch()
        served.wait_history("ORDER-1", "task_done")

        cut = proxy.beats(began, ended)
        gaps = [later - earlier for earlier, later in itertools.pairwise(cut)]
        assert len(cut) >= 5, cut
        assert max(gaps) < 0.45, gaps
        history = served.history("ORDER-1")
        assert_first_task_ran_once(history)
        failing = [line for line in supervisor.log if "heartbeat" in line]
        assert len(failing) == 2, failing
        assert failing[0].endswith("; trying again in 0.25s"), failing
        assert re.fullmatch(r"a heartbeat reached .* again; \d+ before it failed", failing[1])
    finally:
        proxy.close()


def test_a_finished_task_whose_report_waits_in_the_outbox_keeps_its_lease_until_it_lands(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    proxy = Cutter(served.port)
    try:
        folder = write_folder(tmp_path / "box-1", proxy.url, graph, SUBMITS, APPROVE)
        supervisors.serving(folder)
        proxy.cutting_reports = True
        start_token(served, "ORDER-1")
        served.wait_history("ORDER-1", "task_claimed")
        # Two whole leases in which the routine has ended and only its report cannot land.
        time.sleep(4.0)
        proxy.cutting_reports = False
        served.wait_history("ORDER-1", "task_done", timeout=20)

        history = served.history("ORDER-1")
        assert_first_task_ran_once(history)
    finally:
        proxy.close()


def test_a_claim_whose_answers_are_lost_is_asked_again_before_the_lease_of_its_grant_ends(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    proxy = Cutter(served.port)
    try:
        folder = write_folder(tmp_path / "box-1", proxy.url, graph, SUBMITS, APPROVE)
        supervisors.serving(folder)
        start_token(served, "ORDER-1")  # a first grant: the supervisor learns the lease
        served.wait_history("ORDER-1", "task_done")
        # The claim of the next token is granted, and its answer lost, eight times in a
        # row (a stale connection is tried again at once): the back-off alone (1, 2, 4 s)
        # would outlast the lease of 2 s.
        proxy.claim_answers_to_drop = 8
        start_token(served, "ORDER-2")
        served.wait_history("ORDER-2", "task_done", timeout=20)

        history = served.history("ORDER-2")
        assert_first_task_ran_once(history)
    finally:
        proxy.close()


def test_a_supervisor_that_heartbeats_through_three_leases_without_a_control_plane_loses_nothing(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    folder = write_folder(tmp_path / "box-1", served.url, graph, GATED, APPROVE)
    supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")

    assert served.kill() == -signal.SIGKILL
    time.sleep(6.0)  # three leases of 2 s with no control plane
    again = launcher.serve(graph, db, "--lease", "2s", listen=f"127.0.0.1:{served.port}")
    time.sleep(4.0)  # two more leases, renewed by heartbeats only
    (folder / "gate").touch()
    again.wait_history("ORDER-1", "task_done", timeout=20)

    history = again.history("ORDER-1")
    assert_first_task_ran_once(history)
    assert again.ok("GET", "/tokens/ORDER-1")["state"] == "review"


def at(entry: dict[str, Any]) -> float:
    """When a history entry was written, in seconds, on the control plane's clock."""
    return datetime.fromisoformat(entry["at"].replace("Z", "+00:00")).timestamp()


def claims_of(served: Served, token: str) -> list[tuple[str, int]]:
    return [
        (data["supervisor"], data["attempt"])
        for kind, data in entries(served.history(token), "task_claimed")
    ]


def test_a_forced_stop_gives_its_task_back_and_another_supervisor_claims_it_at_once(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "1m")
    first_folder = write_folder(tmp_path / "box-1", served.url, graph, FOREVER, tasks=1)
    first = supervisors.serving(first_folder)
    start_token(served, "ORDER-1")
    wait_until((first_folder / "started").exists, "the routine started")
    second_folder = write_folder(tmp_path / "box-2", served.url, graph, SUBMITS, name="box-2")
    supervisors.serving(second_folder, "box-2")

    first.send(signal.SIGTERM)
    first.wait_log("stopping: no new tasks; waiting for 1 routine(s) (signal again to stop now)")
    first.send(signal.SIGTERM)
    assert first.wait() == 1
    wait_until(lambda: ("box-2", 2) in claims_of(served, "ORDER-1"), "box-2 claims", 5, 0.02)

    history = served.history("ORDER-1")
    assert entries(history, "task_claimed", "task_failed", "task_retrying")[:4] == [
        ("task_claimed", {"task": 1, "supervisor": "box-1", "attempt": 1}),
        ("task_failed", failure(1, GIVEN_BACK)),
        ("task_retrying", {"task": 1, "attempt": 2}),
        ("task_claimed", {"task": 1, "supervisor": "box-2", "attempt": 2}),
    ]
    given_back = next(at(entry) for entry in history if entry["kind"] == "task_failed")
    claimed = next(
        at(entry)
        for entry in history
        if entry["kind"] == "task_claimed" and entry["data"]["supervisor"] == "box-2"
    )
    assert 0 <= claimed - given_back <= 1.1, claimed - given_back
    assert first.log[-2:] == [
        "stopping now: cancelling 1 routine(s) and giving their tasks back",
        f"task 1 of ORDER-1: reported a failed attempt: {GIVEN_BACK}",
    ]
    assert outbox(first_folder) == []


def test_a_task_given_back_while_the_control_plane_is_down_goes_back_at_the_next_start(
    launcher: Launcher, supervisors: Supervisors, graph: Path, db: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, db, "--lease", "1m")
    folder = write_folder(tmp_path / "box-1", served.url, graph, FOREVER, tasks=1)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")
    served.kill()

    supervisor.send(signal.SIGTERM)
    supervisor.wait_log(re.compile(r"stopping: no new tasks; .*"))
    supervisor.send(signal.SIGTERM)
    assert supervisor.wait() == 1
    assert (
        "task 1 of ORDER-1: the control plane cannot be reached; the report stays in the "
        "outbox for the next start" in supervisor.log
    )
    assert outbox(folder) == [("report", 1, 1, "ORDER-1")]

    again = launcher.serve(graph, db, "--lease", "1m", listen=f"127.0.0.1:{served.port}")
    (folder / "never").touch()
    restarted = supervisors.serving(folder)
    restarted.wait_log(f"task 1 of ORDER-1: reported a failed attempt: {GIVEN_BACK}")
    assert "sending 1 message(s) left in the outbox" in restarted.log
    assert ("task_failed", failure(1, GIVEN_BACK)) in entries(
        again.history("ORDER-1"), "task_failed"
    )


#: A def routine that notes a step every tenth of a second until its task is gone, then
#: tries a note, a memory write and ctx.check(), and says what it saw.
LOOPS = """
from stateous import TaskGone


@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / "started").touch()
    step = 0
    while not ctx.cancelled:
        step += 1
        ctx.note(f"step {step}")
        time.sleep(0.1)
    for late in range(20):
        ctx.note(f"late {late}")
        ctx.memory["late"] = late
    try:
        ctx.check()
    except TaskGone as ex:
        (HERE / "stopped").write_text(str(ex))
    return events.submitted
"""

#: An async routine that waits; cancelled, it says what its context says, and notes.
WAITS = """
from stateous import TaskGone


@on_state(states.draft)
async def draft(ctx: ItemContext) -> events.submitted:
    (HERE / "started").touch()
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        ctx.note("a late note")
        ctx.memory["late"] = 1
        try:
            ctx.check()
        except TaskGone as ex:
            (HERE / "stopped").write_text(f"{ctx.cancelled} {ex}")
        raise
    return events.submitted
"""

DROPPED = (
    "task 1 of ORDER-1: the task is gone (the control plane took it back); the notes and "
    "memory writes of its routine are dropped"
)


@pytest.mark.parametrize("routine", [LOOPS, WAITS], ids=["def", "async def"])
def test_a_routine_whose_token_is_cancelled_sees_it_and_its_late_notes_are_dropped_quietly(
    launcher: Launcher,
    supervisors: Supervisors,
    graph: Path,
    db: Path,
    tmp_path: Path,
    routine: str,
) -> None:
    served = launcher.serve(graph, db, "--lease", "2s")
    folder = write_folder(tmp_path / "box-1", served.url, graph, routine)
    supervisor = supervisors.serving(folder)
    start_token(served, "ORDER-1")
    wait_until((folder / "started").exists, "the routine started")
    time.sleep(0.3)

    served.ok("POST", "/tokens/ORDER-1/cancel")
    stopped = wait_until(
        lambda: (folder / "stopped").exists() and (folder / "stopped").read_text(), "stopped"
    )
    supervisor.wait_log(DROPPED)
    time.sleep(0.5)

    assert stopped.endswith("task 1 of ORDER-1 is gone: the control plane took it back")
    assert [line for line in supervisor.log if "dropped" in line] == [DROPPED]
    assert not [line for line in supervisor.log if "refused" in line]
    assert served.kinds("ORDER-1")[-1] == "cancelled"
    assert "late 0" not in str(served.history("ORDER-1"))
    wait_until(lambda: outbox(folder) == [], "an empty outbox")
    assert supervisor.stop() == 0
