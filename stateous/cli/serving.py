"""`stateous serve`: run the control plane."""

from __future__ import annotations

import argparse
from pathlib import Path

from stateous.cli.errors import CommandError
from stateous.cli.parser import Commands
from stateous.cli.supervising import start_logging
from stateous.control.defaults import (
    DEFAULT_CHANNEL_TIMEOUT,
    DEFAULT_CONNECTION_LIMIT,
    DEFAULT_DB,
    DEFAULT_LEASE,
    DEFAULT_LISTEN,
    DEFAULT_STREAMS,
    DEFAULT_THREADS,
)
from stateous.model.durations import parse_duration

#: The most request threads and open connections that `serve` takes.
MOST_THREADS = 256
MOST_CONNECTIONS = 100_000


def duration(option: str, text: str) -> int:
    """The seconds of an option's duration, or the CLI's one-line error."""
    try:
        return parse_duration(text)
    except ValueError as ex:
        raise CommandError(f"{option}: {ex}") from None


def whole(option: str, text: str, most: int) -> int:
    """An option's whole number from 1 to `most`, or the CLI's one-line error."""
    if text.isascii() and text.isdigit() and 1 <= int(text) <= most:
        return int(text)
    raise CommandError(f"{option} takes a whole number from 1 to {most}, not {text!r}")


def allowed_hosts(entries: list[str]) -> tuple[str, ...]:
    """The `--allowed-host` entries, each a host name or an origin, or the CLI's one-line
    error."""
    from stateous.control.serve import proxy_site

    for entry in entries:
        try:
            proxy_site(entry)
        except ValueError as ex:
            raise CommandError(f"--allowed-host: {ex}") from None
    return tuple(entries)


def run_serve(args: argparse.Namespace) -> int:
    """Serve a graph file until Ctrl-C or SIGTERM."""
    lease = duration("--lease", args.lease)
    keep_ended = None if args.keep_ended is None else duration("--keep-ended", args.keep_ended)
    allowed = allowed_hosts(args.allowed_host)
    from stateous.control.serve import ControlPlane, Limits

    limits = Limits(
        threads=whole("--threads", args.threads, MOST_THREADS),
        connection_limit=whole("--connection-limit", args.connection_limit, MOST_CONNECTIONS),
        channel_timeout=duration("--channel-timeout", args.channel_timeout),
        streams=whole("--streams", args.streams, MOST_CONNECTIONS),
    )
    start_logging()
    plane = ControlPlane(
        args.graph,
        args.db,
        args.listen,
        lease,
        no_auth=args.no_auth,
        allowed_hosts=allowed,
        limits=limits,
        standby=args.standby,
        keep_ended=keep_ended,
    )
    if args.supervise is None:
        return plane.run()
    from stateous.supervisor.running import Beside

    beside = Beside(Path(args.supervise), plane.url)
    beside.start()
    return plane.run(beside)


def add_commands(commands: Commands) -> None:
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
        "--keep-ended",
        metavar="DURATION",
        help="remove each token tree (the top token and its children, with their history, "
        "tasks, timers and memory) once it has ended for this long, in small batches "
        "(default: keep for ever)",
    )
    serve.add_argument(
        "--threads",
        default=str(DEFAULT_THREADS),
        metavar="N",
        help=(
            "request threads; each may hold a database connection; claims that wait "
            f"for a task hold none (default: {DEFAULT_THREADS})"
        ),
    )
    serve.add_argument(
        "--connection-limit",
        default=str(DEFAULT_CONNECTION_LIMIT),
        metavar="N",
        help=(
            "open connections at once; more wait to be accepted; as many claims may "
            f"wait for a task besides (default: {DEFAULT_CONNECTION_LIMIT})"
        ),
    )
    serve.add_argument(
        "--channel-timeout",
        default=DEFAULT_CHANNEL_TIMEOUT,
        metavar="DURATION",
        help=(
            "how long a connection may stay idle, leave its answers unread, or take to send "
            f"one request, before it is closed (default: {DEFAULT_CHANNEL_TIMEOUT})"
        ),
    )
    serve.add_argument(
        "--streams",
        default=str(DEFAULT_STREAMS),
        metavar="N",
        help=(
            "live streams (GET /stream) open at once; they hold no request thread, and one "
            f"more is refused with too_many_streams (default: {DEFAULT_STREAMS})"
        ),
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
        help="a proxy's host name that requests may name besides this computer's: NAME alone "
        "lets pages of http://NAME and https://NAME call, SCHEME://NAME:PORT that origin only; "
        "repeat for more",
    )
    serve.add_argument(
        "--standby",
        action="store_true",
        help="when another control plane serves the database, wait for it to stop or die and "
        "take over (answers 503 not_serving meanwhile) instead of refusing to start",
    )
    serve.set_defaults(run=run_serve)
