"""`stateous serve`: run the control plane."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from stateous.cli.errors import CommandError
from stateous.cli.supervising import LOG_FORMAT
from stateous.control.defaults import DEFAULT_DB, DEFAULT_LEASE, DEFAULT_LISTEN
from stateous.model.durations import parse_duration


def run_serve(args: argparse.Namespace) -> int:
    """Serve a graph file until Ctrl-C or SIGTERM."""
    try:
        lease = parse_duration(args.lease)
    except ValueError as ex:
        raise CommandError(f"--lease: {ex}") from None
    from stateous.control.serve import ControlPlane

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    plane = ControlPlane(
        args.graph,
        args.db,
        args.listen,
        lease,
        no_auth=args.no_auth,
        allowed_hosts=tuple(args.allowed_host),
    )
    if args.supervise is None:
        return plane.run()
    from stateous.supervisor.supervisor import Beside

    beside = Beside(Path(args.supervise), plane.url)
    beside.start()
    return plane.run(beside)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Add `serve` to the parser."""
    serve = commands.add_parser(
        "serve",
        help="run the control plane",
        description="Open the database, then serve the HTTP API and run the clock.",
    )
    serve.add_argument("graph", metavar="GRAPH", help="the graph file that compile wrote")
    serve.add_argument(
        "--db", default=DEFAULT_DB, metavar="URL", help=f"the database (default: {DEFAULT_DB})"
    )
    serve.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"the address to listen on (default: {DEFAULT_LISTEN})",
    )
    serve.add_argument(
        "--lease",
        default=DEFAULT_LEASE,
        metavar="DURATION",
        help=f"how long a claimed task is held without a heartbeat (default: {DEFAULT_LEASE})",
    )
    serve.add_argument(
        "--supervise",
        metavar="FOLDER",
        help="also run the supervisor of this folder in the same process (for development)",
    )
    serve.add_argument(
        "--no-auth",
        action="store_true",
        help="ask no request for a credential, even beyond this computer (warns at start and "
        "on /health)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name that requests may name besides this computer's (a proxy's); repeat "
        "for more",
    )
    serve.set_defaults(run=run_serve)
