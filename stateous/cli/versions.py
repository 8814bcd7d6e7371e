"""`stateous workflow list|show`: the graph files a control plane's database keeps.

Every graph file served is kept, and tokens move by the one they started on; these
commands show which versions live tokens still run on, and print an older graph file so
that it can be read or served again. Like `token`, they speak only HTTP.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from stateous.cli.parser import Commands
from stateous.cli.tokens import with_client

if TYPE_CHECKING:
    from stateous.client import Client


def version_line(version: dict[str, object]) -> str:
    """One version: checksum, workflow, live tokens, when first and last served."""
    now = "  (served now)" if version.get("served") else ""
    return (
        f"{version['checksum']}  {version['workflow']}  {version['live']} live  "
        f"first served {version['first_served_at']}  last served "
        f"{version['last_served_at']}{now}"
    )


def listed(client: Client, args: argparse.Namespace) -> list[str]:
    return [version_line(version) for version in client.workflows()]


def shown(client: Client, args: argparse.Namespace) -> list[str]:
    return [json.dumps(client.workflow(args.checksum), indent=2)]


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> None:
    """Add `workflow list` and `workflow show` to the parser."""
    workflow = commands.add_parser(
        "workflow",
        help="list the graph files kept, or print one",
        description="List the graph files the control plane's database keeps, or print one.",
    )
    verbs = workflow.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser(
        "list", parents=[url], help="every graph file kept, with its live tokens"
    )
    listing.set_defaults(run=with_client(listed))
    show = verbs.add_parser("show", parents=[url], help="print the graph file of a checksum")
    show.add_argument("checksum", metavar="CHECKSUM", help="the checksum, e.g. sha256:3f2a...")
    show.set_defaults(run=with_client(shown))
