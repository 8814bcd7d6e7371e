"""`stateous token pause|resume|cancel|retry|migrate --where ... | --apply PLAN`: in bulk.

`--where` makes a plan on the control plane: the exact tokens the filters select now,
kept under a plan id, acted on by none. `--apply PLAN` acts on that set, each token
once; run again after an interruption, it goes on with the tokens not acted on yet.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from stateous.cli.errors import CommandError

if TYPE_CHECKING:
    from stateous.client import Client

#: How many tokens one apply request acts on: a long plan goes in parts, so that no one
#: request holds the database's writer for the whole plan (on SQLite, a request is one
#: transaction).
PART = 100


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add `--where` and `--apply` to a steering command, whose ID becomes optional."""
    parser.add_argument(
        "--where",
        metavar="FILTERS",
        help=(
            "plan the action for every token these filters select, like "
            "'status=failed state=review' (status, state, parent, checksum, since, until): "
            "print the tokens and the plan's id, and act on none"
        ),
    )
    parser.add_argument("--apply", metavar="PLAN", help="act on each token of this plan, once")


def wants_plan(args: argparse.Namespace) -> bool:
    """Whether the command works on a plan; exactly one of ID, --where, --apply is given."""
    given = [name for name in ("id", "where", "apply") if getattr(args, name) is not None]
    if len(given) != 1:
        raise CommandError("give one of: a token's ID, --where FILTERS, --apply PLAN")
    return given[0] != "id"


def run(
    client: Client,
    action: str,
    args: argparse.Namespace,
    state: str | None,
    to: str | None = None,
) -> list[str]:
    """Make the plan of `--where`, or apply the plan of `--apply`."""
    if args.where is not None:
        return made_lines(client.make_plan(action, args.where, state, to))
    return applied_lines(applied(client, args.apply, action, state, to))


def pending(plan: dict[str, Any]) -> int:
    return sum(1 for token in plan["tokens"] if token["outcome"] == "pending")


def applied(
    client: Client, plan: str, action: str, state: str | None, to: str | None
) -> dict[str, Any]:
    """Apply the plan `PART` tokens at a time until none is pending; the last answer holds
    every token's outcome. A part that acts on none (another apply took them) ends it."""
    answer = client.apply_plan(plan, action, state, limit=PART, to=to)
    while (left := pending(answer)) > 0:
        answer = client.apply_plan(plan, action, state, limit=PART, to=to)
        if pending(answer) == left:
            break
    return answer


def made_lines(plan: dict[str, Any]) -> list[str]:
    where = " ".join(f"{key}={value}" for key, value in plan["where"].items())
    count = len(plan["tokens"])
    lines = [f"plan {plan['plan']}: {plan['action']} {count} token(s) where {where}"]
    lines += [f"  {token['token']}" for token in plan["tokens"]]
    again = "".join(f" --{option} {plan[option]}" for option in ("from", "to") if plan.get(option))
    lines.append(f"apply it with: stateous token {plan['action']} --apply {plan['plan']}{again}")
    return lines


def applied_lines(plan: dict[str, Any]) -> list[str]:
    lines = [f"plan {plan['plan']}: {plan['action']}"]
    outcomes = {"done": 0, "refused": 0, "pending": 0}
    for token in plan["tokens"]:
        outcomes[token["outcome"]] += 1
        why = f": {token['reason']}" if token["reason"] else ""
        lines.append(f"  {token['token']}: {token['outcome']}{why}")
    lines.append(", ".join(f"{count} {outcome}" for outcome, count in outcomes.items()))
    return lines
