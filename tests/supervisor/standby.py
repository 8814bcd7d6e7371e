"""A standby control plane that takes over from a killed primary, with a supervisor that
moves to it: the scenario of the SQLite and the Postgres tests.

`serve --standby` prints one `standby on URL: ...` line while it waits for the
database, then `took over ...` and the usual `serving on URL` line once it holds it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tests.control.serving import START_TIMEOUT, Launcher, Served, ServeFailed
from tests.supervisor.support import Supervisors, wait_until, write_folder

STANDBY = re.compile(
    r"^standby on (http://(\S+):(\d+)): another control plane serves the database; "
    r"waiting to take it over \(Ctrl-C stops\)$"
)
TOOK_OVER = "took over the database: the control plane that served it is gone"
#: The longest a standby may take to serve after its primary was killed, in seconds.
TAKEOVER = 2.0

#: A draft routine that notes `one`, waits for the file `gate`, notes `two` and `three`,
#: then submits; review approves.
NOTED = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    ctx.note("one")
    while not (HERE / "gate").exists():
        time.sleep(0.02)
    ctx.note("two")
    ctx.note("three")
    return events.submitted


@on_state(states.review)
def review(ctx: ItemContext) -> events.reviewed:
    return events.reviewed(Verdict(approved=True))
"""


def standby(launcher: Launcher, graph: Path, *options: str) -> Served:
    """Start `serve GRAPH OPTIONS --standby` and wait for its `standby on` line."""
    served = launcher.spawn(graph, None, *options, "--standby")
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        line = served.next_line(max(0.0, deadline - time.monotonic()))
        if line is None:
            raise ServeFailed(f"the standby ended instead of waiting: {served.lines}")
        found = STANDBY.match(line)
        if found:
            served.url, served.host, served.port = found[1], found[2], int(found[3])
            return served


def health(served: Served) -> tuple[int, Any]:
    """The status and body of `GET /health`; (0, None) while nothing answers."""
    try:
        return served.request("GET", "/health")
    except OSError:
        return 0, None


def write_urls(folder: Path, *urls: str) -> None:
    """Name several control planes in the folder's stateous.yaml, as a YAML list."""
    listed = "".join(f'  - "{url}"\n' for url in urls)
    (folder / "stateous.yaml").write_text(f"url:\n{listed}tasks: 2\nname: box-1\n")


def check_standby_answers(served: Served) -> None:
    """Every route of a standby answers 503 `not_serving`, /health with a line that says why."""
    status, body = health(served)
    assert status == 503
    assert body == {
        "error": "this control plane is a standby: it waits for the database, "
        "which another control plane serves",
        "code": "not_serving",
    }
    for method, path in (("GET", "/tokens/ORDER-1"), ("POST", "/tasks/claim")):
        status, body = served.request(method, path, {})
        assert (status, body["code"]) == (503, "not_serving")


def take_over(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path, *db: str
) -> None:
    """Primary and standby on one database; a supervisor with both URLs works on a token;
    kill -9 the primary; the standby serves within `TAKEOVER` seconds, the supervisor's
    notes and report reach it in order, and the token ends."""
    primary = launcher.serve(graph, None, *db)
    second = standby(launcher, graph, *db)
    check_standby_answers(second)

    folder = write_folder(tmp_path / "box-1", primary.url, graph, NOTED)
    write_urls(folder, primary.url, second.url)
    supervisor = supervisors.serving(folder)
    status, body = primary.request(
        "POST", "/tokens", {"token": "ORDER-1", "context": {"title": "x"}}
    )
    assert status == 201, body
    primary.wait_history("ORDER-1", "note", timeout=15, every=0.05)

    killed = time.monotonic()
    primary.kill()
    (folder / "gate").touch()
    wait_until(lambda: health(second)[0] == 200, "the standby serves", timeout=10, every=0.02)
    took = time.monotonic() - killed
    assert took < TAKEOVER, f"the standby took {took:.2f} s to serve"
    second.wait_serving()
    assert TOOK_OVER in second.lines

    wait_until(
        lambda: second.ok("GET", "/tokens/ORDER-1")["status"] == "completed",
        "ORDER-1 completed on the standby",
        timeout=20,
    )
    history = second.history("ORDER-1")
    notes = [entry["data"]["text"] for entry in history if entry["kind"] == "note"]
    assert notes == ["one", "two", "three"]
    shown = [
        entry["data"].get("text") or entry["data"].get("event")
        for entry in history
        if entry["kind"] in ("note", "event_accepted")
    ]
    assert shown[1:5] == ["one", "two", "three", "submitted"]
    claims = [entry for entry in history if entry["kind"] == "task_claimed"]
    assert len(claims) == 2  # draft and review, each once: nothing was tried again
    assert supervisor.stop() == 0
