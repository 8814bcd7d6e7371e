"""The token commands carry a secret from `--token-file PATH` or `STATEOUS_TOKEN`, never shown.

Real commands (`python -m stateous token ...`) talk to a recording server in front
of a real `stateous serve`, which keeps the `Authorization` header of every
request. There is no option that takes the secret itself: one given on the
command line would show in the list of processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.recording import BEARER, SECRET, Recorder
from tests.conftest import run_stateous
from tests.control.serving import Launcher, orders, write_graph
from tests.supervisor.support import write_folder
from tests.supervisor.test_credentials import credential


@pytest.fixture
def recorder(launcher: Launcher, tmp_path: Path) -> Iterator[Recorder]:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    recording = Recorder(served.port)
    try:
        yield recording
    finally:
        recording.close()


def secret_file(folder: Path, text: str = SECRET + "\n") -> Path:
    path = folder / "secret"
    path.write_text(text)
    return path


@pytest.mark.parametrize("source", ["--token-file", "STATEOUS_TOKEN"])
def test_token_commands_send_the_secret_and_never_print_it(
    recorder: Recorder, tmp_path: Path, source: str
) -> None:
    options = ["--url", recorder.url]
    env = {"STATEOUS_TOKEN": ""}
    if source == "--token-file":
        options += ["--token-file", str(secret_file(tmp_path))]
    else:
        env["STATEOUS_TOKEN"] = SECRET

    done = [
        run_stateous(
            "token", "start", "ORDER-1", '{"title": "x"}', *options, cwd=tmp_path, env=env
        ),
        run_stateous("token", "show", "ORDER-1", *options, cwd=tmp_path, env=env),
        run_stateous("token", "cancel", "NO-SUCH-TOKEN", *options, cwd=tmp_path, env=env),
    ]

    assert [command.returncode for command in done] == [0, 0, 1]
    assert done[2].stderr.startswith(f"error: the control plane at {recorder.url} refused (404)")
    assert {seen.path for seen in recorder.requests()} >= {"/tokens", "/tokens/ORDER-1/history"}
    assert recorder.authorizations() == {BEARER}
    assert not [
        text for command in done for text in (command.stdout, command.stderr) if SECRET in text
    ]


def test_a_refusal_that_echoes_the_secret_is_printed_with_the_secret_redacted(
    launcher: Launcher, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    db = tmp_path / "guarded.sqlite"
    credential(db, tmp_path, "ops", "operator")
    served = launcher.serve(graph, db)
    echoing = Recorder(served.port, echo=True)
    secret = "stq_Echoed-Secret_0123456789"
    try:
        shown = run_stateous(
            "token",
            "show",
            "ORDER-1",
            "--url",
            echoing.url,
            cwd=tmp_path,
            env={"STATEOUS_TOKEN": secret},
        )
    finally:
        echoing.close()
    assert shown.returncode == 1
    assert shown.stderr.endswith("(the request had Authorization: Bearer [redacted])\n")
    assert secret not in shown.stderr + shown.stdout
    assert "Echoed-Secret" not in shown.stderr


def test_without_a_secret_the_token_commands_send_no_authorization(
    recorder: Recorder, tmp_path: Path
) -> None:
    shown = run_stateous(
        "token", "show", "--url", recorder.url, cwd=tmp_path, env={"STATEOUS_TOKEN": ""}
    )

    assert shown.returncode == 0, shown.stderr
    assert recorder.authorizations() == {None}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot be read: No such file or directory"),
        ("", "is empty"),
        (f"{SECRET}\n{SECRET}\n", "holds more than one line"),
    ],
    ids=["missing", "empty", "two-lines"],
)
def test_a_token_file_that_cannot_be_used_ends_the_command_with_one_line_that_names_it(
    recorder: Recorder, tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "secret"
    if content is not None:
        path.write_text(content)

    shown = run_stateous(
        "token", "show", "--url", recorder.url, "--token-file", str(path), cwd=tmp_path
    )

    assert (shown.returncode, shown.stdout) == (1, "")
    (line,) = shown.stderr.splitlines()
    assert line.startswith(f"error: the token file {path} {says}")
    assert SECRET not in line
    assert recorder.requests() == []


@pytest.mark.parametrize("form", ["apart", "joined"])
def test_a_secret_given_on_the_command_line_is_refused_without_being_shown(
    tmp_path: Path, form: str
) -> None:
    given = ["--token", SECRET] if form == "apart" else [f"--token={SECRET}"]
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    folder = write_folder(tmp_path / "box-1", "http://127.0.0.1:1", graph)

    refused = [
        (run_stateous("token", "show", *given, cwd=tmp_path), "--token-file PATH"),
        (run_stateous("supervise", str(folder), *given, cwd=tmp_path), "token_file"),
        (
            run_stateous("init", "supervisor", "http://127.0.0.1:1", "box-2", *given, cwd=tmp_path),
            "--token-file PATH",
        ),
    ]

    for command, hint in refused:
        assert command.returncode == 2
        assert SECRET not in command.stderr
        last = command.stderr.splitlines()[-1]
        assert "there is no --token option" in last and hint in last, last
