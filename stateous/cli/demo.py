"""`stateous demo`: its options; what it does lives in `demo_run`, imported when it runs."""

from __future__ import annotations

import argparse

from stateous.cli.parser import Commands
from stateous.control.defaults import DEFAULT_LISTEN

DEFAULT_FOLDER = "stateous-demo"
DEFAULT_TOKENS = 20


def run(args: argparse.Namespace) -> int:
    from stateous.cli.demo_run import run_demo

    return run_demo(args)


def add_commands(commands: Commands) -> None:
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
        default=DEFAULT_FOLDER,
        help=f"the demo's own folder (default: {DEFAULT_FOLDER})",
    )
    demo.add_argument(
        "--tokens",
        type=int,
        default=DEFAULT_TOKENS,
        metavar="N",
        help=f"how many orders to run (default: {DEFAULT_TOKENS})",
    )
    demo.add_argument("--keep", action="store_true", help="keep serving after the run")
    demo.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help=f"the address to serve on (default: {DEFAULT_LISTEN}, or a free port if it is taken)",
    )
    demo.set_defaults(run=run)
