"""The `stateous` command: argument parsing and dispatch to each command's module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stateous._version import __version__
from stateous.cli import demo, init_supervisor, serving, supervising, tokens, workflows
from stateous.cli.errors import reported


def build_parser() -> argparse.ArgumentParser:
    """Build the parser of every command."""
    parser = argparse.ArgumentParser(
        prog="stateous",
        description="Durable workflows: compile a graph of states, serve it, and do its work.",
    )
    parser.add_argument("--version", action="version", version=f"stateous {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    init_command = commands.add_parser(
        "init",
        help="write a starter folder",
        description="Write a starter folder for a workflow.",
    )
    init = init_command.add_subparsers(dest="what", metavar="WHAT", required=True)
    workflows.add_commands(commands, init)
    init_supervisor.add_command(init)
    serving.add_commands(commands)
    tokens.add_commands(commands)
    supervising.add_commands(commands)
    demo.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code."""
    args = build_parser().parse_args(argv)
    try:
        code = reported(lambda: args.run(args))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    return int(code or 0)
