"""`stateous auth`: the credentials of a control plane's database: add, list, revoke,
and authentication itself: enable, disable.

These commands open the database itself, beside a running `serve` if there is
one: a credential added or revoked counts for the next request (an added first
credential turns authentication on within a second, and it stays on when every
credential is revoked, until `auth disable`). A secret is printed once, when it is
made, and never again; the database keeps only its SHA-256.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from stateous.cli.errors import CommandError
from stateous.cli.parser import Commands
from stateous.control.defaults import DEFAULT_DB
from stateous.model.vocabulary import Role

if TYPE_CHECKING:
    from stateous.control.store import CredentialRow, Store
    from stateous.control.webhooks import Hook


@contextmanager
def database(url: str, *, make: bool = False) -> Iterator[Store]:
    """Open the database at `url`; a SQLite file that is not there is made only when `make`
    (a first credential may come before the first serve), not to list or revoke."""
    from stateous.control.store import StoreError, open_database

    try:
        store = open_database(url, make=make)
    except StoreError as ex:
        raise CommandError(str(ex)) from None
    try:
        yield store
    finally:
        store.close()


def when(moment: float | None) -> str:
    if moment is None:
        return "never"
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S")


def kinds_of(text: str) -> dict[str, str]:
    """`--github-events push=pushed,pull_request`: each GitHub kind and the event it fires
    (the kind's own name when none is given)."""
    pairs = (item.strip().partition("=") for item in text.split(","))
    return {kind.strip(): (event.strip() or kind.strip()) for kind, _, event in pairs}


def hook_of(args: argparse.Namespace) -> Hook | None:
    """The GitHub webhook's mapping that the options give; None without --github-events."""
    from stateous.control.webhooks import Hook

    mapped = (args.token_from, args.payload_from, args.start_context_from)
    if args.github_events is None:
        if any(option is not None for option in mapped):
            raise CommandError(
                "--token-from, --payload-from and --start-context-from need --github-events"
            )
        return None
    if args.token_from is None:
        raise CommandError("a GitHub webhook names the token of a delivery: --token-from")
    return Hook(kinds_of(args.github_events), *mapped)


def run_add(args: argparse.Namespace) -> int:
    from stateous.control.credentials import add_credential, new_secret

    hook = hook_of(args)
    events = [event.strip() for event in args.events.split(",")] if args.events else None
    hmac_key = new_secret() if args.hmac else None
    with database(args.db, make=True) as store:
        secret = add_credential(
            store,
            args.name,
            Role(args.role),
            events=events,
            may_start=args.may_start,
            hmac_key=hmac_key,
            supervisor=args.supervisor_name,
            supervisor_prefix=args.supervisor_prefix,
            hook=hook,
        )
    print(secret)
    if hmac_key is not None:
        print(f"hmac key: {hmac_key}")
    print(
        f"the secret of {args.name!r} is shown once: keep it now (a file that only you can "
        "read, given to the client as --token-file or STATEOUS_TOKEN)",
        file=sys.stderr,
    )
    return 0


def acts_as(row: CredentialRow) -> str:
    """The supervisors that a supervisor credential may act as, for `auth list`."""
    if row.supervisor is None:
        return "acts as any supervisor (unbound: replace it with a bound one)"
    if row.supervisor_prefix:
        return f"acts as names starting {row.supervisor!r}"
    return f"acts as {row.supervisor!r}"


def github_parts(hook: Hook) -> list[str]:
    """What `auth list` shows of a GitHub webhook's mapping."""
    kinds = ",".join(f"{kind}={event}" for kind, event in hook.kinds.items())
    parts = [f"github {kinds}", f"token from {hook.token_from}"]
    if hook.payload_from is not None:
        parts.append(f"payload from {hook.payload_from}")
    if hook.start_context_from is not None:
        parts.append(f"start context from {hook.start_context_from}")
    return parts


def run_list(args: argparse.Namespace) -> int:
    from stateous.control.webhooks import hook_of as hook_of_row

    with database(args.db) as store:
        rows = store.read(lambda tx: tx.credentials())
    for row in rows:
        parts = [
            row.name,
            row.role,
            f"created {when(row.created_at)} UTC",
            f"last used {when(row.last_used)}" + (" UTC" if row.last_used else ""),
        ]
        if row.events:
            parts.append(f"events {','.join(row.events)}")
        if row.may_start:
            parts.append("may start")
        if row.hmac_key:
            parts.append("signed")
        if (hook := hook_of_row(row.github)) is not None:
            parts.extend(github_parts(hook))
        if row.role == Role.SUPERVISOR:
            parts.append(acts_as(row))
        if row.revoked_at is not None:
            parts.append(f"revoked {when(row.revoked_at)} UTC")
        print("  ".join(parts))
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    from stateous.control.credentials import revoke_credential

    with database(args.db) as store:
        last = revoke_credential(store, args.name, force=args.force)
    print(f"revoked {args.name}")
    if last:
        print(
            "no credential is live: authentication stays on, so every request but /health is "
            "refused until one is added (stateous auth add NAME --role operator)",
            file=sys.stderr,
        )
    return 0


#: What `auth enable` and `auth disable` print, by the setting they leave.
SETTING = {
    True: "authentication is on: every request but /health needs a live credential",
    False: "authentication is off: whoever reaches the control plane may call every route",
}


def run_setting(args: argparse.Namespace) -> int:
    """`auth enable` or `auth disable`: say the setting left, and whether it already was."""
    from stateous.control.credentials import set_authentication

    on = args.verb == "enable"
    with database(args.db) as store:
        changed = set_authentication(store, on)
    print(SETTING[on] if changed else f"{SETTING[on].split(':')[0]}: it already was")
    return 0


def add_commands(commands: Commands) -> None:
    """Add `auth add`, `auth list`, `auth revoke`, `auth enable` and `auth disable` to the
    parser."""
    auth = commands.add_parser(
        "auth",
        help="add, list and revoke the credentials of a control plane; turn authentication "
        "on or off",
        description="The credentials that the control plane asks of every request but "
        "/health, from the first one added until `auth disable`.",
    )
    verbs = auth.add_subparsers(dest="verb", metavar="VERB", required=True)

    def with_db(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--db", default=DEFAULT_DB, metavar="URL", help=f"the database (default: {DEFAULT_DB})"
        )

    add = verbs.add_parser(
        "add",
        help="make a credential and print its secret, once",
        description="Make a credential and print its secret once, on one line.",
    )
    add.add_argument("name", metavar="NAME", help="the credential's name, e.g. ci-webhook")
    add.add_argument(
        "--role",
        required=True,
        choices=[role.value for role in Role],
        help="operator: every route; supervisor: claims, heartbeats, reports, notes, memory, "
        "as its own supervisors only; webhook: only its events",
    )
    add.add_argument(
        "--events", metavar="E1,E2", help="the events that a webhook credential may fire"
    )
    add.add_argument(
        "--may-start", action="store_true", help="a webhook credential may also start tokens"
    )
    add.add_argument(
        "--hmac",
        action="store_true",
        help="a webhook's deliveries are signed (X-Hub-Signature-256): print an HMAC key too",
    )
    add.add_argument(
        "--github-events",
        metavar="KIND=EVENT,...",
        help="a webhook credential takes GitHub's deliveries on POST /hooks/NAME: each "
        "X-GitHub-Event kind it takes and the event it fires (push=pushed; push alone fires "
        "push); other kinds are ignored. Needs --hmac and --token-from",
    )
    add.add_argument(
        "--token-from",
        metavar="PATH",
        help="the token of a GitHub delivery: a dotted path into its body "
        "(pull_request.head.ref), or =ID for one fixed token",
    )
    add.add_argument(
        "--payload-from",
        metavar="PATH",
        help="the object of a GitHub delivery given as the event's payload (default: the "
        "whole body)",
    )
    add.add_argument(
        "--start-context-from",
        metavar="PATH",
        help="the object of a GitHub delivery given as the context of a token it starts "
        "(with --may-start; default: none)",
    )
    bound = add.add_mutually_exclusive_group()
    bound.add_argument(
        "--supervisor-name",
        metavar="NAME",
        help="a supervisor credential acts only as the supervisor NAME (default: the "
        "credential's own name)",
    )
    bound.add_argument(
        "--supervisor-prefix",
        metavar="PREFIX",
        help="a supervisor credential acts only as supervisors whose names start with PREFIX",
    )
    with_db(add)
    add.set_defaults(run=run_add)
    listed = verbs.add_parser(
        "list",
        help="list the credentials (never their secrets)",
        description="List the credentials: name, role, when made and last used.",
    )
    with_db(listed)
    listed.set_defaults(run=run_list)
    revoke = verbs.add_parser(
        "revoke",
        help="revoke a credential, at once",
        description="Revoke a credential: its next request is refused.",
    )
    revoke.add_argument("name", metavar="NAME")
    revoke.add_argument(
        "--force",
        action="store_true",
        help="revoke the last live operator credential too (authentication stays on)",
    )
    with_db(revoke)
    revoke.set_defaults(run=run_revoke)
    for verb, does in (("enable", "on"), ("disable", "off")):
        setting = verbs.add_parser(
            verb,
            help=f"turn authentication {does}, at once, also under a running serve",
            description=f"Turn authentication {does} in the database; a running serve "
            "follows within a second and logs it.",
        )
        with_db(setting)
        setting.set_defaults(run=run_setting)
