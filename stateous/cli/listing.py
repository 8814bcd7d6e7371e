"""`stateous token list` and `stateous tasks`: the listings of the API, as lines or as JSON.

Each prints one line per row, in aligned columns under a heading, times in UTC; or,
with `--json`, one JSON document (the list of rows, as the API answers them) for
scripts. Rows come page after page until `--limit` of them. The filters go to the
control plane as they are given: it checks them, and a refusal is one `error:` line.
Like `token`, this module must stay quick to start: it imports only the standard
library and the other command-line modules.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from stateous.cli.errors import CommandError
from stateous.cli.parser import Commands
from stateous.cli.tokens import with_client
from stateous.model.limits import LIST_DEFAULT
from stateous.model.sentences import state_name, utc
from stateous.model.vocabulary import LIVE_TASK, TokenStatus

if TYPE_CHECKING:
    from stateous.client import Client


Row = dict[str, Any]


def limit(text: str) -> int:
    """Read `--limit`: a whole number from 1."""
    if not (text.isascii() and text.isdigit() and int(text) >= 1):
        raise CommandError(f"--limit must be a whole number from 1, not {text!r}")
    return int(text)


def age(seconds: float) -> str:
    """A task's age as a person reads it: `45s`, `12m05s`, `3h20m`, `2d04h`."""
    whole = int(seconds)
    days, hours, minutes = whole // 86400, whole // 3600 % 24, whole // 60 % 60
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{whole % 60:02d}s"
    return f"{whole}s"


def aligned(heading: Sequence[str], rows: list[list[str]]) -> list[str]:
    """Lines of columns, each as wide as its widest cell, two spaces apart."""
    widths = [max(len(cell) for cell in column) for column in zip(heading, *rows, strict=True)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (heading, *rows)
    ]


def token_cells(token: Row) -> list[str]:
    return [
        token["token"],
        state_name(token["state"]),
        token["status"],
        str(token["visit"]),
        utc(token["entered_at"]),
        token.get("parent") or "",
    ]


def task_cells(task: Row) -> list[str]:
    return [
        str(task["task"]),
        task["token"],
        task["state"],
        task["status"],
        str(task["attempt"]),
        task["supervisor"] or "",
        age(task["age"]),
        "" if task["lease_until"] is None else utc(task["lease_until"]),
        # What a queued task waits for: a resource, or a supervisor that could take it (a
        # control plane before resources or labels sends neither).
        task.get("waits_for") or task.get("waits") or "",
    ]


TOKEN_HEADING = ("TOKEN", "STATE", "STATUS", "VISIT", "ENTERED (UTC)", "PARENT")
TASK_HEADING = (
    "TASK",
    "TOKEN",
    "STATE",
    "STATUS",
    "ATTEMPT",
    "SUPERVISOR",
    "AGE",
    "LEASE (UTC)",
    "WAITS",
)


def lister(
    path: str,
    filters: tuple[str, ...],
    heading: Sequence[str],
    cells: Callable[[Row], list[str]],
    empty: str,
) -> Callable[[Client, argparse.Namespace], list[str]]:
    """Make the command that lists `path` by the options named `filters`."""

    def act(client: Client, args: argparse.Namespace) -> list[str]:
        query = {name: getattr(args, name) for name in filters}
        rows = client.listed(path, limit(args.limit), **query)
        if args.json:
            return [json.dumps(rows, indent=2)]
        if not rows:
            return [empty]
        return aligned(heading, [cells(row) for row in rows])

    return act


def add_options(command: argparse.ArgumentParser, what: str) -> None:
    command.add_argument(
        "--limit",
        default=str(LIST_DEFAULT),
        metavar="N",
        help=f"print at most N {what} (default: {LIST_DEFAULT})",
    )
    command.add_argument(
        "--json", action="store_true", help=f"print the {what} as one JSON list, for scripts"
    )


def add_token_list(verbs: Commands, url: argparse.ArgumentParser) -> None:
    """Add `token list` to the verbs of `token`."""
    listed = verbs.add_parser(
        "list",
        parents=[url],
        help="list tokens, the most recently moved first",
        description="List tokens, the most recently moved first, one line each.",
    )
    listed.add_argument(
        "--status", metavar="S", help=f"only tokens of this status: {', '.join(TokenStatus)}"
    )
    listed.add_argument("--state", metavar="S", help="only tokens in this state")
    listed.add_argument(
        "--checksum", metavar="CHECKSUM", help="only tokens that move by this graph file"
    )
    add_options(listed, "tokens")
    filters = ("status", "state", "checksum")
    listed.set_defaults(
        run=with_client(lister("/tokens", filters, TOKEN_HEADING, token_cells, "no tokens match"))
    )


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> None:
    """Add `tasks` to the parser."""
    tasks = commands.add_parser(
        "tasks",
        parents=[url],
        help="list the live tasks, the oldest queued first",
        description=(
            "List the live tasks (queued, claimed, waiting), the oldest queued first, one "
            "line each: its token, state, attempt, supervisor, age and lease."
        ),
    )
    tasks.add_argument(
        "--status", metavar="S", help=f"only tasks of this status: {', '.join(LIVE_TASK)}"
    )
    tasks.add_argument("--state", metavar="S", help="only tasks of this state")
    tasks.add_argument(
        "--supervisor", metavar="NAME", help="only the tasks that this supervisor holds"
    )
    tasks.add_argument(
        "--older-than",
        dest="older_than",
        metavar="D",
        help="only tasks queued longer ago than D, a duration such as 90s, 5m, 1h, 2d",
    )
    add_options(tasks, "tasks")
    filters = ("status", "state", "supervisor", "older_than")
    tasks.set_defaults(
        run=with_client(lister("/tasks", filters, TASK_HEADING, task_cells, "no live tasks match"))
    )
