"""A standby `serve` on the same Postgres schema takes over from a killed primary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.control.serving import Launcher
from tests.supervisor.standby import take_over
from tests.supervisor.support import Supervisors, write_graph


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


def test_a_standby_serves_within_2_seconds_of_a_kill_9_and_the_supervisor_moves_to_it(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path, url: str
) -> None:
    take_over(launcher, supervisors, graph, tmp_path, "--db", url)
