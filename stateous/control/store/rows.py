"""The rows that a store answers, typed: the engine reads fields by name, never by position.

Times are seconds since the epoch (float) in the rows, and text in the columns
(`to_column`, UTC to the microsecond, so that they sort as text on both databases).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple


def to_iso(moment: float) -> str:
    """Show a moment as the API does: ISO 8601 in UTC, to the second, with `Z` (formatted by
    `time.strftime`, as `datetime.strftime` does after its own look for `%f` and `%z`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", datetime.fromtimestamp(moment, UTC).timetuple())


def to_column(moment: float) -> str:
    """Write a moment into a text column: UTC, no zone, to the microsecond; sorts as text."""
    return datetime.fromtimestamp(moment, UTC).isoformat(sep=" ", timespec="microseconds")[:26]


#: The epoch as a column's time is read: UTC, no zone.
_EPOCH = datetime(1970, 1, 1)


def from_column(text: str) -> float:
    """Read a moment back from a text column: its distance from the epoch, as `timestamp`
    measures an aware time, without making one (`replace` costs a request more)."""
    return (datetime.fromisoformat(text) - _EPOCH).total_seconds()


@dataclass(slots=True)
class TokenRow:
    token: str
    state: str
    status: str
    visit: int
    context: dict[str, Any]
    entered_at: float
    parent: str | None = None
    workflow: str | None = None
    #: How many times the token entered each state; `visit` is the entry of `state`.
    visits: dict[str, int] = field(default_factory=dict)
    #: The payload of the event whose transition to END completed the token, kept so that
    #: its parent's join can hand it back; None otherwise.
    result: Any = None
    #: The checksum of the graph file the token started on (a child: its parent's), by
    #: whose rules it moves; None for a token kept before any graph was on record.
    checksum: str | None = None
    #: The token's priority (higher first), inherited by its children (`control.turns`).
    priority: int = 0


@dataclass(slots=True)
class TaskRow:
    id: int
    token: str
    state: str
    visit: int
    status: str
    attempt: int
    claimed_by: str | None
    lease_until: float | None
    queued_at: float
    #: The status the row had in the database when read: what a save counts it away from.
    was: str = field(default="", compare=False, repr=False)


@dataclass(slots=True)
class TimerRow:
    id: int
    token: str
    state: str
    visit: int
    event: str
    payload: Any
    set_at: float
    due_at: float
    status: str
    kind: str


@dataclass(slots=True)
class Entry:
    """One ledger row."""

    token: str
    seq: int
    at: float
    kind: str
    key: str | None
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class GraphVersion:
    """A graph file kept: its checksum, the file, when it was first and last served, and
    how many tokens (children too) still live on it."""

    checksum: str
    document: str
    first_served_at: float
    last_served_at: float
    live: int


@dataclass(slots=True)
class ControlRow:
    structure: str | None
    checksum: str | None
    serving: str | None
    since: float | None


class ClaimReads(NamedTuple):
    """What a claim reads before it takes a task: when a claim last wrote the supervisor's
    claim row (None without a row, in a row of before the time was kept, or one a heartbeat
    made), the task granted already under the claim's request id (and the attempt then
    granted), and the oldest queued task of its queues."""

    claimed_at: float | None
    granted: tuple[int, int] | None
    queued: TaskRow | None


@dataclass(frozen=True, slots=True)
class GrantReads:
    """What a grant shows besides the token: the event that brought the token into its
    state (its `event_accepted` data, None for the first state), and the state's memory."""

    accepted: dict[str, Any] | None
    memory: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CredentialRow:
    """Who may call the API: a name, a role, and for a webhook the events it may fire.

    Only the SHA-256 of the secret is kept; `hmac_key` is the key of a webhook whose
    deliveries are signed. A supervisor credential acts as the supervisor `supervisor`, or
    as every name that starts with it when `supervisor_prefix`; None (a credential kept
    before bindings) acts as any supervisor. `github` is how a GitHub webhook's deliveries
    become starts and fires (`access.Hook`, as JSON); None for any other credential."""

    name: str
    role: str
    events: list[str] | None
    may_start: bool
    hmac_key: str | None
    secret_hash: str
    created_at: float
    last_used: float | None = None
    revoked_at: float | None = None
    supervisor: str | None = None
    supervisor_prefix: bool = False
    github: dict[str, Any] | None = None
