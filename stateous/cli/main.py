"""The `stateous` command: argument parsing and dispatch to each command's module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from stateous._version import __version__
from stateous.cli import (
    auth,
    backup,
    demo,
    init_supervisor,
    listing,
    serving,
    supervising,
    tokens,
    workflows,
)
from stateous.cli.errors import reported

#: The exit code when stdout's reader has gone: what a shell reports for a process
#: that SIGPIPE ended (128 + 13), as `seq 100000 | head -n 1` ends `seq`.
CLOSED_PIPE = 141


class Parser(argparse.ArgumentParser):
    """A parser that refuses what it does not know itself, rather than pass it up.

    argparse hands the arguments a subcommand does not know back to the parser
    above it, so `token show --bogus` would be refused with the top-level usage.
    Refused here, at every depth, a mistake shows the usage of the command typed.
    The subcommands' parsers are of this class too, since argparse makes them of
    the class of their parent.
    """

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed, unknown


def build_parser() -> argparse.ArgumentParser:
    """Build the parser of every command."""
    parser = Parser(
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
    auth.add_commands(commands)
    backup.add_commands(commands)
    url = tokens.url_options()
    listing.add_token_list(tokens.add_commands(commands, url), url)
    listing.add_commands(commands, url)
    supervising.add_commands(commands)
    demo.add_commands(commands)
    return parser


def dispatch(argv: Sequence[str] | None) -> int:
    """Parse the command line and run the command it names."""
    args = build_parser().parse_args(argv)
    try:
        code = reported(lambda: args.run(args))
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return 130
    return int(code or 0)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code; a closed stdout ends it quietly.

    When the reader of stdout has gone (`stateous token show ID | head -n 1`), the
    command stops where it is, prints nothing more, and exits with 141, the code
    that a shell reports for a Unix tool that the closed pipe ended.
    """
    try:
        try:
            return dispatch(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        return CLOSED_PIPE


def quiet_stdout() -> None:
    """Point stdout at the null device, so that the flush at exit has nowhere to fail."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
