"""Printing into a pipe whose reader has gone: the command ends quietly, as Unix tools do.

`stateous token show ID | head -n 1` reads one line and goes; `| true` reads none.
The tests run the real command against a real `serve` process, with its stdout a
real pipe that the test closes, and a token whose history is several times longer
than a pipe holds (64 KiB on Linux), so that the command is still writing when the
pipe closes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import msgspec
import pytest

from stateous import END, START, Workflow
from tests.conftest import ROOT
from tests.control.serving import Launcher, Served, command, write_graph

#: The exit code of a process that SIGPIPE ended, as a shell reports it.
CLOSED_PIPE = 141
#: How many pages the token gets, and the text of each: about 200 KB of history.
PAGES = 20
TEXT = "x" * 10_000


class Page(msgspec.Struct):
    """The payload of `wrote`."""

    text: str


def journal() -> Workflow:
    """A workflow whose one state takes page after page, each a long line of history."""
    flow = Workflow("journal")
    page = flow.state("page")
    flow.transition(START, page)
    flow.transition(page, page, on=flow.event("wrote", payload=Page))
    flow.transition(page, END, on=flow.event("closed"))
    return flow


@pytest.fixture
def served(launcher: Launcher, tmp_path: Path) -> Served:
    """The `journal` workflow served, with the token J-1 and its long history."""
    graph = tmp_path / "journal.json"
    write_graph(graph, journal())
    served = launcher.serve(graph, tmp_path / "journal.sqlite")
    served.ok("POST", "/tokens", {"token": "J-1", "context": {}})
    for _ in range(PAGES):
        served.ok("POST", "/tokens/J-1/events/wrote", {"payload": {"text": TEXT}})
    return served


def environment(served: Served) -> dict[str, str]:
    """The environment of a person's shell: stdout buffered, as Python buffers a pipe."""
    given = {**os.environ, "PYTHONPATH": str(ROOT), "STATEOUS_URL": served.url}
    given.pop("PYTHONUNBUFFERED", None)
    return given


def spawn(served: Served, folder: Path, *args: str) -> subprocess.Popen[bytes]:
    """Start `python -m stateous ARGS` against `served`, its stdout and stderr pipes."""
    return subprocess.Popen(
        command(*args),
        cwd=folder,
        env=environment(served),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def ended(process: subprocess.Popen[bytes]) -> tuple[int, bytes]:
    """Wait for the process; return its exit code and all it wrote to stderr."""
    assert process.stderr is not None
    code = process.wait(timeout=30)
    return code, process.stderr.read()


def test_a_pipe_closed_after_the_first_line_ends_token_show_quietly(
    served: Served, tmp_path: Path
) -> None:
    process = spawn(served, tmp_path, "token", "show", "J-1")
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()
    assert first == f"J-1: page (visit {PAGES + 1}), active\n".encode()
    assert ended(process) == (CLOSED_PIPE, b"")


@pytest.mark.parametrize(
    "args",
    [("token", "show", "J-1"), ("token", "show"), ("token", "start", "J-2"), ("--help",)],
    ids=["a history", "the list of tokens", "a token line", "the help"],
)
def test_a_pipe_closed_before_the_command_writes_ends_it_quietly(
    served: Served, tmp_path: Path, args: tuple[str, ...]
) -> None:
    process = spawn(served, tmp_path, *args)
    assert process.stdout is not None
    process.stdout.close()
    assert ended(process) == (CLOSED_PIPE, b"")


def test_head_shows_the_first_line_and_the_shell_sees_the_closed_pipe(
    served: Served, tmp_path: Path
) -> None:
    shown = shlex.join(command("token", "show", "J-1"))
    result = subprocess.run(
        ["bash", "-c", f'{shown} | head -n 1; echo "exit ${{PIPESTATUS[0]}}"'],
        cwd=tmp_path,
        env=environment(served),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.stdout == f"J-1: page (visit {PAGES + 1}), active\nexit {CLOSED_PIPE}\n"
    assert result.stderr == ""
