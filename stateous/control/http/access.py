"""Who may call the API: the credential of each request, the rule of each route, and the
browser's limits; `credentials` makes and revokes the credentials that this module reads.

A credential is a name, a role and a random secret, of which the database keeps
only the SHA-256. Authentication is on from the first credential added until
`stateous auth disable` (never, with `serve --no-auth`), also while no credential
is live, since revoking the last one must not open the door: then every request
but `GET /health` carries `Authorization: Bearer SECRET`, looked up at each
request, so that a revocation counts at once. Each route names the roles that may call it
(`routing.RULES`); a webhook may fire only its own events, and start tokens only when it
was made with `--may-start`; a webhook with an HMAC key must also sign each
delivery over its exact body, and a signed delivery without `Authorization` names its
webhook by the signature alone (`POST /hooks/{name}` by the key of `name` only, and a
GitHub webhook calls no other route); a supervisor credential acts only as the supervisors
it is bound to (`Caller.act_as`). A browser cannot be made to call the API from
another origin: the `Host` must be one this control plane serves, an `Origin`
other than its own or a proxy's is refused, so is a change that the browser says
another site sent, and every CORS preflight. Nothing here speaks HTTP:
the API asks, this module answers or raises the refusal.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from stateous.control import credentials
from stateous.control.credentials import PREFIX, digest
from stateous.control.errors import EngineError
from stateous.control.store import CredentialRow, Store
from stateous.control.webhooks import Hook, hook_of
from stateous.model.codes import RefusalCode
from stateous.model.vocabulary import Role

#: The longest `Authorization` value looked at; a secret of ours is far shorter.
HEADER_LIMIT = 256
#: How often a credential's `last_used` is written again, in seconds.
TOUCH_EVERY = 60.0
#: The signature headers of a signed delivery: GitHub's, and ours.
SIGNATURES = ("X-Hub-Signature-256", "X-Stateous-Signature")
#: What a signature header holds: the body's HMAC-SHA256 in hex.
SIGNATURE = re.compile(r"sha256=[0-9a-f]{64}\Z")
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: How to give a control plane a credential again (the database's URL is left out: it may
#: hold a password).
ADD_ONE = "stateous auth add NAME --role operator --db DATABASE"
#: The refusal of a request while authentication is on and no credential is live.
NONE_LIVE = (
    "authentication is on and every credential is revoked: add one on the control plane's "
    f"computer ({ADD_ONE}) and give its secret to the client"
)
#: The start of the warning of a control plane that others reach and no credential protects.
UNPROTECTED = "no credential protects this control plane, which is reached beyond this computer"

log = logging.getLogger("stateous.control.access")


class Unauthorized(EngineError):
    code = RefusalCode.UNAUTHORIZED


class Forbidden(EngineError):
    code = RefusalCode.FORBIDDEN


@dataclass(frozen=True, slots=True)
class Rule:
    """Who may call a route: these roles, and a webhook for the route's `webhook` purpose."""

    roles: frozenset[Role]
    #: `"event"`: a webhook may fire its own events here; `"start"`: a webhook made with
    #: `--may-start` may start tokens here; `"hook"`: only the GitHub webhook that the path
    #: names, identified by its signature, may deliver here.
    webhook: str | None = None


OPERATOR = Rule(frozenset({Role.OPERATOR}))
WORK = Rule(frozenset({Role.OPERATOR, Role.SUPERVISOR}))


def bearer(header: str | None) -> str | None:
    """The secret of an `Authorization: Bearer SECRET` header; None when there is none, and
    `Unauthorized` when it cannot be one of ours. The sentence never holds the secret."""
    if header is None:
        return None
    scheme, _, secret = header.partition(" ")
    if (
        scheme.lower() != "bearer"
        or len(header) > HEADER_LIMIT
        or not secret.isascii()
        or not secret.startswith(PREFIX)
        or " " in secret
        or "," in secret
    ):
        raise Unauthorized("the Authorization header is not `Bearer` and one secret of Stateous")
    return secret


def signed_by(key: str, body: bytes, signature: str) -> bool:
    """Whether `signature` (`sha256=<hex>`) is the HMAC-SHA256 of `body` under `key`."""
    expected = "sha256=" + hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), signature.strip().encode(errors="replace"))


@dataclass(frozen=True, slots=True)
class Caller:
    """The credential a request was made with."""

    name: str
    role: Role
    events: frozenset[str]
    may_start: bool
    hmac_key: str | None
    #: The supervisor a supervisor credential acts as (a prefix of names when
    #: `supervisor_prefix`); None for any other role, and for a credential kept unbound.
    supervisor: str | None = None
    supervisor_prefix: bool = False
    #: How a GitHub webhook's deliveries to `POST /hooks/{name}` start and fire.
    hook: Hook | None = None

    def act_as(self, supervisor: str | None) -> None:
        """Refuse with `Forbidden` a task request that a bound supervisor credential makes
        under another supervisor's name, or under none: one box may not act for the fleet."""
        bound = self.supervisor
        if self.role != Role.SUPERVISOR or bound is None:
            return
        if supervisor is None:
            raise Forbidden(
                f"a request of the supervisor credential {self.name!r} names its supervisor "
                "in `supervisor`"
            )
        if supervisor.startswith(bound) if self.supervisor_prefix else supervisor == bound:
            return
        allowed = (
            f"supervisors whose names start with {bound!r}"
            if self.supervisor_prefix
            else f"supervisor {bound!r}"
        )
        raise Forbidden(f"the credential {self.name!r} acts only as {allowed}, not {supervisor!r}")

    def start_with(self, budget: object, priority: int) -> None:
        """Refuse with `Forbidden` a webhook's start that sets a budget or a priority: raising
        a budget is an operator's, and a webhook's tokens would otherwise go first, with what
        they like to spend."""
        if self.role == Role.WEBHOOK and (budget is not None or priority):
            raise Forbidden(
                f"the credential {self.name!r} (webhook) may not set a budget or a priority"
            )


def caller_of(row: CredentialRow) -> Caller:
    return Caller(
        name=row.name,
        role=Role(row.role),
        events=frozenset(row.events or ()),
        may_start=row.may_start,
        hmac_key=row.hmac_key,
        supervisor=row.supervisor,
        supervisor_prefix=row.supervisor_prefix,
        hook=hook_of(row.github),
    )


class Access:
    """The credentials of one database, as the API checks them at each request."""

    def __init__(self, store: Store, *, enabled: bool = True, exposed: bool = False) -> None:
        self.store = store
        #: False with `serve --no-auth`: no request needs a credential, none is asked.
        self.enabled = enabled
        #: Whether other computers reach the API: a `--listen` beyond loopback, or a proxy
        #: named by `--allowed-host`.
        self.exposed = exposed
        #: The setting of the database, and the names of its live credentials, as the last
        #: `refresh` read them; None before the first.
        self._on: bool | None = None
        self._live: frozenset[str] = frozenset()
        self._warned: str | None = None
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()
        self._read()

    @property
    def required(self) -> bool:
        """Whether a request needs a credential: authentication is on in the database. The
        clock asks the database each second (`refresh`)."""
        return self.enabled and bool(self._on)

    @property
    def state(self) -> Literal["on", "off", "no_credential"]:
        """What `/health` says of authentication: `on`, `off`, or `no_credential` (on, and
        every request but `/health` refused, since none is live)."""
        if not self.required:
            return "off"
        return "on" if self._live else "no_credential"

    @property
    def warning(self) -> str | None:
        """The warning of a control plane that others reach and no live credential protects."""
        if not self.enabled or not self.exposed or self._live:
            return None
        if self.required:
            why = "every credential is revoked, so every request but /health is refused"
        else:
            why = "authentication is off, so whoever reaches it may do anything"
        return f"{UNPROTECTED} (--listen, --allowed-host): {why}; add a credential: {ADD_ONE}"

    def keeps(self, caller: str | None) -> bool:
        """Whether a stream opened by `caller` (None: without a credential) may stay open."""
        return caller in self._live if caller is not None else not self.required

    def _read(self) -> bool | None:
        """Read the setting and the live credentials; answer the setting read before."""
        if not self.enabled:
            return self._on
        before = self._on
        self._on, self._live = credentials.setting(self.store)
        return before

    def refresh(self) -> None:
        """Read the setting and the live credentials again; log a change of the setting, and
        the warning of `warning` when it appears (serve's start is the first refresh)."""
        before = self._read()
        if before is not None and before != self._on:
            log.info("authentication was turned %s in the database", "on" if self._on else "off")
        warning = self.warning
        if warning is not None and warning != self._warned:
            log.warning("%s", warning)
        self._warned = warning

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller of a request, by its `Authorization` header: None when it has none and
        none is needed; `Unauthorized` for a missing, unknown or revoked secret."""
        if not self.enabled:
            return None
        secret = bearer(authorization)
        if secret is None:
            if self.required and not self._live:
                raise Unauthorized(NONE_LIVE)
            if self.required:
                raise Unauthorized("this control plane needs a credential: Authorization: Bearer")
            return None
        hashed = digest(secret)
        row = credentials.by_digest(self.store, hashed)
        if row is None or row.revoked_at is not None:
            raise Unauthorized("the credential is unknown or revoked")
        if not hmac.compare_digest(row.secret_hash, hashed):
            raise Unauthorized("the credential is unknown or revoked")
        self._touch(row)
        return caller_of(row)

    def identify_signed(
        self, body: bytes, signature: str, rule: Rule, params: dict[str, str]
    ) -> Caller | None:
        """The webhook whose HMAC key signed `body`, for a delivery that carries no
        `Authorization` (as GitHub's do) to a route of `rule`; None when no key matches.

        Only the keys of the live webhooks that the rule lets call this route (fire the event
        of the path, or start) are tried, and none for a signature that is not `sha256=` and
        64 hex digits: a stranger's delivery costs at most one HMAC of the body per webhook
        that may call the route, not one per webhook.
        """
        if not SIGNATURE.match(signature.strip()):
            return None
        for row in self._signing():
            caller = caller_of(row)
            if permits(caller, rule, params) and signed_by(row.hmac_key or "", body, signature):
                self._touch(row)
                return caller
        return None

    def identify_hook(self, name: str, body: bytes, signature: str | None) -> Caller:
        """The GitHub webhook `name`, when its key signed `body`: only that key is tried.
        `Unauthorized` otherwise, with one sentence whether or not such a webhook exists."""
        refused = Unauthorized(
            f"the delivery is not signed (X-Hub-Signature-256) by the key of a GitHub "
            f"webhook named {name!r}"
        )
        if self.required and not self._live:
            raise Unauthorized(NONE_LIVE)
        if signature is None or not SIGNATURE.match(signature.strip()):
            raise refused
        row = next((row for row in self._signing() if row.name == name and row.github), None)
        if row is None or not signed_by(row.hmac_key or "", body, signature):
            raise refused
        self._touch(row)
        return caller_of(row)

    def _signing(self) -> list[CredentialRow]:
        """The live webhooks that sign their deliveries."""
        return [row for row in credentials.live(self.store) if row.hmac_key]

    def _touch(self, row: CredentialRow) -> None:
        """Write when a credential was last used, once a minute at most."""
        now = time.time()
        with self._lock:
            if now - self._touched.get(row.name, row.last_used or 0.0) < TOUCH_EVERY:
                return
            self._touched[row.name] = now
        credentials.touch(self.store, row.name)


def permits(caller: Caller, rule: Rule, params: dict[str, str]) -> bool:
    """Whether the caller's role, or what its webhook was made for, lets it call a route of
    `rule` with these path parameters. A GitHub webhook calls only its own `/hooks/{name}`."""
    if caller.role in rule.roles:
        return True
    if caller.role != Role.WEBHOOK:
        return False
    if caller.hook is not None:
        # A GitHub signature covers the body only, not the token or the event of a general
        # route: there, one captured delivery could fire on any token, as often as sent.
        return rule.webhook == "hook" and caller.name == params.get("name")
    if rule.webhook == "event":
        return params.get("event") in caller.events
    if rule.webhook == "start":
        return caller.may_start
    return rule.webhook == "hook" and caller.hook is not None and caller.name == params.get("name")


def allow(caller: Caller | None, rule: Rule, params: dict[str, str]) -> None:
    """Refuse with `Forbidden` when the caller may not call a route of `rule`."""
    if caller is None or permits(caller, rule, params):
        return
    if caller.hook is not None:
        raise Forbidden(f"the GitHub webhook {caller.name!r} delivers only to /hooks/{caller.name}")
    if caller.role == Role.WEBHOOK and rule.webhook == "event":
        raise Forbidden(f"the credential {caller.name!r} may not fire {params.get('event')!r}")
    raise Forbidden(f"the credential {caller.name!r} ({caller.role}) may not do this")


# the browser's limits

#: The port of each scheme that browsers leave out of an origin.
DEFAULT_PORTS = {"http": 80, "https": 443}
#: The methods that only read; any other may change something.
READS = frozenset({"GET", "HEAD"})


def origin_of(scheme: str, host: str, port: int | None) -> str:
    """An origin written as browsers write it in `Origin`: no default port, brackets around
    an IPv6 address."""
    shown = f"[{host}]" if ":" in host else host
    return (
        f"{scheme}://{shown}"
        if port in (None, DEFAULT_PORTS[scheme])
        else f"{scheme}://{shown}:{port}"
    )


def proxy_site(entry: str) -> tuple[str, frozenset[str]]:
    """The host name of an `--allowed-host` entry and the origins whose pages may call: a
    name alone stands for `http://NAME` and `https://NAME` on their default ports, where a
    proxy serves; `SCHEME://NAME:PORT` for exactly that origin. `ValueError` says why an
    entry is neither."""
    text = entry.strip().lower()
    if "://" not in text:
        if not text or (any(mark in text for mark in "/:@ ") and not is_address(text)):
            raise ValueError(
                f"{entry!r} is neither a host name nor an origin such as https://NAME:PORT"
            )
        return text, frozenset(origin_of(scheme, text, None) for scheme in DEFAULT_PORTS)
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in DEFAULT_PORTS
        or not parts.hostname
        or port == -1
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise ValueError(f"{entry!r} is not an origin such as https://NAME:PORT")
    return parts.hostname, frozenset({origin_of(parts.scheme, parts.hostname, port)})


def served_hosts(listen_host: str, allowed: Iterable[str]) -> frozenset[str]:
    """The host names a request may name in `Host`: loopback names, the `--listen` host (and
    this computer's names when it listens on every address), and each `--allowed-host`.
    An address written as digits is always taken: a page cannot rebind one."""
    names = set(LOOPBACK_NAMES) | {proxy_site(entry)[0] for entry in allowed}
    if listen_host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    else:
        names.add(listen_host.lower())
    return frozenset(names)


def served_origins(allowed: Iterable[str]) -> frozenset[str]:
    """The origins of the proxies in front (`--allowed-host`), whose pages may call; the
    control plane's own origin is the request's (`check_origin`)."""
    return frozenset(origin for entry in allowed for origin in proxy_site(entry)[1])


def host_name(header: str) -> str:
    """The host of a `Host` header or of an origin's authority, without its port."""
    host = header.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_host(header: str | None, hosts: frozenset[str]) -> None:
    """Refuse a request whose `Host` this control plane does not serve (a page whose name
    was made to point here, by DNS rebinding, would name its own)."""
    host = host_name(header or "")
    if host in hosts or is_address(host):
        return
    raise Forbidden(
        f"the request names the host {host!r}, which this control plane does not serve; "
        "serve with --allowed-host for the name of a proxy"
    )


def target_host(target: str) -> str | None:
    """The authority that an absolute-form request target names (`GET http://HOST/path`,
    as a proxy is asked), which counts as the `Host` does; None for the usual `/path`."""
    if target.startswith("/"):
        return None
    return urlsplit(target).netloc


def check_origin(origin: str | None, host: str | None, origins: frozenset[str]) -> None:
    """Refuse a request that a web page of another origin sent (browsers name the page's
    origin): only the control plane's own pages may, at the very address the request went
    to (`http://` and its `Host`), or on an origin of a proxy in front (`origins`). Scheme,
    host and port all count: a page of another port on the same computer is another site."""
    if origin is None:
        return
    said = origin.strip().lower()
    if said == f"http://{(host or '').strip().lower()}" or said in origins:
        return
    raise Forbidden(f"a web page of {origin!r} may not call this control plane")


def check_fetch_site(method: str, site: str | None) -> None:
    """Refuse a change that a browser says a page of another site asked for
    (`Sec-Fetch-Site: cross-site`); a link from another site to a page that reads is fine."""
    if method not in READS and (site or "").strip().lower() == "cross-site":
        raise Forbidden(f"a web page of another site may not send {method} (Sec-Fetch-Site)")
