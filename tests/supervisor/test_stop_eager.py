"""Stops of a supervisor whose reports ask for its next task (eager dispatch): real
`stateous serve` and `stateous supervise` processes over real HTTP, with a proxy between
them where an answer must come late or be refused.

A supervisor that stops asks for no new task: a report it sends from then on asks for
none, and a task granted in the answer of a report that asked before the stop runs to its
end, as every task it holds does, before the supervisor exits. A stop ends the supervisor
whatever holds its slots, even a report that cannot be sent before the exit.
"""

from __future__ import annotations

import re
import signal
import textwrap
from pathlib import Path

import pytest

from stateous.compiler.compile import compile_workflow
from stateous.model.graph_file import dump
from tests.control.serving import Launcher, Served
from tests.supervisor.support import ClaimDropper, Supervisors, outbox, wait_until
from tests.supervisor.test_eager import STEPS, five_steps, write_folder
from tests.supervisor.test_supervise_process import entries

HEADER = """\
from __future__ import annotations

import time
from pathlib import Path

from stateous import on_state

from contract import JobContext, events, states

HERE = Path(__file__).resolve().parent
"""


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "steps.json"
    path.write_bytes(dump(compile_workflow(five_steps())))
    return path


def write_steps(folder: Path, url: str, graph: Path, *, tasks: int, **bodies: str) -> Path:
    """A folder of `steps` whose routines say `done`, after the lines of `bodies` (by step)."""
    write_folder(folder, url, graph, tasks=tasks)
    routines = [HEADER]
    for name in STEPS:
        body = textwrap.indent(textwrap.dedent(bodies.get(name, "")) + "return events.done", "    ")
        routines.append(f"\n@on_state(states.{name})\ndef {name}(ctx: JobContext) -> events.done:")
        routines.append(body + "\n")
    (folder / "routines.py").write_text("\n".join(routines))
    return folder


#: A step's routine that leaves a file named after its step, to say that it started.
MARKS = """
(HERE / f"{ctx.state} started").touch()
"""


def start_run(served: Served, token: str) -> None:
    status, body = served.request("POST", "/tokens", {"token": token, "context": {"title": "t"}})
    assert status == 201, body


def test_a_task_granted_in_a_report_answer_after_a_stop_runs_to_its_end_before_the_exit(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "steps.sqlite", "--lease", "1m")
    proxy = ClaimDropper(served.port, losing=None, hold=1.0)  # each report asking `next`: 1 s
    try:
        folder = write_steps(tmp_path / "box-1", proxy.url, graph, tasks=2, step2=MARKS)
        supervisor = supervisors.serving(folder)
        start_run(served, "RUN-1")
        wait_until(lambda: proxy.reports, "the report of step1 on its way")
        supervisor.send(signal.SIGTERM)
        assert supervisor.wait(10) == 0
    finally:
        proxy.close()

    # Run and reported, not abandoned to its lease of a minute, nor failed; its report,
    # sent during the stop, asked for no next task.
    assert (folder / "step2 started").exists()
    assert "task 2 of RUN-1: reported done" in supervisor.log
    assert entries(served.history("RUN-1"), "task_claimed", "task_failed") == [
        ("task_claimed", {"task": 1, "supervisor": "box-1", "attempt": 1}),
        ("task_claimed", {"task": 2, "supervisor": "box-1", "attempt": 1}),
    ]
    assert [("next" in report) for report in proxy.reports] == [True, False]
    assert served.ok("GET", "/tokens/RUN-1")["state"] == "step3"
    assert outbox(folder) == []


def test_a_report_sent_again_at_a_stop_after_the_database_was_busy_asks_for_no_next_task(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    served = launcher.serve(graph, tmp_path / "steps.sqlite", "--lease", "1m")
    proxy = ClaimDropper(served.port, losing=None, busy=1)
    try:
        folder = write_steps(tmp_path / "box-1", proxy.url, graph, tasks=2, step2=MARKS)
        supervisor = supervisors.serving(folder)
        start_run(served, "RUN-1")
        wait_until(lambda: proxy.reports, "the report of step1 refused as busy")
        supervisor.send(signal.SIGTERM)  # in the second the report waits to go again
        assert supervisor.wait(10) == 0
    finally:
        proxy.close()

    assert ["next" in report for report in proxy.reports] == [True, False]
    assert "task 1 of RUN-1: reported done" in supervisor.log
    # Nothing was granted: no attempt of step2 was taken, nor failed.
    assert entries(served.history("RUN-1"), "task_claimed", "task_failed") == [
        ("task_claimed", {"task": 1, "supervisor": "box-1", "attempt": 1}),
    ]
    assert not (folder / "step2 started").exists()
    assert outbox(folder) == []


#: step1 waits for the file `gate`, then notes, and says done a moment later.
NOTES_AT_GATE = """
(HERE / "started").touch()
while not (HERE / "gate").exists():
    time.sleep(0.02)
ctx.note("hi")
time.sleep(0.2)
"""


def test_a_stop_while_the_control_plane_is_down_ends_though_a_report_holds_the_only_slot(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "steps.sqlite"
    served = launcher.serve(graph, db)
    folder = write_steps(tmp_path / "box-1", served.url, graph, tasks=1, step1=NOTES_AT_GATE)
    supervisor = supervisors.serving(folder)
    start_run(served, "RUN-1")
    wait_until((folder / "started").exists, "step1 started")
    served.kill()
    (folder / "gate").touch()
    supervisor.wait_log(re.compile(r"cannot reach the control plane at .*; trying again in 1s"))
    # The note waits to be sent again, and the report behind it carries the one slot.
    wait_until(lambda: len(outbox(folder)) == 2, "the report kept behind the note")

    supervisor.send(signal.SIGTERM)
    assert supervisor.wait(5) == 0
    assert (
        "task 1 of RUN-1: the control plane cannot be reached; the note stays in the outbox "
        "for the next start" in supervisor.log
    )
    assert outbox(folder) == [("note", 1, 1, "RUN-1"), ("report", 1, 1, "RUN-1")]

    again = launcher.serve(graph, db, listen=f"127.0.0.1:{served.port}")
    restarted = supervisors.serving(folder)
    restarted.wait_log("task 1 of RUN-1: reported done")
    assert "sending 2 message(s) left in the outbox" in restarted.log
    assert ("note", {"task": 1, "text": "hi"}) in entries(again.history("RUN-1"), "note")
    assert restarted.stop() == 0
