"""`stateous token list` and `stateous tasks` run as real processes against a real `serve`.

The expected lines take each row's times from the API's own answers; the columns are
written out in full, so that a misaligned column or a local time is seen.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stateous.model.sentences import utc
from tests.cli.test_token_commands import sdlc
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served, write_graph


class Lister:
    """Runs the listing commands against one served control plane."""

    def __init__(self, served: Served, folder: Path) -> None:
        self.served = served
        self.folder = folder

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return run_stateous(
            *args, "--url", self.served.url, cwd=self.folder, env={"TZ": "Asia/Kolkata"}
        )

    def lines(self, *args: str) -> list[str]:
        result = self.run(*args)
        assert (result.returncode, result.stderr) == (0, "")
        return result.stdout.splitlines()

    def error(self, *args: str) -> str:
        result = self.run(*args)
        assert (result.returncode, result.stdout) == (1, "")
        [only] = result.stderr.splitlines()
        return only

    def start(self, *tokens: str) -> list[dict[str, Any]]:
        return [
            self.served.ok("POST", "/tokens", {"token": token, "context": {"repo": "acme/api"}})
            for token in tokens
        ]


@pytest.fixture
def lister(launcher: Launcher, tmp_path: Path) -> Lister:
    graph = tmp_path / "sdlc.json"
    write_graph(graph, sdlc())
    return Lister(launcher.serve(graph, tmp_path / "sdlc.sqlite"), tmp_path)


def test_token_list_prints_aligned_lines_most_recently_moved_first(lister: Lister) -> None:
    started = lister.start("TICKET-1", "TICKET-22")
    lister.served.ok("POST", "/tokens/TICKET-1/events/done")
    lister.served.ok("POST", "/tokens/TICKET-22/pause")
    one, two = (lister.served.ok("GET", f"/tokens/{token['token']}") for token in started)
    assert lister.lines("token", "list") == [
        "TOKEN      STATE    STATUS  VISIT  ENTERED (UTC)        PARENT",
        f"TICKET-22  coding   paused  1      {utc(two['entered_at'])}",
        f"TICKET-1   testing  active  1      {utc(one['entered_at'])}",
    ]
    assert [line.split()[0] for line in lister.lines("token", "list", "--limit", "1")] == [
        "TOKEN",
        "TICKET-22",
    ]
    assert lister.lines("token", "list", "--status", "active", "--state", "testing")[1:] == [
        f"TICKET-1  testing  active  1      {utc(one['entered_at'])}"
    ]
    assert lister.lines("token", "list", "--state", "nowhere") == ["no tokens match"]


def test_token_list_json_is_one_document_of_the_apis_tokens(lister: Lister) -> None:
    lister.start("A-1", "A-2", "A-3")
    document = json.loads(lister.run("token", "list", "--json", "--limit", "2").stdout)
    assert document == lister.served.ok("GET", "/tokens?limit=2")
    assert [token["token"] for token in document] == ["A-3", "A-2"]


def test_tasks_prints_the_live_tasks_oldest_first_with_their_supervisor(lister: Lister) -> None:
    lister.start("T-1", "T-2")
    grant = lister.served.ok("POST", "/tasks/claim", {"supervisor": "box-1", "states": ["coding"]})
    lines = lister.lines("tasks")
    heading = "TASK  TOKEN  STATE   STATUS   ATTEMPT  SUPERVISOR  AGE  LEASE (UTC)          WAITS"
    assert lines[0] == heading
    [listed] = lister.served.ok("GET", "/tasks?status=claimed")
    assert lines[1].split()[:6] == ["1", "T-1", "coding", "claimed", "1", "box-1"]
    assert lines[1].endswith(utc(listed["lease_until"]))
    assert lines[2].split()[:5] == ["2", "T-2", "coding", "queued", "0"]
    assert len(lines) == 3 and grant["task"] == 1
    assert lister.lines("tasks", "--status", "queued")[1].split()[:2] == ["2", "T-2"]
    assert lister.lines("tasks", "--older-than", "1h") == ["no live tasks match"]
    document = json.loads(lister.run("tasks", "--json", "--status", "claimed").stdout)
    assert [(task["task"], task["supervisor"]) for task in document] == [(1, "box-1")]


def test_bad_filters_are_one_error_line(lister: Lister) -> None:
    url = lister.served.url
    assert lister.error("tasks", "--status", "done") == (
        f"error: the control plane at {url} refused (422): "
        "status must be one of queued, claimed, waiting"
    )
    assert lister.error("tasks", "--older-than", "soon").startswith(
        f"error: the control plane at {url} refused (422): older_than: 'soon' is not a duration"
    )
    assert lister.error("token", "list", "--status", "done").startswith(
        f"error: the control plane at {url} refused (422): status must be one of active"
    )
    assert lister.error("token", "list", "--limit", "0") == (
        "error: --limit must be a whole number from 1, not '0'"
    )


def test_resource_list_says_so_when_no_workflow_declares_a_resource(lister: Lister) -> None:
    assert lister.lines("resource", "list") == ["no resources: no workflow served declares one"]
