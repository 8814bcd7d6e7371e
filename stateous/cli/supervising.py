"""`stateous supervise`: run the routines of a supervisor's folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from stateous.cli.access import SETTINGS_HINT, refuse_token_option
from stateous.cli.parser import Commands

LOG_FORMAT = "%(asctime)s %(name)s: %(message)s"


def start_logging() -> None:
    """Log at INFO to stderr, as `serve` and `supervise` do (logging is imported only here,
    when a command that logs runs)."""
    import logging

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    # The format names no place in the code, thread or process, so a record need not look
    # them up: the logging HOWTO's "Optimization", a fifth of each line's cost.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False


def run_supervise(args: argparse.Namespace) -> int:
    """Supervise a folder until Ctrl-C or SIGTERM."""
    from stateous.supervisor.running import supervise

    start_logging()
    return supervise(Path(args.folder))


def add_commands(commands: Commands) -> None:
    """Add `supervise` to the parser."""
    supervise = commands.add_parser(
        "supervise",
        help="run the routines of a supervisor's folder",
        description=(
            "Claim the tasks of the states that the folder's routines serve, run the "
            "routines and report their outcomes. The settings are in FOLDER/stateous.yaml."
        ),
    )
    supervise.add_argument("folder", metavar="FOLDER", help="the supervisor's folder")
    refuse_token_option(supervise, SETTINGS_HINT)
    supervise.set_defaults(run=run_supervise)
