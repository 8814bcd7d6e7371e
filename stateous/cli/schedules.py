"""`stateous schedule add|list|pause|resume|remove`: the schedules of a control plane.

Like `token`, these commands speak only HTTP. A schedule of the graph file can be paused
and resumed here; only a new graph file removes it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stateous.cli.parser import Commands
from stateous.cli.tokens import json_object, with_client
from stateous.model.vocabulary import CATCH_UPS, OVERLAPS

if TYPE_CHECKING:
    from stateous.client import Client


def schedule_line(schedule: dict[str, Any]) -> str:
    """One schedule: name, cron and zone, its rules, then where its occurrences stand."""
    state = "paused" if schedule["paused"] else f"next {schedule['next_at']}"
    line = (
        f"{schedule['name']}  {schedule['cron']!r} {schedule['tz']}  {schedule['source']}  "
        f"overlap={schedule['overlap']} catch_up={schedule['catch_up']}  {state}"
    )
    if schedule["last_at"] is not None:
        line += f"  last {schedule['last_at']} ({schedule['last_token'] or 'no token'})"
    if schedule["waiting_at"] is not None:
        line += f"  waiting {schedule['waiting_at']}"
    skip = schedule["last_skip"]
    if skip is not None:
        line += f"  skipped {skip['at']}: {skip['reason']}"
    return line


def listed(client: Client, args: argparse.Namespace) -> list[str]:
    return [schedule_line(schedule) for schedule in client.schedules()]


def added(client: Client, args: argparse.Namespace) -> list[str]:
    options: dict[str, Any] = {"tz": args.tz, "overlap": args.overlap, "catch_up": args.catch_up}
    context = json_object(args.context, "--context")
    if context is not None:
        options["context"] = context
    return [schedule_line(client.add_schedule(args.name, args.cron, **options))]


def acted(client: Client, args: argparse.Namespace) -> list[str]:
    return [schedule_line(client.schedule_action(args.name, args.verb))]


def add_commands(commands: Commands, url: argparse.ArgumentParser) -> None:
    """Add `schedule add|list|pause|resume|remove` to the parser."""
    schedule = commands.add_parser(
        "schedule",
        help="add, list, pause, resume and remove the schedules that start tokens",
        description="The schedules that start tokens of the served workflow by themselves.",
    )
    verbs = schedule.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser(
        "list", parents=[url], help="every schedule, its next and last occurrences, its skips"
    )
    listing.set_defaults(run=with_client(listed))
    add = verbs.add_parser("add", parents=[url], help="add a schedule at run time")
    add.add_argument("name", metavar="NAME", help="the schedule's name, also its tokens' prefix")
    add.add_argument("cron", metavar="CRON", help="a cron line of 5 fields, e.g. '0 3 * * *'")
    add.add_argument("--tz", default="UTC", help="the time zone, e.g. Europe/Paris (default: UTC)")
    add.add_argument("--context", metavar="CONTEXT_JSON", help="the context of each token")
    add.add_argument(
        "--overlap", choices=OVERLAPS, default="skip",
        help="while the last token is live: skip, keep one start waiting, or start anyway",
    )  # fmt: skip
    add.add_argument(
        "--catch-up", dest="catch_up", choices=CATCH_UPS, default="latest",
        help="after an outage: start one token for the missed occurrences, or none",
    )  # fmt: skip
    add.set_defaults(run=with_client(added))
    for verb, line in (
        ("pause", "start no token until resumed"),
        ("resume", "start tokens again, from the next occurrence"),
        ("remove", "remove a schedule added at run time"),
    ):
        parser = verbs.add_parser(verb, parents=[url], help=line)
        parser.add_argument("name", metavar="NAME", help="the schedule's name")
        parser.set_defaults(run=with_client(acted))
