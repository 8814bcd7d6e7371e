"""`stateous token migrate`: move live tokens, with their children, to another graph file.

One token (`ID`), every live top token of a graph file (`--all-of CHECKSUM`), or a plan
(`--where`, then `--apply`, as the other steering commands). `--to` names the graph file
to move to; without it, the served one. `--dry-run` asks the control plane what would
move, and moves nothing. `--all-of` prints one line per token, moved or refused with the
reason, and exits 1 when any was refused; the tokens are read first, then moved one
transaction each, so a token that moves meanwhile is not read twice.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stateous.cli import plans
from stateous.cli.errors import CommandError
from stateous.cli.parser import Commands
from stateous.cli.tokens import with_client

if TYPE_CHECKING:
    from stateous.client import Client

#: The most tokens that `--all-of` reads.
MOST = 100_000
#: The statuses of a live token.
LIVE = ("active", "paused")


def moved_lines(answer: dict[str, Any]) -> list[str]:
    """What a migration did (or, in a dry run, would do): a line, then each token moved."""
    token, moved = answer["token"], answer["moved"]
    if not moved:
        return [f"{token}: moves by {answer['to']} already; nothing to migrate"]
    verb = "would migrate" if answer["dry_run"] else "migrated"
    lines = [f"{token}: {verb} from {answer['from']} to {answer['to']} ({len(moved)} token(s))"]
    return lines + [f"  {row['token']}  {row['state']}  {row['status']}" for row in moved]


def live_tops(client: Client, checksum: str) -> list[str]:
    """The live top tokens that move by `checksum`, by id."""
    found = [
        row["token"]
        for status in LIVE
        for row in client.listed("/tokens", MOST, checksum=checksum, status=status)
        if row.get("parent") is None
    ]
    return sorted(found)


def all_of(client: Client, args: argparse.Namespace) -> list[str]:
    """Migrate every live top token of a graph file, one line each; refused ones fail."""
    from stateous.client import Refused

    tokens = live_tops(client, args.all_of)
    if not tokens:
        return [f"no live token moves by {args.all_of}"]
    refused = 0
    for token in tokens:
        try:
            lines = moved_lines(client.migrate(token, args.to, dry_run=args.dry_run))
        except Refused as ex:
            refused += 1
            lines = [f"{token}: refused ({ex.code}): {ex.message}"]
        print("\n".join(lines), flush=True)
    if refused:
        raise CommandError(f"{refused} of {len(tokens)} token(s) were refused")
    return []


def migrate(client: Client, args: argparse.Namespace) -> list[str]:
    given = [name for name in ("id", "all_of", "where", "apply") if getattr(args, name)]
    if len(given) != 1:
        raise CommandError(
            "give one of: a token's ID, --all-of CHECKSUM, --where FILTERS, --apply PLAN"
        )
    if given[0] in ("where", "apply"):
        if args.dry_run:
            raise CommandError(
                "--dry-run checks an ID or --all-of; a plan moves nothing until applied"
            )
        return plans.run(client, "migrate", args, None, args.to)
    if args.all_of:
        return all_of(client, args)
    return moved_lines(client.migrate(args.id, args.to, dry_run=args.dry_run))


def add_command(verbs: Commands, url: argparse.ArgumentParser) -> None:
    """Add `token migrate` to the verbs of `token`."""
    command = verbs.add_parser(
        "migrate",
        parents=[url],
        help="move live tokens, with their children, to another graph file",
        description=(
            "Move a live top token, with its children, to another graph file the database "
            "keeps, when each of its tokens is in a state that the graph has with the same "
            "contract; it then moves by that graph's rules."
        ),
    )
    command.add_argument("id", metavar="ID", nargs="?", help="the top token's id")
    command.add_argument(
        "--all-of",
        metavar="CHECKSUM",
        help="every live top token of this graph file, one line each (exit 1 if any refused)",
    )
    plans.add_options(command)
    command.add_argument(
        "--to", metavar="CHECKSUM", help="the graph file to move to (default: the served one)"
    )
    command.add_argument(
        "--dry-run", action="store_true", help="print what would move, and move nothing"
    )
    command.set_defaults(run=with_client(migrate))
