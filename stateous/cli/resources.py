"""`stateous resource list|pause|resume|set NAME --slots N|open NAME=KEY`: the resources of a
control plane.

Like `token`, these commands speak only HTTP. A resource comes from a graph file
(`flow.resource`); `set` gives it other slots until a graph file declares other ones.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stateous.cli.parser import Commands
from stateous.cli.tokens import with_client
from stateous.model.sentences import parked_words

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
        parked = key.get("parked")
        if parked:
            lines.append(line)
            line = f"  {parked_text(resource['name'], key, parked)}"
        elif key["closed_until"]:
            line += f"; rate lets one in at {key['closed_until']}"
        lines.append(line)
    return lines


def parked_text(name: str, key: dict[str, Any], parked: dict[str, Any]) -> str:
    """`parked: llm=acct-1 until 14:05:10, 37 tasks waiting; reason: 429 ...` (and how it
    reopens, and a breaker's fingerprint)."""
    text = parked_words(name, key["key"], parked["until"], key["waiting"], parked["reason"])
    if parked.get("fingerprint"):
        text += f"; fingerprint {parked['fingerprint']}"
    if parked.get("reopening"):
        text += f"; reopening: {parked['reopening']}"
    return text


#: What `resource list` prints when no resource is declared, rather than nothing at all.
NO_RESOURCES = "no resources: no workflow served declares one"


def listed(client: Client, args: argparse.Namespace) -> list[str]:
    lines = [line for resource in client.resources() for line in resource_lines(resource)]
    return lines or [NO_RESOURCES]


def acted(client: Client, args: argparse.Namespace) -> list[str]:
    body = {"slots": args.slots} if args.verb == "set" else {}
    return resource_lines(client.resource_action(args.name, args.verb, **body))


def opened(client: Client, args: argparse.Namespace) -> list[str]:
    name, _, key = args.key.partition("=")
    return resource_lines(client.resource_action(name, "open", key=key))


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> None:
    """Add `resource list|pause|resume|set|open` to the parser."""
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
    reopen = verbs.add_parser(
        "open", parents=[url], help="reopen a parked key at once (a quota or a breaker)"
    )
    reopen.add_argument("key", metavar="NAME=KEY", help="the resource and its parked key")
    reopen.set_defaults(run=with_client(opened))
