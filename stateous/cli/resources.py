"""`stateous resource list|pause|resume|set NAME --slots N`: the resources of a control plane.

Like `token`, these commands speak only HTTP. A resource comes from a graph file
(`flow.resource`); `set` gives it other slots until a graph file declares other ones.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stateous.cli.parser import Commands
from stateous.cli.tokens import with_client

if TYPE_CHECKING:
    from stateous.client import Client


def resource_lines(resource: dict[str, Any]) -> list[str]:
    """A resource: its name, slots, rate and state, then a line for each key in use."""
    rate = f" rate {resource['rate']}" if resource["rate"] else ""
    state = "  paused" if resource["paused"] else ""
    lines = [
        f"{resource['name']}  {resource['slots']} slot(s) a key{rate}  "
        f"{resource['in_use']} in use, {resource['waiting']} waiting{state}"
    ]
    for key in resource["keys"]:
        takers = ", ".join(
            f"task {t['task']} of {t['token']} ({t['status']})" for t in key["takers"]
        )
        line = f"  {key['key'] or '(one key)'}: {key['in_use']} in use"
        if takers:
            line += f" by {takers}"
        if key["waiting"]:
            line += f"; {key['waiting']} waiting"
        if key["closed_until"]:
            line += f"; rate lets one in at {key['closed_until']}"
        lines.append(line)
    return lines


def listed(client: Client, args: argparse.Namespace) -> list[str]:
    return [line for resource in client.resources() for line in resource_lines(resource)]


def acted(client: Client, args: argparse.Namespace) -> list[str]:
    body = {"slots": args.slots} if args.verb == "set" else {}
    return resource_lines(client.resource_action(args.name, args.verb, **body))


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> None:
    """Add `resource list|pause|resume|set` to the parser."""
    resource = commands.add_parser(
        "resource",
        help="list, pause, resume and set the slots of the resources that tasks share",
        description="The resources that tasks share: slots per key, a rate, paused or not.",
    )
    verbs = resource.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser(
        "list", parents=[url], help="every resource, its keys in use, who took them, who waits"
    )
    listing.set_defaults(run=with_client(listed))
    for verb, line in (
        ("pause", "let no task in until resumed"),
        ("resume", "let the oldest waiting tasks in again"),
        ("set", "give the resource other slots per key"),
    ):
        parser = verbs.add_parser(verb, parents=[url], help=line)
        parser.add_argument("name", metavar="NAME", help="the resource's name")
        if verb == "set":
            parser.add_argument("--slots", type=int, required=True, help="slots per key")
        parser.set_defaults(run=with_client(acted))
