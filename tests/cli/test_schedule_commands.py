"""`stateous schedule add|list|pause|resume|remove` against a real control plane whose graph
file declares a schedule too; a graph schedule whose name an added one holds stops serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.control.serving import Launcher, write_graph
from tests.control.test_schedules import scheduled


def test_the_schedule_commands_and_the_graph_s_schedule_beside_them(
    tmp_path: Path, launcher: Launcher, stateous: Any
) -> None:
    graph = tmp_path / "jobs.json"
    write_graph(graph, scheduled(nightly={"cron": "0 3 * * *", "tz": "Europe/Paris"}))
    served = launcher.serve(graph, tmp_path / "db.sqlite")
    url = ("--url", served.url)

    added = stateous(
        "schedule", "add", "hourly", "0 * * * *", "--context", '{"kind": "h"}',
        "--overlap", "allow", *url,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("hourly  '0 * * * *' UTC  added  overlap=allow catch_up=latest")
    listing = stateous("schedule", "list", *url).stdout.splitlines()
    assert [line.split()[0] for line in listing] == ["hourly", "nightly"]
    assert "'0 3 * * *' Europe/Paris  flow  overlap=skip catch_up=latest  next " in listing[1]

    paused = stateous("schedule", "pause", "nightly", *url)
    assert paused.stdout.rstrip().endswith("catch_up=latest  paused")
    refused = stateous("schedule", "remove", "nightly", *url)
    assert refused.returncode == 1
    assert refused.stderr == (
        f"error: the control plane at {served.url} refused (409): schedule 'nightly' comes "
        "from the graph file; pause it, or serve a graph file without it\n"
    )
    assert stateous("schedule", "resume", "nightly", *url).returncode == 0
    bad = stateous("schedule", "add", "weekly", "0 3 * * someday", *url)
    assert bad.returncode == 1
    assert "cron: the day of the week field: 'someday' is not a number or a name" in bad.stderr
    assert stateous("schedule", "remove", "hourly", *url).returncode == 0
    assert [line.split()[0] for line in stateous("schedule", "list", *url).stdout.splitlines()] == [
        "nightly"
    ]
    assert served.stop() == 0


def test_serve_refuses_a_graph_schedule_whose_name_was_added_at_run_time(
    tmp_path: Path, launcher: Launcher, stateous: Any
) -> None:
    graph = tmp_path / "jobs.json"
    db = tmp_path / "db.sqlite"
    write_graph(graph, scheduled())
    served = launcher.serve(graph, db)
    assert stateous("schedule", "add", "nightly", "0 3 * * *", "--context", '{"kind": "n"}',
                    "--url", served.url).returncode == 0  # fmt: skip
    assert served.stop() == 0
    write_graph(graph, scheduled(nightly={"cron": "0 4 * * *"}))
    code, lines, _ = launcher.refused(graph, db)
    assert code == 1
    assert lines[-1] == (
        "error: the graph file declares schedule 'nightly', which was added at run time; "
        "remove that one first (stateous schedule remove nightly)"
    )
