"""The lines of `stateous token show`: a token's line, the events it accepts, its history.

Each ledger kind reads as a short sentence, after the entry's time of day in UTC
and its number: `HH:MM:SS  #N  sentence`, the line that scripts written against the
documented shape read. The date stands on a line of its own before the first entry
and wherever the day changes, so a token that waits for days still shows its dates,
the same wherever it is shown.
Which events a token accepts now comes from the served graph: the events of the
transitions out of its state that can be fired from outside. An entry of a kind
this version does not know, or with fields it does not expect, still shows: its
kind and its data as JSON. This module only formats what the control plane
answered; it sends nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from stateous.model.names import BUILTIN_EVENTS, END_NAME, START_NAME
from stateous.model.vocabulary import LIVE_TOKEN, Kind, TokenStatus

#: How the graph file names START and END, and how a person reads them.
SHOWN_NAMES = {START_NAME: "START", END_NAME: "END"}
#: The line of a day, before its first entry of the history.
DAY = "-- {day}, times in UTC --"

Data = dict[str, Any]


def token_line(token: Data) -> str:
    """Say where a token is: `TICKET-1: coding (visit 2), active`."""
    state, status = state_name(token["state"]), token["status"]
    if token["visit"] > 1:
        return f"{token['token']}: {state} (visit {token['visit']}), {status}"
    return f"{token['token']}: {state}, {status}"


def state_name(state: str) -> str:
    return SHOWN_NAMES.get(state, state)


def in_utc(moment: str) -> datetime:
    """An ISO 8601 moment of the API, in UTC."""
    return datetime.fromisoformat(moment).astimezone(UTC)


def utc(moment: str) -> str:
    """Show an ISO 8601 moment of the API as its date and time of day in UTC."""
    return in_utc(moment).strftime("%Y-%m-%d %H:%M:%S")


def accepted_events(token: Data, document: Data) -> list[str]:
    """The events of the transitions out of the token's state, in the graph file's order.

    `document` is the graph file as `GET /workflow` answers it: the top workflow, and its
    child workflows under `workflows`. A child's id, `<parent>.<state>.<visit>.<workflow>`,
    names its workflow. Read as JSON values, not as the typed graph file, since decoding
    that imports msgspec, a tenth of this command's start. Raises KeyError or TypeError
    when `document` is not a graph file.
    """
    if token.get("parent") is None:
        workflow = document
    else:
        workflow = document["workflows"][token["token"].rsplit(".", 1)[1]]
    moves = workflow["transitions"]
    return list(
        dict.fromkeys(
            move["on"] for move in moves if move["from"] == token["state"] and move.get("on")
        )
    )


def accepts_line(token: Data, events: list[str]) -> str:
    """Say which events the token's state accepts now, of the `events` out of its state
    (`accepted_events`): `accepts now: passed, failed`."""
    status = token["status"]
    if status not in LIVE_TOKEN:
        return "accepts now: no events; the token has ended"
    outside = ", ".join(event for event in events if event not in BUILTIN_EVENTS)
    if not outside:
        own = " or ".join(events)
        return f"accepts now: no events from outside; {state_name(token['state'])} moves on {own}"
    if status == TokenStatus.PAUSED:
        return f"accepts now: {outside} (held until the token is resumed)"
    return f"accepts now: {outside}"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _started(data: Data) -> str:
    parent = data.get("parent")
    return "started" if parent is None else f"started as a branch of {parent}"


def _accepted(data: Data) -> str:
    payload = data.get("payload")
    if payload:
        return f"{data['event']} in {state_name(data['state'])}: {compact(payload)}"
    return f"{data['event']} in {state_name(data['state'])}"


def _entered(data: Data) -> str:
    visit = data.get("visit", 1)
    if visit > 1:
        return f"entered {data['state']} (visit {visit})"
    return f"entered {data['state']}"


def _ended(reason_kind: str) -> Callable[[Data], str]:
    def sentence(data: Data) -> str:
        reason = data.get("reason")
        return reason_kind if reason is None else f"{reason_kind}: {reason}"

    return sentence


SENTENCES: dict[Kind, Callable[[Data], str]] = {
    Kind.STARTED: _started,
    Kind.EVENT_ACCEPTED: _accepted,
    Kind.ENTERED: _entered,
    Kind.TASK_QUEUED: lambda data: f"task {data['task']} queued for {data['state']}",
    Kind.TASK_CLAIMED: lambda data: (
        f"{data['supervisor']} took task {data['task']} (attempt {data['attempt']})"
    ),
    Kind.TASK_DONE: lambda data: f"task {data['task']} done",
    Kind.TASK_CANCELLED: lambda data: f"task {data['task']} cancelled",
    Kind.TASK_WAITING: lambda data: f"task {data['task']} waits: the work goes on outside",
    Kind.TASK_FAILED: lambda data: f"task {data['task']} failed: {data['error']}",
    Kind.TASK_RETRYING: lambda data: (
        f"task {data['task']} is tried again (attempt {data['attempt']})"
    ),
    Kind.TIMER_SET: lambda data: f"timer set: {data['event']} at {utc(data['due_at'])}",
    Kind.TIMER_FIRED: lambda data: f"timer fired: {data['event']}",
    Kind.EVENT_REJECTED: lambda data: f"{data['event']} refused: {data['reason']}",
    Kind.EVENT_DEFERRED: lambda data: f"{data['event']} held while paused",
    Kind.EVENT_REPLAYED: lambda data: f"{data['event']} applied on resume",
    Kind.PAUSED: lambda data: "paused",
    Kind.RESUMED: lambda data: "resumed",
    Kind.CANCELLED: _ended("cancelled"),
    Kind.COMPLETED: _ended("completed"),
    Kind.FAILED: _ended("failed"),
    Kind.CONTEXT_CHANGED: lambda data: f"context changed: {', '.join(data['changes'])}",
    Kind.NOTE: lambda data: str(data["text"]),
    Kind.MEMORY_SET: lambda data: f"memory set: {data['memory_key']} (in {data['state']})",
    Kind.MEMORY_DELETED: lambda data: f"memory deleted: {data['memory_key']} (in {data['state']})",
    Kind.BRANCH_STARTED: lambda data: f"branch {data['workflow']} started: {data['token']}",
    Kind.EVENT_DROPPED: lambda data: f"{data['event']} dropped: {data['reason']}",
}


def sentence(kind: str, data: Data, *, resuming: bool = False) -> str:
    """Say what one ledger entry records; `resuming` when it follows a resume."""
    try:
        if kind == Kind.EVENT_DROPPED and resuming:
            return f"{data['event']} dropped on resume: {data['reason']}"
        return SENTENCES[kind](data)
    except (KeyError, TypeError):
        return f"{kind}: {compact(data)}" if data else kind


def history_lines(entries: Iterable[Data]) -> Iterator[str]:
    """Yield one `HH:MM:SS  #seq  sentence` line per entry, in UTC, each day's `DAY` line
    before its first entry.

    The first day's line comes with the first entry, so that entries which cannot be read
    (the stream of `token watch` refused) leave no line without a history under it.
    """
    resuming = False
    day = ""
    for entry in entries:
        kind, data = entry["kind"], entry.get("data") or {}
        if kind in (Kind.PAUSED, Kind.RESUMED):
            resuming = kind == Kind.RESUMED
        told = sentence(kind, data, resuming=resuming)
        if isinstance(data.get("by"), str):
            told = f"{told} (by {data['by']})"
        moment = in_utc(entry["at"])
        if moment.date().isoformat() != day:
            day = moment.date().isoformat()
            yield DAY.format(day=day)
        yield f"{moment:%H:%M:%S}  #{entry['seq']}  {told}"
