"""`stateous workflow list|show` against real `serve` processes of two graph versions served
one after the other on one SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from stateous.model.graph_file import checksum
from tests.conftest import run_stateous
from tests.control.serving import Launcher, orders, write_graph


def test_workflow_list_names_each_version_with_its_live_tokens_and_show_prints_an_old_one(
    launcher: Launcher, tmp_path: Path
) -> None:
    db = tmp_path / "orders.sqlite"
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old = checksum(write_graph(old_path, orders()))
    new = checksum(write_graph(new_path, orders(extra_state=True)))
    first = launcher.serve(old_path, db)
    first.ok("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "a"}})
    assert first.stop() == 0
    second = launcher.serve(new_path, db)

    listed = run_stateous("workflow", "list", "--url", second.url, cwd=tmp_path)
    shown = run_stateous("workflow", "show", old, "--url", second.url, cwd=tmp_path)
    missing = run_stateous("workflow", "show", "sha256:00", "--url", second.url, cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split("  ")[:3] for line in lines] == [
        [old, "orders", "1 live"],
        [new, "orders", "0 live"],
    ]
    assert lines[1].endswith("(served now)") and not lines[0].endswith("(served now)")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == json.loads(old_path.read_bytes())
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        f"error: the control plane at {second.url} refused (404): this database keeps no "
        "graph file of checksum 'sha256:00'\n"
    )


def test_token_show_says_which_supervisors_a_queued_task_of_an_older_version_waits_for(
    launcher: Launcher, tmp_path: Path
) -> None:
    db = tmp_path / "orders.sqlite"
    old_path, new_path = tmp_path / "old.json", tmp_path / "new.json"
    old = checksum(write_graph(old_path, orders()))
    write_graph(new_path, orders(extra_state=True))
    first = launcher.serve(old_path, db)
    first.ok("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "a"}})
    assert first.stop() == 0
    second = launcher.serve(new_path, db)
    second.ok("POST", "/tokens", {"token": "ORDER-2", "context": {"title": "b"}})

    shown = run_stateous("token", "show", "ORDER-1", "--url", second.url, cwd=tmp_path)
    new = run_stateous("token", "show", "ORDER-2", "--url", second.url, cwd=tmp_path)
    claim = {"supervisor": "plain", "states": ["draft"]}
    assert second.request("POST", "/tasks/claim", claim)[0] == 200  # ORDER-1's, the oldest
    claimed = run_stateous("token", "show", "ORDER-1", "--url", second.url, cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:3] == [
        "ORDER-1: draft, active",
        "accepts now: submitted",
        f"waits for a supervisor of {old} or one whose draft has the same contract",
    ]
    assert lines[3].startswith("-- ")
    assert not [line for line in new.stdout.splitlines() if line.startswith("waits for")]
    assert not [line for line in claimed.stdout.splitlines() if line.startswith("waits for")]
