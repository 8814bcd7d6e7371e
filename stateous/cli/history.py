"""The lines of `stateous token show`: a token's line and a sentence for each ledger entry.

Each ledger kind reads as a short sentence, with times in the local zone of the
person who runs the command. An entry of a kind this version does not know, or
with fields it does not expect, still shows: its kind and its data as JSON. This
module only formats what the control plane answered; it sends nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

#: How the graph file names START and END, and how a person reads them.
SHOWN_NAMES = {"__start__": "START", "__end__": "END"}

Data = dict[str, Any]


def token_line(token: Data) -> str:
    """Say where a token is: `TICKET-1: coding (visit 2), active`."""
    visit = f" (visit {token['visit']})" if token["visit"] > 1 else ""
    return f"{token['token']}: {state_name(token['state'])}{visit}, {token['status']}"


def state_name(state: str) -> str:
    return SHOWN_NAMES.get(state, state)


def local(moment: str, shape: str) -> str:
    """Show an ISO 8601 moment of the API in the local zone."""
    return datetime.fromisoformat(moment).astimezone().strftime(shape)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _started(data: Data) -> str:
    parent = data.get("parent")
    return "started" if parent is None else f"started as a branch of {parent}"


def _accepted(data: Data) -> str:
    payload = data.get("payload")
    shown = f": {compact(payload)}" if payload else ""
    return f"{data['event']} in {state_name(data['state'])}{shown}"


def _entered(data: Data) -> str:
    visit = data.get("visit", 1)
    return f"entered {data['state']}" + (f" (visit {visit})" if visit > 1 else "")


def _ended(reason_kind: str) -> Callable[[Data], str]:
    def sentence(data: Data) -> str:
        reason = data.get("reason")
        return reason_kind if reason is None else f"{reason_kind}: {reason}"

    return sentence


def _memory(verb: str) -> Callable[[Data], str]:
    return lambda data: f"memory {verb}: {data['memory_key']} (in {data['state']})"


SENTENCES: dict[str, Callable[[Data], str]] = {
    "started": _started,
    "event_accepted": _accepted,
    "entered": _entered,
    "task_queued": lambda data: f"task {data['task']} queued for {data['state']}",
    "task_claimed": lambda data: (
        f"{data['supervisor']} took task {data['task']} (attempt {data['attempt']})"
    ),
    "task_done": lambda data: f"task {data['task']} done",
    "task_cancelled": lambda data: f"task {data['task']} cancelled",
    "task_waiting": lambda data: f"task {data['task']} waits: the work goes on outside",
    "task_failed": lambda data: f"task {data['task']} failed: {data['error']}",
    "task_retrying": lambda data: f"task {data['task']} is tried again (attempt {data['attempt']})",
    "timer_set": lambda data: (
        f"timer set: {data['event']} at {local(data['due_at'], '%Y-%m-%d %H:%M:%S')}"
    ),
    "timer_fired": lambda data: f"timer fired: {data['event']}",
    "event_rejected": lambda data: f"{data['event']} refused: {data['reason']}",
    "event_deferred": lambda data: f"{data['event']} held while paused",
    "event_replayed": lambda data: f"{data['event']} applied on resume",
    "paused": lambda data: "paused",
    "resumed": lambda data: "resumed",
    "cancelled": _ended("cancelled"),
    "completed": _ended("completed"),
    "failed": _ended("failed"),
    "context_changed": lambda data: f"context changed: {', '.join(data['changes'])}",
    "note": lambda data: str(data["text"]),
    "memory_set": _memory("set"),
    "memory_deleted": _memory("deleted"),
    "branch_started": lambda data: f"branch {data['workflow']} started: {data['token']}",
}


def sentence(kind: str, data: Data, *, resuming: bool = False) -> str:
    """Say what one ledger entry records; `resuming` when it follows a resume."""
    try:
        if kind == "event_dropped":
            when = " on resume" if resuming else ""
            return f"{data['event']} dropped{when}: {data['reason']}"
        return SENTENCES[kind](data)
    except (KeyError, TypeError):
        return f"{kind}: {compact(data)}" if data else kind


def history_lines(entries: Iterable[Data]) -> Iterator[str]:
    """Yield one line per ledger entry: local time, `#seq`, and its sentence."""
    resuming = False
    for entry in entries:
        kind, data = entry["kind"], entry.get("data") or {}
        if kind in ("paused", "resumed"):
            resuming = kind == "resumed"
        yield f"{local(entry['at'], '%H:%M:%S')}  #{entry['seq']}  " + sentence(
            kind, data, resuming=resuming
        )
