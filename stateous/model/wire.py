"""The shapes that cross the HTTP API: request bodies and answers, as msgspec Structs.

The control plane decodes requests into these types and encodes its answers from
them; the client and the supervisor read the same shapes. Checks of values
(ranges, patterns, models) are the engine's; here is only the shape.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class TokenView(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A token as the API shows it; `parent` only on a child token."""

    token: str
    state: str
    status: str
    visit: int
    context: dict[str, Any]
    entered_at: str
    parent: str | None = None


class Duplicate(msgspec.Struct, kw_only=True):
    """The answer to an event whose idempotency key was used before: nothing changed."""

    duplicate: bool = True
    token: TokenView


class HistoryEntry(msgspec.Struct, kw_only=True):
    """One row of a token's ledger."""

    seq: int
    at: str
    kind: str
    data: dict[str, Any]


class EnteredBy(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The event that moved the token into its state, with its payload if it has one."""

    name: str
    payload: Any = None


class Grant(msgspec.Struct, kw_only=True):
    """A claimed task: what a supervisor needs to run the routine of its state."""

    task: int
    token: str
    state: str
    visit: int
    attempt: int
    context: dict[str, Any]
    memory: dict[str, Any]
    entered_by: EnteredBy
    lease: int


class Health(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What `GET /health` answers: the served workflow and its checksum, and a warning when
    the control plane runs without authentication beyond this computer."""

    workflow: str
    checksum: str
    warning: str | None = None


class Lost(msgspec.Struct, kw_only=True):
    """The answer to a heartbeat: the tasks that the supervisor no longer holds."""

    lost: list[int]


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every refusal: a sentence for people and a stable code for programs."""

    error: str
    code: str


class StartBody(msgspec.Struct, kw_only=True):
    token: str
    context: dict[str, Any] | None = None


class FireBody(msgspec.Struct, kw_only=True):
    payload: dict[str, Any] | None = None


class ClaimBody(msgspec.Struct, kw_only=True):
    supervisor: str
    states: list[str]
    request: str | None = None


class HeartbeatBody(msgspec.Struct, kw_only=True):
    supervisor: str
    tasks: list[int]


class Schedule(msgspec.Struct, kw_only=True):
    """A timer that a routine set: fire `event` with `payload` after a duration."""

    event: str
    after: str
    payload: dict[str, Any] | None = None


class ReportBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The outcome of a task: an event, waiting, or a failed attempt."""

    kind: Literal["event", "waiting", "failed"]
    event: str | None = None
    payload: dict[str, Any] | None = None
    error: str | None = None
    context: dict[str, Any] | None = None
    schedules: list[Schedule] = []
    attempt: int | None = None
    supervisor: str | None = None


class NoteBody(msgspec.Struct, kw_only=True):
    text: str
    attempt: int | None = None


class MemoryBody(msgspec.Struct, kw_only=True):
    """One key of a routine's memory; a `null` value deletes the key."""

    key: str
    value: Any
    attempt: int | None = None
