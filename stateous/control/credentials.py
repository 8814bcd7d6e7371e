"""Keeping credentials: making one (its secret is shown once, the database keeps its
SHA-256), revoking one (never the last live operator without `force`), turning
authentication on and off, and the supervisors a supervisor credential may act as.
The `auth` commands call these; the API's access (`http/access.py`) reads what they keep
(`setting`, `by_digest`, `live`) and notes when each was last used (`touch`).
"""

from __future__ import annotations

import hashlib
import secrets

from stateous.control.store import CredentialRow, Store, Tx
from stateous.control.webhooks import Hook, hook_problem, kept
from stateous.model.errors import Failure
from stateous.model.limits import SUPERVISOR_NAME_LIMIT
from stateous.model.names import name_problem, plain_text
from stateous.model.vocabulary import Role

#: How a secret starts, so that one found in a file or a log is recognised.
PREFIX = "stq_"


class CredentialError(Failure):
    """A credential cannot be made or revoked; the message says why."""


def new_secret() -> str:
    """A random secret of 256 bits, in URL-safe letters."""
    return PREFIX + secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    """What the database keeps of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def add_credential(
    store: Store,
    name: str,
    role: Role,
    *,
    events: list[str] | None = None,
    may_start: bool = False,
    hmac_key: str | None = None,
    supervisor: str | None = None,
    supervisor_prefix: str | None = None,
    hook: Hook | None = None,
) -> str:
    """Keep a new credential and answer its secret, which is kept nowhere else. A supervisor
    credential acts as `supervisor`, or as every name that starts with `supervisor_prefix`;
    with neither, as the supervisor of its own name. The events a GitHub webhook's `hook`
    fires count among its `events`."""
    problem = name_problem(name)
    if problem is not None:
        raise CredentialError(f"a credential's {problem}")
    bound = binding(role, name, supervisor, supervisor_prefix)
    if hook is not None:
        events = sorted({*(events or ()), *hook.kinds.values()})
    if role == Role.WEBHOOK and not events:
        raise CredentialError("a webhook credential names the events it may fire: --events")
    if role != Role.WEBHOOK and (events or may_start or hmac_key):
        raise CredentialError(
            "--events, --may-start, --hmac and --github-events are for webhook credentials"
        )
    if hook is not None and (problem := hook_problem(hook, may_start)) is not None:
        raise CredentialError(problem)
    if hook is not None and hmac_key is None:
        raise CredentialError("a GitHub webhook's deliveries are signed: --hmac")
    for event in events or []:
        if (problem := name_problem(event)) is not None:
            raise CredentialError(f"an event's {problem}")
    secret = new_secret()

    def operation(tx: Tx) -> None:
        if any(row.name == name for row in tx.credentials()):
            raise CredentialError(f"a credential named {name!r} exists; revoke it or pick another")
        tx.put_credential(
            CredentialRow(
                name,
                role,
                events,
                may_start,
                hmac_key,
                digest(secret),
                tx.now,
                supervisor=bound,
                supervisor_prefix=supervisor_prefix is not None,
                github=kept(hook),
            )
        )
        tx.set_auth(True)

    store.write(operation)
    return secret


def revoke_credential(store: Store, name: str, *, force: bool = False) -> bool:
    """Revoke a live credential; answer whether it was the last live one. The last live
    operator is revoked only with `force`: without one, no one may steer tokens."""

    def operation(tx: Tx) -> bool:
        live = [row for row in tx.credentials() if row.revoked_at is None]
        if name not in {row.name for row in live}:
            raise CredentialError(f"no credential named {name!r} is in use")
        operators = [row.name for row in live if row.role == Role.OPERATOR]
        if operators == [name] and not force:
            raise CredentialError(
                f"{name!r} is the last live operator credential: without it no one may steer "
                "tokens; add another first (stateous auth add NAME --role operator), or "
                "revoke it with --force"
            )
        tx.revoke_credential(name)
        return len(live) == 1

    return store.write(operation)


def set_authentication(store: Store, on: bool) -> bool:
    """Turn authentication on or off in the database; answer whether that changed it. No
    ledger entry: a serve logs the change when its clock next reads it."""

    def operation(tx: Tx) -> bool:
        if tx.auth_on() == on:
            return False
        tx.set_auth(on)
        return True

    return store.write(operation)


def setting(store: Store) -> tuple[bool, frozenset[str]]:
    """Whether authentication is on, and the names of the live credentials."""

    def operation(tx: Tx) -> tuple[bool, frozenset[str]]:
        live = frozenset(row.name for row in tx.credentials() if row.revoked_at is None)
        return tx.auth_on(), live

    return store.read(operation)


def by_digest(store: Store, hashed: str) -> CredentialRow | None:
    """The credential whose secret has this SHA-256, revoked or not."""
    return store.read(lambda tx: tx.credential(hashed))


def live(store: Store) -> list[CredentialRow]:
    """The credentials not revoked."""
    return [row for row in store.read(lambda tx: tx.credentials()) if row.revoked_at is None]


def touch(store: Store, name: str) -> None:
    """Write that the credential `name` was used now."""
    store.write(lambda tx: tx.touch_credential(name))


def binding(role: Role, name: str, supervisor: str | None, prefix: str | None) -> str | None:
    """The name or prefix that a new credential is bound to; None for a role that claims no
    task."""
    if role != Role.SUPERVISOR:
        if supervisor is not None or prefix is not None:
            raise CredentialError(
                "--supervisor-name and --supervisor-prefix are for supervisor credentials"
            )
        return None
    bound = prefix if prefix is not None else supervisor
    if bound is None:
        return name
    if not plain_text(bound, SUPERVISOR_NAME_LIMIT):
        raise CredentialError(
            f"a supervisor's name or prefix has 1 to {SUPERVISOR_NAME_LIMIT} characters and no "
            "control characters"
        )
    return bound
