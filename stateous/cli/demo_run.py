"""What `stateous demo` does: the main job on the embedded default, in one process.

It writes the `orders` workflow and a supervisor folder with real routines,
compiles, serves on a SQLite file with the supervisor beside the server, starts
tokens, shows their progress, then a summary, one token's history and three
commands to try next. Without `--listen` it serves on 8080, or on a free port
when 8080 is taken, since a demo must not fail for a port. It only ever writes
into a folder of its own.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from stateous.cli.demo import DEFAULT_FOLDER, DEFAULT_TOKENS
from stateous.cli.errors import CommandError
from stateous.control.defaults import DEFAULT_LISTEN, DEFAULT_URL
from stateous.model.invocation import invoked_as
from stateous.model.limits import LEASE, LIST_LIMIT
from stateous.model.names import STARTED
from stateous.model.vocabulary import LIVE_TOKEN, Kind

if TYPE_CHECKING:
    from stateous.control.serve import ControlPlane

MARK = ".stateous-demo"
#: Where the demo serves when 8080 is taken and --listen chose nothing: a free port.
FREE_PORT = "127.0.0.1:0"


def prepare(folder: Path) -> None:
    """Make the folder demo's own: new, empty, or written by an earlier demo."""
    if folder.exists():
        if not folder.is_dir():
            raise CommandError(f"{folder} is a file; give demo a folder of its own")
        if any(folder.iterdir()) and not (folder / MARK).is_file():
            raise CommandError(
                f"{folder} holds files that demo did not write; give demo a new or empty folder"
            )
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / MARK).write_text("written by stateous demo; it may write over this folder\n")


def write_demo(folder: Path, url: str) -> Path:
    """Write the workflow and the supervisor's folder; return the graph file."""
    from importlib.resources import files

    from stateous.compiler.compile import compile_flow, default_out, write_graph
    from stateous.compiler.contract import contract
    from stateous.compiler.starter import render

    flow_folder = folder / "orders"
    flow_folder.mkdir()
    for name in ("flow.py", "schemas.py"):
        (flow_folder / name).write_text(render(name, "orders", str(flow_folder)))
    graph = compile_flow(flow_folder / "flow.py")
    graph_path = default_out(flow_folder / "flow.py", graph)
    write_graph(graph, graph_path)
    supervisor = folder / "orders-supervisor"
    supervisor.mkdir()
    (supervisor / "contract.py").write_text(contract(graph).text)
    templates = files("stateous.compiler.templates")
    for state in ("draft", "review"):
        text = templates.joinpath(f"demo-{state}.py.tmpl").read_text(encoding="utf-8")
        (supervisor / f"{state}.py").write_text(text)
    (supervisor / "stateous.yaml").write_text(f'url: "{url}"\ntasks: 8\nname: demo-box\n')
    return graph_path


class PlaneLines(io.TextIOBase):
    """The control plane's stderr, without the lines that the demo says in its own words.

    The demo names its URL once, in its first line, and says itself whether Ctrl-C
    stops it, so the plane's `serving on URL (Ctrl-C stops)` goes; so does its
    `stopped` when the demo ends by itself. Warnings and errors pass through.
    """

    def __init__(self, out: TextIO, hidden: tuple[str, ...]) -> None:
        super().__init__()
        self.out, self.hidden, self.pending = out, hidden, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if not line.startswith(self.hidden):
                self.out.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def is_start_entry(entry: dict[str, Any]) -> bool:
    """Whether a ledger entry is the engine's own move out of START, which nobody fires."""
    data = entry.get("data") or {}
    return entry["kind"] == Kind.EVENT_ACCEPTED and data.get("event") == STARTED


def suggestions(commands: list[tuple[str, str]]) -> list[str]:
    """Lines of commands to try, each with what it does as a shell comment, so it pastes."""
    width = max(len(command) for command, _ in commands)
    return [f"  {command:<{width}}  # {what}" for command, what in commands]


class Driver(threading.Thread):
    """Start the tokens, show their progress, then the summary; stop the server unless kept."""

    def __init__(self, args: argparse.Namespace, url: str, out: TextIO) -> None:
        super().__init__(name="stateous-demo", daemon=True)
        self.args, self.url, self.out = args, url, out
        self.tokens: int = args.tokens
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            self._drive()
        except BaseException as ex:
            self.failed = ex
        if not self.args.keep or self.failed is not None:
            os.kill(os.getpid(), signal.SIGTERM)

    def _drive(self) -> None:
        from stateous.client import Client

        with Client(self.url) as client:
            began = time.monotonic()
            for number in range(1, self.tokens + 1):
                client.start(f"ORDER-{number}", {"title": title(number, number % 5 == 0)})
            ended = self._follow(client)
            self._summary(ended, time.monotonic() - began)
            self._history(client)
        if self.args.keep:
            print(
                f"\nThe control plane keeps serving on {self.url} (Ctrl-C stops). "
                "Try, in another terminal:",
                file=self.out,
            )
            lines = suggestions(self._token_commands())
        else:
            print("\nTry next:", file=self.out)
            lines = suggestions(self._next_commands())
        print("\n".join(lines), file=self.out, flush=True)

    def _summary(self, ended: list[tuple[str, str]], took: float) -> None:
        """Say how many orders completed, and where the others ended."""
        completed = sum(1 for status, _ in ended if status == "completed")
        print(f"\n{completed} of {self.tokens} orders completed in {took:.1f} s", file=self.out)
        others = Counter(item for item in ended if item[0] != "completed")
        for (status, state), count in sorted(others.items()):
            print(f"{count} of {self.tokens} orders {status} in {state}", file=self.out)

    def _history(self, client: object) -> None:
        """Print one token's history, without the entries that only the engine writes."""
        from stateous.cli.history import history_lines, token_line

        shown = "ORDER-5" if self.tokens >= 5 else "ORDER-1"
        why = " (the review sent it back once)" if shown == "ORDER-5" else ""
        print(f"\nThe history of {shown}{why}:", file=self.out)
        print(token_line(client.get(shown)), file=self.out)  # type: ignore[attr-defined]
        entries = client.history(shown)  # type: ignore[attr-defined]
        for line in history_lines(entry for entry in entries if not is_start_entry(entry)):
            print(line, file=self.out)

    def _token_commands(self) -> list[tuple[str, str]]:
        """Three token commands for the control plane that keeps serving."""
        command = invoked_as()
        chosen = os.environ.get("STATEOUS_URL") or DEFAULT_URL
        url = "" if self.url == chosen else f" --url {self.url}"
        token = f"ORDER-{self.tokens + 1}"
        context = shlex.quote(json.dumps({"title": title(self.tokens + 1, True)}))
        return [
            (
                f"{command} token start {token} {context}{url}",
                "one more order; the review sends it back once",
            ),
            (f"{command} token show {token}{url}", "where it is, and its history"),
            (f"{command} token show --graph{url}", "the workflow, as a Mermaid diagram"),
        ]

    def _next_commands(self) -> list[tuple[str, str]]:
        """Three commands to try once the demo has stopped."""
        command = invoked_as()
        again = [f"{command} demo --keep"]
        if self.args.folder != DEFAULT_FOLDER:
            again.append(shlex.quote(self.args.folder))
        if self.tokens != DEFAULT_TOKENS:
            again.append(f"--tokens {self.tokens}")
        if self.args.listen is not None:
            again.append(f"--listen {shlex.quote(self.args.listen)}")
        return [
            (" ".join(again), "the same run; then it keeps serving, for token commands"),
            (f"{command} init workflow orders", "your own starter workflow, compiled"),
            (
                f"{command} init supervisor orders/flow.py orders-supervisor",
                "its supervisor's folder, a stub per state",
            ),
        ]

    def _follow(self, client: object) -> list[tuple[str, str]]:
        """Show progress until every token ended; return (status, state) of each."""
        live = self.out.isatty()
        shown = -1
        while True:
            listed = client.tokens(limit=LIST_LIMIT)  # type: ignore[attr-defined]
            ended = [
                (item["status"], item["state"])
                for item in listed
                if item["status"] not in LIVE_TOKEN
            ]
            if live:
                filled = 30 * len(ended) // self.tokens
                bar = "#" * filled + "-" * (30 - filled)
                print(
                    f"\r  [{bar}] {len(ended)} of {self.tokens} ended",
                    end="",
                    file=self.out,
                    flush=True,
                )
            elif len(ended) != shown:
                print(f"{len(ended)} of {self.tokens} orders ended", file=self.out, flush=True)
            shown = len(ended)
            if len(ended) >= self.tokens:
                if live:
                    print(file=self.out)
                return ended
            time.sleep(0.2)


def title(number: int, rework: bool) -> str:
    """The title of an order; the review sends a rework order back once."""
    return f"order {number}" + (" (rework)" if rework else "")


def open_plane(
    graph: Path, db: str, listen: str | None, err: TextIO | io.TextIOBase
) -> ControlPlane:
    """Serve on --listen; without it on 8080, or on a free port when 8080 is taken."""
    from stateous.control.serve import ControlPlane, ServeError

    try:
        return ControlPlane(str(graph), db, listen or DEFAULT_LISTEN, LEASE, err)
    except ServeError as ex:
        if "port is in use" not in str(ex):
            raise
        if listen is not None:
            raise CommandError(f"{ex}; choose another address with --listen HOST:PORT") from None
    return ControlPlane(str(graph), db, FREE_PORT, LEASE, err)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 when every token ended."""
    from stateous.supervisor.running import Beside

    if not 1 <= args.tokens <= LIST_LIMIT:
        raise CommandError(f"--tokens takes a number from 1 to {LIST_LIMIT}")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    folder = Path(args.folder)
    prepare(folder)
    graph = write_demo(folder, "http://placeholder")
    hidden = ("serving on ",) if args.keep else ("serving on ", "stopped")
    plane = open_plane(
        graph, f"sqlite:///{folder / 'demo.db'}", args.listen, PlaneLines(sys.stderr, hidden)
    )
    (folder / "orders-supervisor" / "stateous.yaml").write_text(
        f'url: "{plane.url}"\ntasks: 8\nname: demo-box\n'
    )
    print(f"demo: {args.tokens} orders in {folder}/, served on {plane.url}", flush=True)
    beside = Beside(folder / "orders-supervisor", plane.url)
    driver = Driver(args, plane.url, sys.stdout)
    beside.start()
    driver.start()
    code = plane.run(beside)
    if driver.failed is not None:
        raise CommandError(f"the demo failed: {driver.failed}")
    return code
