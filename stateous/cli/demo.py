"""`stateous demo`: the main job on the embedded default, in one process.

It writes the `orders` workflow and a supervisor folder with real routines,
compiles, serves on a SQLite file with the supervisor beside the server, starts
tokens, shows their progress, then a summary and one token's whole history. It
only ever writes into a folder of its own.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

from stateous.cli.errors import CommandError
from stateous.control.defaults import DEFAULT_LISTEN

MARK = ".stateous-demo"
TOKEN_LIMIT = 1000


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


class Driver(threading.Thread):
    """Start the tokens, show their progress, then the summary; stop the server unless kept."""

    def __init__(self, url: str, tokens: int, keep: bool, out: TextIO) -> None:
        super().__init__(name="stateous-demo", daemon=True)
        self.url, self.tokens, self.keep, self.out = url, tokens, keep, out
        self.failed: BaseException | None = None

    def run(self) -> None:
        try:
            self._drive()
        except BaseException as ex:
            self.failed = ex
        if not self.keep or self.failed is not None:
            os.kill(os.getpid(), signal.SIGTERM)

    def _drive(self) -> None:
        from stateous.cli.history import history_lines, token_line
        from stateous.client import Client

        with Client(self.url) as client:
            began = time.monotonic()
            for number in range(1, self.tokens + 1):
                title = f"order {number}" + (" (rework)" if number % 5 == 0 else "")
                client.start(f"ORDER-{number}", {"title": title})
            ended = self._follow(client)
            took = time.monotonic() - began
            print(f"\n{len(ended)} tokens ended in {took:.1f} s:", file=self.out)
            for (status, state), count in sorted(Counter(ended).items()):
                print(f"  {count:4d} {status} in {state}", file=self.out)
            shown = "ORDER-5" if self.tokens >= 5 else "ORDER-1"
            why = " (the review sent it back once)" if shown == "ORDER-5" else ""
            print(f"\nThe history of {shown}{why}:", file=self.out)
            print(token_line(client.get(shown)), file=self.out)
            for line in history_lines(client.history(shown)):
                print(line, file=self.out)
        if self.keep:
            print(
                f"\nThe control plane keeps serving on {self.url} (Ctrl-C stops). Try:\n"
                f"  export STATEOUS_URL={self.url}\n"
                "  stateous token show\n"
                "  stateous token show ORDER-1\n"
                '  stateous token start ORDER-1001 \'{"title": "one more"}\'\n'
                "  stateous token show --graph",
                file=self.out,
                flush=True,
            )

    def _follow(self, client: object) -> list[tuple[str, str]]:
        """Show progress until every token ended; return (status, state) of each."""
        live = self.out.isatty()
        shown = -1
        while True:
            listed = client.tokens(limit=TOKEN_LIMIT)  # type: ignore[attr-defined]
            ended = [
                (item["status"], item["state"])
                for item in listed
                if item["status"] not in ("active", "paused")
            ]
            if live:
                filled = 30 * len(ended) // self.tokens
                bar = "#" * filled + "-" * (30 - filled)
                print(
                    f"\r  [{bar}] {len(ended)}/{self.tokens} ended",
                    end="",
                    file=self.out,
                    flush=True,
                )
            elif len(ended) != shown:
                print(f"{len(ended)}/{self.tokens} tokens ended", file=self.out, flush=True)
            shown = len(ended)
            if len(ended) >= self.tokens:
                return ended
            time.sleep(0.2)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; exit 0 when every token ended."""
    from stateous.control.serve import ControlPlane, ServeError
    from stateous.supervisor.supervisor import Beside

    if not 1 <= args.tokens <= TOKEN_LIMIT:
        raise CommandError(f"--tokens takes a number from 1 to {TOKEN_LIMIT}")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    folder = Path(args.folder)
    prepare(folder)
    graph = write_demo(folder, "http://placeholder")
    try:
        plane = ControlPlane(str(graph), f"sqlite:///{folder / 'demo.db'}", args.listen, 120.0)
    except ServeError as ex:
        if "port is in use" in str(ex):
            raise CommandError(f"{ex}; choose another address with --listen HOST:PORT") from None
        raise
    (folder / "orders-supervisor" / "stateous.yaml").write_text(
        f'url: "{plane.url}"\ntasks: 8\nname: demo-box\n'
    )
    print(f"demo: {args.tokens} orders in {folder}/, served on {plane.url}", flush=True)
    beside = Beside(folder / "orders-supervisor", plane.url)
    driver = Driver(plane.url, args.tokens, args.keep, sys.stdout)
    beside.start()
    driver.start()
    code = plane.run(beside)
    if driver.failed is not None:
        raise CommandError(f"the demo failed: {driver.failed}")
    return code


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add `demo` to the parser."""
    demo = commands.add_parser(
        "demo",
        help="run the orders workflow end to end on SQLite, in one process",
        description=(
            "Write the orders workflow and a supervisor with real routines into FOLDER, "
            "serve them on a SQLite file, run tokens through them and show what happened."
        ),
    )
    demo.add_argument(
        "folder",
        metavar="FOLDER",
        nargs="?",
        default="stateous-demo",
        help="the demo's own folder (default: stateous-demo)",
    )
    demo.add_argument(
        "--tokens", type=int, default=20, metavar="N", help="how many orders to run (default: 20)"
    )
    demo.add_argument("--keep", action="store_true", help="keep serving after the run")
    demo.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"the address to serve on (default: {DEFAULT_LISTEN})",
    )
    demo.set_defaults(run=run_demo)
