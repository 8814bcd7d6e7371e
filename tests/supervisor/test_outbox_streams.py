"""A busy supervisor keeps its slots full: no task's report waits for another's, and free
slots are claimed for at once while claims are granted.

A real `stateous supervise` process against the fake control plane (`fake_plane.py`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.supervisor.fake_plane import Delayed, FakePlane, grant, json
from tests.supervisor.support import Supervisors, outbox, wait_until, write_folder, write_graph
from tests.supervisor.test_bad_answers import GATED

#: A draft routine that submits at once.
SUBMITS = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    return events.submitted
"""
#: How long the fake control plane holds the answer to the first report.
HELD = 20.0
#: Tasks granted one claim after another, each to a slot of its own.
GRANTED = 6


def ran(folder: Path) -> list[Path]:
    """The notes of the routines that began."""
    return sorted(folder.glob("ran-*"))


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


def test_a_report_held_by_the_control_plane_holds_back_no_other_tasks_report(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    plane = FakePlane(
        graph,
        claims=[json(grant(1, "ORDER-1")), json(grant(2, "ORDER-2"))],
        report_answers=[Delayed(HELD, json({}))],
    )
    try:
        folder = write_folder(tmp_path / "box-1", plane.url, graph, SUBMITS, tasks=4)
        supervisor = supervisors.serving(folder)
        wait_until(lambda: plane.reported(1), "the report of task 1", 15)
        first = time.monotonic()

        wait_until(lambda: plane.reported(2), "the report of task 2", 15)
        assert time.monotonic() - first < HELD / 2
        supervisor.wait_log("task 2 of ORDER-2: reported submitted")
        assert not any("task 1 of ORDER-1: reported" in line for line in supervisor.log)

        plane.closing.set()  # the held answer goes now
        supervisor.wait_log("task 1 of ORDER-1: reported submitted")
        assert [task for task, _ in plane.seen.reports] == [1, 2]
        assert supervisor.stop() == 0
        assert outbox(folder) == []
    finally:
        plane.close()


def test_free_slots_are_claimed_for_at_once_while_claims_are_granted(
    supervisors: Supervisors, tmp_path: Path, graph: Path
) -> None:
    # A supervisor whose tasks run waits for a report's `next` or a pause of half a second
    # to a second before it claims again, but only after a claim that got nothing.
    grants = [json(grant(task, f"ORDER-{task}")) for task in range(1, GRANTED + 1)]
    plane = FakePlane(graph, claims=grants)
    try:
        folder = write_folder(tmp_path / "box-1", plane.url, graph, GATED, tasks=GRANTED)
        supervisor = supervisors.serving(folder)
        wait_until(lambda: ran(folder), "the first routine", 15)
        first = time.monotonic()

        wait_until(lambda: len(ran(folder)) == GRANTED, "every routine", 15)
        assert time.monotonic() - first < 2.0  # one pause each would take 2.5 s at least
        (folder / "gate").touch()
        for task in range(1, GRANTED + 1):
            supervisor.wait_log(f"task {task} of ORDER-{task}: reported submitted")
        assert supervisor.stop() == 0
        assert outbox(folder) == []
    finally:
        plane.close()
