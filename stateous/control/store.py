"""The store interface: what the engine asks of a database, grouped by table.

Nothing here decides: the engine does. A store runs each engine operation as one
transaction (`write`) or one consistent read (`read`), and a `Tx` offers small
verbs per table (tokens, ledger, tasks, timers, memory, claims, the control
plane row). SQLite and Postgres each implement it; the engine never knows which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

Result = TypeVar("Result")

#: Task statuses in which the task still belongs to its visit.
LIVE_TASK = ("queued", "claimed", "waiting")


def to_iso(moment: float) -> str:
    """Show a moment as the API does: ISO 8601 in UTC, to the second, with `Z`."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_column(moment: float) -> str:
    """Write a moment into a text column: UTC, no zone, to the microsecond; sorts as text."""
    return datetime.fromtimestamp(moment, UTC).isoformat(sep=" ", timespec="microseconds")[:26]


def from_column(text: str) -> float:
    """Read a moment back from a text column."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


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


@dataclass(slots=True)
class ControlRow:
    structure: str | None
    checksum: str | None
    serving: str | None
    since: float | None


class Tx(Protocol):
    """One transaction. `now` is its time: every row it writes carries it."""

    now: float

    # tokens
    def token(self, token: str) -> TokenRow | None: ...
    def token_any_case(self, token: str) -> TokenRow | None: ...
    def insert_token(self, row: TokenRow) -> None: ...
    def save_token(self, row: TokenRow) -> None: ...
    def children(self, parent: str) -> list[TokenRow]: ...
    def tokens(self, status: str | None, parent: str | None, limit: int) -> list[TokenRow]: ...
    def live_tokens(self) -> int: ...

    # ledger
    def record(
        self, token: str, kind: str, data: dict[str, Any], key: str | None = None
    ) -> None: ...
    def key_used(self, token: str, key: str) -> bool: ...
    def history(self, token: str) -> list[Entry]: ...
    def event_counts(self, token: str) -> dict[str, int]: ...
    def last_entry(self, token: str, kinds: tuple[str, ...]) -> Entry | None: ...
    def entries_after(self, token: str, seq: int, kind: str) -> list[Entry]: ...
    def last_arrival(self) -> int: ...

    # tasks
    def insert_task(self, token: str, state: str, visit: int) -> int: ...
    def task(self, task: int) -> TaskRow | None: ...
    def save_task(self, row: TaskRow) -> None: ...
    def live_task(self, token: str) -> TaskRow | None: ...
    def next_queued(self, states: list[str]) -> TaskRow | None: ...
    def expired_leases(self, limit: int) -> list[int]: ...

    # timers
    def insert_timer(
        self, token: str, state: str, visit: int, event: str, payload: Any, due_at: float, kind: str
    ) -> int: ...
    def timer(self, timer: int) -> TimerRow | None: ...
    def set_timer_status(self, timer: int, status: str) -> None: ...
    def cancel_timers(self, token: str, kind: str | None = None) -> None: ...
    def shift_timers(self, token: str, seconds: float) -> None: ...
    def due_timers(self, limit: int) -> list[int]: ...

    # memory
    def grant_reads(
        self, token: str, state: str
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]: ...
    def set_memory(self, token: str, state: str, key: str, value: Any) -> None: ...
    def delete_memory(self, token: str, state: str, key: str) -> None: ...
    def drop_memory(self, token: str) -> None: ...

    # claims
    def last_claim(self, supervisor: str) -> tuple[str | None, int | None, int | None] | None: ...
    def put_claim(
        self, supervisor: str, request: str | None, task: int | None, attempt: int | None
    ) -> None: ...

    # the control plane row
    def control(self) -> ControlRow | None: ...
    def put_control(self, row: ControlRow) -> None: ...


class Store(Protocol):
    """A database that runs engine operations, each as one transaction."""

    def write(self, operation: Callable[[Tx], Result]) -> Result: ...
    def read(self, operation: Callable[[Tx], Result]) -> Result: ...
    def fence(self, error: Exception) -> None: ...
    def close(self) -> None: ...


class KeepAndRaise(Exception):
    """Raised inside a write: commit what the operation wrote, then raise `error`.

    A refused event is recorded in the ledger (`event_rejected`) and still
    answered as a refusal; this carries the refusal past the commit.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error
