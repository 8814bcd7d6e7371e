"""A supervisor carries a secret from `token_file:` in stateous.yaml or `STATEOUS_TOKEN`.

A real `stateous supervise` process talks to a recording server in front of a real
`stateous serve`, which keeps the `Authorization` header of every request, and
moves a token to its end. The secret is in none of the supervisor's log lines nor
in its arguments. A token file or CA file that cannot be used stops the start
with one line that names the file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stateous.supervisor.folder import read_settings
from tests.client.recording import BEARER, SECRET, Recorder
from tests.conftest import run_stateous
from tests.control.serving import Launcher, Served
from tests.supervisor.support import (
    APPROVE,
    Supervisors,
    outbox,
    wait_until,
    write_folder,
    write_graph,
)


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path)
    return path


@pytest.fixture
def served(launcher: Launcher, graph: Path, tmp_path: Path) -> Served:
    return launcher.serve(graph, tmp_path / "orders.sqlite")


@pytest.fixture
def recorder(served: Served) -> Iterator[Recorder]:
    recording = Recorder(served.port)
    try:
        yield recording
    finally:
        recording.close()


def add_settings(folder: Path, *lines: str) -> None:
    with (folder / "stateous.yaml").open("a") as settings:
        settings.writelines(line + "\n" for line in lines)


def arguments(pid: int) -> str:
    """The command line of a running process, as `ps` shows it."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("source", ["token_file", "STATEOUS_TOKEN"])
def test_a_supervisor_sends_its_secret_on_every_request_and_never_shows_it(
    served: Served,
    recorder: Recorder,
    supervisors: Supervisors,
    graph: Path,
    tmp_path: Path,
    source: str,
) -> None:
    folder = write_folder(tmp_path / "box-1", recorder.url, graph)
    env = {"STATEOUS_TOKEN": ""}
    if source == "token_file":
        (folder / "secret").write_text(SECRET + "\n")
        add_settings(folder, "token_file: secret")
    else:
        env["STATEOUS_TOKEN"] = SECRET
    supervisor = supervisors.serving(folder, env=env)

    served.ok("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "an order"}})
    wait_until(
        lambda: served.ok("GET", "/tokens/ORDER-1")["status"] == "completed", "completed", 15
    )
    running = arguments(supervisor.process.pid)
    assert supervisor.stop() == 0

    paths = {(seen.method, seen.path) for seen in recorder.requests()}
    assert {("GET", "/health"), ("POST", "/tasks/claim"), ("POST", "/tasks/1/report")} <= paths
    assert recorder.authorizations() == {BEARER}
    assert "task 2 of ORDER-1: reported reviewed" in supervisor.log
    assert not [line for line in supervisor.lines if SECRET in line]
    assert SECRET not in running


def test_the_secret_is_not_in_the_repr_of_the_supervisors_settings(
    graph: Path, tmp_path: Path
) -> None:
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)
    (folder / "secret").write_text(SECRET)
    add_settings(folder, "token_file: secret")

    settings = read_settings(folder)

    assert SECRET not in repr(settings)
    assert SECRET not in str(settings)


@pytest.mark.parametrize(
    ("setting", "content", "says"),
    [
        ("token_file", None, "the token file {path} cannot be read: No such file or directory"),
        ("token_file", "", "the token file {path} is empty"),
        (
            "token_file",
            f"{SECRET}\nsecond line\n",
            "the token file {path} holds more than one line",
        ),
        ("ca_file", None, "the CA file {path} cannot be read: No such file or directory"),
        ("ca_file", f"{SECRET}\n", "the CA file {path} holds no certificate"),
    ],
    ids=["missing-token", "empty-token", "two-lines", "missing-ca", "not-a-certificate"],
)
def test_a_token_file_or_ca_file_that_cannot_be_used_refuses_to_start_with_one_line(
    supervisors: Supervisors,
    graph: Path,
    tmp_path: Path,
    setting: str,
    content: str | None,
    says: str,
) -> None:
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)
    add_settings(folder, f"{setting}: kept/file.txt")
    path = folder / "kept" / "file.txt"
    if content is not None:
        path.parent.mkdir()
        path.write_text(content)

    code, lines = supervisors.refused(folder)

    assert code == 1
    (line,) = lines
    assert line.startswith("error: " + says.format(path=path)), line
    assert SECRET not in line


GATED = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    (HERE / "started").touch()
    while not (HERE / "gate").exists():
        time.sleep(0.02)
    return events.submitted
"""


def credential(db: Path, folder: Path, name: str, role: str, *options: str) -> str:
    done = run_stateous(
        "auth", "add", name, "--role", role, *options, "--db", f"sqlite:///{db}", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_revoked_supervisors_report_stays_in_the_outbox_until_a_good_secret_is_given(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "guarded.sqlite"
    ops = credential(db, tmp_path, "ops", "operator")
    box = credential(db, tmp_path, "box", "supervisor", "--supervisor-name", "box-1")
    served = launcher.serve(graph, db, "--lease", "1m")
    operator = {"Authorization": f"Bearer {ops}"}
    folder = write_folder(tmp_path / "box-1", served.url, graph, GATED, APPROVE)
    (folder / "secret").write_text(box + "\n")
    add_settings(folder, "token_file: secret")
    supervisor = supervisors.serving(folder, env={"STATEOUS_TOKEN": ""})
    body = {"token": "ORDER-1", "context": {"title": "an order"}}
    assert served.request("POST", "/tokens", body, operator)[0] == 201
    wait_until((folder / "started").exists, "the routine started")

    assert (
        run_stateous("auth", "revoke", "box", "--db", f"sqlite:///{db}", cwd=tmp_path).returncode
        == 0
    )
    (folder / "gate").touch()

    line = supervisor.wait_log(
        re.compile(r"the control plane refuses this supervisor's credential.*")
    )
    # Said once, by whichever is refused first: the report, or a claim sent beside it.
    assert "(unauthorized: " in line
    assert "its messages stay in the outbox" in line or "it claims no task" in line
    assert box not in "\n".join(supervisor.log)
    assert outbox(folder) == [("report", 1, 1, "ORDER-1")]
    assert supervisor.stop() == 0
    assert outbox(folder) == [("report", 1, 1, "ORDER-1")]
    refused_lines = [
        text for text in supervisor.log if "refuses this supervisor's credential (" in text
    ]
    assert len(refused_lines) == 1
    assert supervisor.log[-1] == (
        "task 1 of ORDER-1: the control plane refuses this supervisor's credential; the "
        "report stays in the outbox for a start with a good one"
    )

    again_secret = credential(db, tmp_path, "box-2", "supervisor", "--supervisor-prefix", "box-")
    (folder / "secret").write_text(again_secret + "\n")
    again = supervisors.serving(folder, env={"STATEOUS_TOKEN": ""})
    wait_until(lambda: outbox(folder) == [], "an empty outbox", 15)
    status, token = served.request("GET", "/tokens/ORDER-1", headers=operator)
    assert status == 200 and token["state"] in ("review", "__end__")
    assert again.stop() == 0


def test_a_supervisor_without_its_secret_claims_nothing_and_says_why_once(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "guarded.sqlite"
    ops = credential(db, tmp_path, "ops", "operator")
    served = launcher.serve(graph, db)
    operator = {"Authorization": f"Bearer {ops}"}
    body = {"token": "ORDER-1", "context": {"title": "an order"}}
    assert served.request("POST", "/tokens", body, operator)[0] == 201
    folder = write_folder(tmp_path / "box-1", served.url, graph)
    supervisor = supervisors.serving(folder, env={"STATEOUS_TOKEN": ""})

    line = supervisor.wait_log(re.compile(r"the control plane refuses this supervisor's .*"))
    assert "(unauthorized: " in line and "it claims no task" in line
    time.sleep(1.5)
    assert served.request("GET", "/tokens/ORDER-1", headers=operator)[1]["state"] == "draft"
    assert supervisor.stop() == 0
    assert sum("refuses this supervisor's credential" in text for text in supervisor.log) == 1


def test_a_refusal_that_echoes_the_secret_is_logged_with_the_secret_redacted(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "guarded.sqlite"
    credential(db, tmp_path, "ops", "operator")
    served = launcher.serve(graph, db)
    echoing = Recorder(served.port, echo=True)
    secret = "stq_Echoed-Secret_0123456789"
    try:
        folder = write_folder(tmp_path / "box-1", echoing.url, graph)
        supervisor = supervisors.serving(folder, env={"STATEOUS_TOKEN": secret})
        line = supervisor.wait_log(re.compile(r"the control plane refuses this supervisor's .*"))
        assert "(the request had Authorization: Bearer [redacted])" in line
        assert supervisor.stop() == 0
    finally:
        echoing.close()
    assert not [text for text in supervisor.log if "Echoed-Secret" in text]


NOTING = """
@on_state(states.draft)
def draft(ctx: ItemContext) -> events.submitted:
    ctx.note("drafted")
    ctx.memory["seen"] = 1
    return events.submitted
"""


def test_a_supervisor_names_itself_on_its_notes_and_memory_writes(
    launcher: Launcher, supervisors: Supervisors, graph: Path, tmp_path: Path
) -> None:
    db = tmp_path / "guarded.sqlite"
    ops = credential(db, tmp_path, "ops", "operator")
    box = credential(db, tmp_path, "box-1", "supervisor")
    served = launcher.serve(graph, db)
    operator = {"Authorization": f"Bearer {ops}"}
    folder = write_folder(tmp_path / "box-1", served.url, graph, NOTING, APPROVE)
    (folder / "secret").write_text(box + "\n")
    add_settings(folder, "token_file: secret")
    supervisor = supervisors.serving(folder, env={"STATEOUS_TOKEN": ""})
    body = {"token": "ORDER-1", "context": {"title": "an order"}}
    assert served.request("POST", "/tokens", body, operator)[0] == 201

    wait_until(
        lambda: (
            served.request("GET", "/tokens/ORDER-1", headers=operator)[1]["status"] == "completed"
        ),
        "completed",
        15,
    )
    assert supervisor.stop() == 0
    history = served.request("GET", "/tokens/ORDER-1/history", headers=operator)[1]
    written = [(entry["kind"], entry["data"].get("text")) for entry in history]
    assert ("note", "drafted") in written and ("memory_set", None) in written
    assert not [line for line in supervisor.log if "forbidden" in line]
