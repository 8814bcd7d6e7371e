"""A standby `serve` on the same SQLite file takes over from a killed or stopped primary."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stateous.supervisor.folder import FolderError, read_settings
from tests.control.serving import Launcher
from tests.supervisor.standby import (
    TAKEOVER,
    TOOK_OVER,
    health,
    standby,
    take_over,
    write_urls,
)
from tests.supervisor.support import Supervisors, wait_until, write_folder, write_graph


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


def test_a_standby_serves_within_2_seconds_of_a_kill_9_and_the_supervisor_moves_to_it(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    take_over(launcher, supervisors, graph, tmp_path, "--db", f"sqlite:///{tmp_path / 'o.db'}")


def test_a_standby_takes_over_from_a_primary_that_stops_gracefully(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    db = ("--db", f"sqlite:///{tmp_path / 'o.db'}")
    primary = launcher.serve(graph, None, *db)
    second = standby(launcher, graph, *db)
    stopped = time.monotonic()
    assert primary.stop() == 0
    wait_until(lambda: health(second)[0] == 200, "the standby serves", timeout=10, every=0.02)
    assert time.monotonic() - stopped < TAKEOVER
    second.wait_serving()
    assert TOOK_OVER in second.lines
    assert second.stop() == 0


def test_a_standby_with_nobody_serving_serves_at_once_and_one_that_waits_stops_on_sigterm(
    launcher: Launcher, graph: Path, tmp_path: Path
) -> None:
    db = ("--db", f"sqlite:///{tmp_path / 'o.db'}")
    first = launcher.serve(graph, None, *db, "--standby")
    assert TOOK_OVER not in first.lines
    code, lines, _ = launcher.refused(graph, None, *db)
    assert (code, lines) == (
        1,
        ["error: another control plane serves this database; stop it first"],
    )
    waiting = standby(launcher, graph, *db)
    assert waiting.stop() == 0
    assert waiting.lines[-1] == "stopped"
    assert first.stop() == 0


def test_stateous_yaml_takes_url_as_a_list_and_names_what_is_wrong(
    graph: Path, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)
    write_urls(folder, "http://a:8080/", "http://b:8080")
    assert read_settings(folder).urls == ("http://a:8080", "http://b:8080")

    settings = folder / "stateous.yaml"
    for url, shown in (
        ("[]", "[]"),
        ('["http://a:8080", 3]', "3"),
        ('["http://a:8080", "b:8080"]', "'b:8080'"),
    ):
        settings.write_text(f"url: {url}\n")
        with pytest.raises(FolderError) as refused:
            read_settings(folder)
        assert str(refused.value) == (
            f"{settings}: url must be an http:// or https:// address, or a list of them, "
            f"not {shown}"
        )
