"""`stateous token retry`: bring a failed or cancelled token back, after saying what runs again.

Before it sends the retry, the command reads the token's history and names the states
the token went through since it last entered the state it goes back to: the routines of
those states will most likely run again (the guards decide the path anew). It asks on
stderr and reads one line of stdin; only `y` or `yes` goes on, and `--yes` does not ask.
A token that cannot be retried is not asked about: the control plane's refusal says why.
With `--where` or `--apply` it retries in bulk, through a plan (`plans.py`), and asks
nothing: the plan's list of tokens is the question.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from stateous.cli import plans
from stateous.cli.errors import CommandError
from stateous.cli.history import token_line
from stateous.cli.parser import Commands
from stateous.cli.tokens import json_object, with_client

if TYPE_CHECKING:
    from stateous.client import Client

#: The statuses that a retry brings back.
MENDABLE = ("failed", "cancelled")


def runs_again(history: list[dict[str, Any]], state: str) -> list[str]:
    """The states entered since the token last entered `state`, in order, each named once;
    empty when it never entered `state`."""
    entered = [entry["data"].get("state") for entry in history if entry["kind"] == "entered"]
    if state not in entered:
        return []
    last = len(entered) - 1 - entered[::-1].index(state)
    return list(dict.fromkeys(entered[last:]))


def confirm(question: str) -> None:
    """Ask on stderr; anything but `y` or `yes` on stdin (an empty stdin too) stops here."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandError("nothing was retried (answer y, or give --yes)")


def ask(client: Client, token_id: str, state: str | None) -> None:
    """Name the states that a retry runs again, and ask whether to go on."""
    token = client.get(token_id)
    again = runs_again(client.history(token_id), state or token["state"])
    if token["status"] in MENDABLE and again:
        confirm(
            f"token {token_id} is {token['status']}; a retry runs these states again: "
            f"{', '.join(again)}. Retry it?"
        )


def retry(client: Client, args: argparse.Namespace) -> list[str]:
    if plans.wants_plan(args):
        if args.context is not None:
            raise CommandError("--context retries one token; a plan takes only --from")
        return plans.run(client, "retry", args, args.state)
    context = json_object(args.context, "--context")
    if not args.yes:
        ask(client, args.id, args.state)
    return [token_line(client.retry(args.id, args.state, context))]


def add_command(verbs: Commands, url: argparse.ArgumentParser) -> None:
    """Add `token retry` to the verbs of `token`."""
    retried = verbs.add_parser(
        "retry",
        parents=[url],
        help="bring a failed or cancelled token back to a state it visited",
        description=(
            "Bring a failed or cancelled token back, active, in its last state or in an "
            "earlier state it visited: a new visit, a new task at its first attempt; its "
            "context, memory and history stay."
        ),
    )
    retried.add_argument("id", metavar="ID", nargs="?", help="the token's id")
    plans.add_options(retried)
    retried.add_argument(
        "--from",
        dest="state",
        metavar="STATE",
        help="the state to enter again (default: the token's last state)",
    )
    retried.add_argument(
        "--context", metavar="JSON", help="context changes to merge, a JSON object"
    )
    retried.add_argument("--yes", action="store_true", help="retry without asking first")
    retried.set_defaults(run=with_client(retry))
