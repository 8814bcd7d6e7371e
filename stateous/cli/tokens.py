"""`stateous token ...`: start, fire, show, pause, resume and cancel tokens over HTTP.

Pause, resume and cancel also act in bulk, through a plan (`plans.py`).

Each command sends its requests through one `Client` and prints what the control
plane answered. It must stay quick to start: it imports only the client, the
model, the standard library and the small `control.defaults`, never the
server, the compiler or a database driver. A refusal, or a control plane that is
not there or stays silent past `--timeout`, is one `error:` line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stateous.cli import plans
from stateous.cli.access import add_access_options
from stateous.cli.errors import CommandError
from stateous.cli.history import accepted_events, budget_line, shown_lines, token_line
from stateous.cli.parser import Commands
from stateous.cli.watch import watch
from stateous.control.defaults import DEFAULT_URL
from stateous.model.limits import LIST_DEFAULT, LIST_LIMIT

if TYPE_CHECKING:
    from stateous.client import Client
    from stateous.model.graph_file import GraphFile

#: How many seconds a command waits for the control plane to connect and to answer.
TIMEOUT = 30.0


def json_object(text: str | None, what: str) -> dict[str, Any] | None:
    """Read an argument that holds a JSON object; name the argument when it does not."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as ex:
        raise CommandError(f"{what} is not valid JSON: {ex}") from None
    if not isinstance(value, dict):
        raise CommandError(f"{what} must be a JSON object, like '{{\"key\": 1}}'")
    return value


def seconds(text: str) -> float:
    """Read `--timeout`: a number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def with_client(act: Callable[[Client, argparse.Namespace], list[str]]) -> Callable[..., int]:
    """Wrap a command: open a client, print the lines it returns, and word its failures."""

    def run(args: argparse.Namespace) -> int:
        from stateous.client import Client, ClientError, Refused

        url = args.url or os.environ.get("STATEOUS_URL") or DEFAULT_URL
        try:
            with Client(
                url, timeout=args.timeout, token_file=args.token_file, ca_file=args.ca_file
            ) as client:
                try:
                    lines = act(client, args)
                except Refused as ex:
                    raise CommandError(
                        f"the control plane at {client.url} refused ({ex.status}): {ex.message}"
                    ) from None
        except ClientError as ex:
            raise CommandError(str(ex)) from None
        if lines:
            print("\n".join(lines))
        return 0

    return run


def start(client: Client, args: argparse.Namespace) -> list[str]:
    """Start the token; one line on stderr when it existed, so a script can tell, while the
    exit code stays 0 as for a start that did happen."""
    context = json_object(args.context, "CONTEXT_JSON")
    token, created = client.start_token(args.id, context, args.priority, limits(args.budget))
    if not created:
        print(f"token {args.id!r} exists already; nothing was started", file=sys.stderr)
    return [token_line(token)]


def limit(text: str) -> tuple[str, float]:
    """One `UNIT=AMOUNT` of a budget, as `--budget usd=5` and `--limit gpu_hours=2` give it."""
    unit, equals, amount = text.partition("=")
    try:
        if equals:
            return unit.strip(), float(amount)
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"{text!r} is not UNIT=AMOUNT, as usd=5")


def limits(pairs: list[tuple[str, float]] | None) -> dict[str, float] | None:
    return dict(pairs) if pairs else None


def budget(client: Client, args: argparse.Namespace) -> list[str]:
    """Raise the budget of the token's tree: one line, its limits and what it spent."""
    asked = dict(args.limit or [])
    for unit in ("usd", "tokens"):
        if getattr(args, unit) is not None:
            asked[unit] = getattr(args, unit)
    if not asked:
        raise CommandError("say the new limits, as --usd 10, --tokens 50000 or --limit UNIT=N")
    shown = client.raise_budget(args.id, asked)
    return [budget_line(shown)]


def fire(client: Client, args: argparse.Namespace) -> list[str]:
    payload = json_object(args.payload, "PAYLOAD_JSON")
    answer = client.fire(args.id, args.event, payload, key=args.key)
    if answer.get("duplicate"):
        return [f"duplicate: {token_line(answer['token'])}"]
    return [token_line(answer)]


def unreadable(reason: object) -> CommandError:
    """Say that the workflow the control plane serves is not a graph file, and why."""
    return CommandError(f"the control plane's workflow cannot be read: {reason}")


def served_graph(client: Client) -> GraphFile:
    """Read the graph file that the control plane serves."""
    from stateous.model.graph_file import GraphFileError, from_document

    try:
        return from_document(client.workflow())
    except GraphFileError as ex:
        raise unreadable(ex) from None


def served_events(token: dict[str, Any], client: Client) -> list[str]:
    """The events out of the token's state, read from the graph file the token moves by."""
    try:
        return accepted_events(token, client.workflow(token.get("checksum")))
    except KeyError as ex:
        raise unreadable(f"it has no {ex}") from None
    except TypeError:
        raise unreadable("it is not a graph file") from None


def show(client: Client, args: argparse.Namespace) -> list[str]:
    if args.graph:
        if args.id is not None:
            raise CommandError("--graph draws the workflow; give it no token ID")
        from stateous.cli.graph import mermaid

        return [mermaid(served_graph(client))]
    if args.id is None:
        return [token_line(token) for token in client.tokens(limit=LIST_DEFAULT)]
    token = client.get(args.id)
    children = client.tokens(parent=args.id, limit=LIST_LIMIT)

    def served() -> str:
        return str(client.health()["checksum"])

    return shown_lines(
        token, children, served_events(token, client), client.history(args.id), served
    )


def steer(verb: str) -> Callable[[Client, argparse.Namespace], list[str]]:
    """Make the command that pauses, resumes or cancels a token."""

    def act(client: Client, args: argparse.Namespace) -> list[str]:
        if plans.wants_plan(args):
            return plans.run(client, verb, args, None)
        return [token_line(getattr(client, verb)(args.id))]

    return act


def url_options() -> argparse.ArgumentParser:
    """The options of every command that speaks to a control plane: where, how long, with
    which secret."""
    url = argparse.ArgumentParser(add_help=False)
    url.add_argument(
        "--url",
        metavar="URL",
        help=(
            "the control plane's URL, or several separated by commas (its standbys), tried "
            f"in order (default: $STATEOUS_URL, else {DEFAULT_URL})"
        ),
    )
    url.add_argument(
        "--timeout",
        type=seconds,
        default=TIMEOUT,
        metavar="SECONDS",
        help=f"how long to wait for the control plane to answer (default: {TIMEOUT:g})",
    )
    add_access_options(url)
    return url


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> Commands:
    """Add `token` and its commands to the parser; answer its verbs, for more."""
    token = commands.add_parser(
        "token",
        help="start, fire, show and steer tokens",
        description="Start, fire, show and steer tokens through a control plane's HTTP API.",
    )
    verbs = token.add_subparsers(dest="verb", metavar="VERB", required=True)

    started = verbs.add_parser("start", parents=[url], help="start a token")
    started.add_argument("id", metavar="ID", help="the token's id, for example TICKET-1")
    started.add_argument(
        "context", metavar="CONTEXT_JSON", nargs="?", help="the context, a JSON object"
    )
    started.add_argument(
        "--priority", type=int, default=0, help="higher first, -100 to 100; default 0"
    )
    started.add_argument(
        "--budget",
        type=limit,
        action="append",
        metavar="UNIT=AMOUNT",
        help="what the token and all its children may spend, as usd=5; again for more units",
    )
    started.set_defaults(run=with_client(start))

    fired = verbs.add_parser("fire", parents=[url], help="fire an event on a token")
    fired.add_argument("id", metavar="ID", help="the token's id")
    fired.add_argument("event", metavar="EVENT", help="the event's name")
    fired.add_argument(
        "payload", metavar="PAYLOAD_JSON", nargs="?", help="the payload, a JSON object"
    )
    fired.add_argument(
        "--key", metavar="K", help="an idempotency key: the same key fires one time only"
    )
    fired.set_defaults(run=with_client(fire))

    shown = verbs.add_parser(
        "show", parents=[url], help="show a token and its history, or list the tokens"
    )
    shown.add_argument("id", metavar="ID", nargs="?", help="the token; leave it out to list")
    shown.add_argument(
        "--graph", action="store_true", help="draw the workflow as a Mermaid state diagram"
    )
    shown.set_defaults(run=with_client(show))

    watched = verbs.add_parser(
        "watch",
        parents=[url],
        help="print a token's history, then each entry as it happens, until the token ends",
    )
    watched.add_argument("id", metavar="ID", help="the token's id")
    watched.set_defaults(run=with_client(watch))

    for verb, what in (
        ("pause", "pause an active token"),
        ("resume", "resume a paused token"),
        ("cancel", "cancel a token for good"),
    ):
        steered = verbs.add_parser(verb, parents=[url], help=what)
        steered.add_argument("id", metavar="ID", nargs="?", help="the token's id")
        plans.add_options(steered)
        steered.set_defaults(run=with_client(steer(verb)))

    budgeted = verbs.add_parser(
        "budget", parents=[url], help="raise the budget of a token's tree: its work goes on"
    )
    budgeted.add_argument("id", metavar="ID", help="the token (any of its tree)")
    budgeted.add_argument("--usd", type=float, help="the new limit in usd")
    budgeted.add_argument("--tokens", type=float, help="the new limit in tokens")
    budgeted.add_argument(
        "--limit", type=limit, action="append", metavar="UNIT=AMOUNT", help="any other unit"
    )
    budgeted.set_defaults(run=with_client(budget))
    return verbs
