"""Each kind of ledger entry as a short sentence: the one table that both sides read.

`stateous token show` prints these sentences after each entry's time, and the control
plane sends them as the `text` of each entry of `GET /tokens/{id}/history`, which the
dashboard shows; so a person reads the same words wherever a history is shown. An entry
of a kind this version does not know, or with fields it does not expect, still reads:
its kind and its data as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from stateous.model.budgets import amounts_text
from stateous.model.names import END_NAME, START_NAME
from stateous.model.vocabulary import Kind

#: How the graph file names START and END, and how a person reads them.
SHOWN_NAMES = {START_NAME: "START", END_NAME: "END"}

Data = dict[str, Any]


def state_name(state: str) -> str:
    return SHOWN_NAMES.get(state, state)


def utc(moment: str) -> str:
    """Show an ISO 8601 moment of the API as its date and time of day in UTC."""
    return datetime.fromisoformat(moment).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _timer_set(data: Data) -> str:
    """A timer's line; the wait before a task's next attempt says when that attempt comes."""
    if data.get("kind") == "retry":
        return f"task {data['task']} waits: attempt {data['attempt']} at {utc(data['due_at'])}"
    return f"timer set: {data['event']} at {utc(data['due_at'])}"


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


def _retried(data: Data) -> str:
    told = f"retried in {data['state']} (it was {data['was']})"
    changes = data.get("changes")
    return f"{told}; context changed: {', '.join(changes)}" if changes else told


def _key(data: Data) -> str:
    return f"{data['resource']}={data['key']}" if data["key"] else str(data["resource"])


def parked_words(resource: str, key: str, until: str, waiting: int, reason: str) -> str:
    """What a parked key says, in `GET /tasks` and `resource list`: `parked: llm=acct-1
    until 14:05:10, 37 tasks waiting; reason: 429 ...` (`until` in ISO 8601, UTC)."""
    shown = _key({"resource": resource, "key": key})
    return f"parked: {shown} until {until[11:19]}, {waiting} tasks waiting; reason: {reason}"


def _parked(data: Data) -> str:
    # A breaker's fingerprint is the history's own line under the sentence (`history.py`).
    return f"{_key(data)} parked until {data['until']} ({data['cause']}): {data['reason']}"


def _ended(reason_kind: str) -> Callable[[Data], str]:
    def sentence(data: Data) -> str:
        reason = data.get("reason")
        return reason_kind if reason is None else f"{reason_kind}: {reason}"

    return sentence


SENTENCES: dict[str, Callable[[Data], str]] = {
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
    Kind.RETRIES_STOPPED: lambda data: (
        f"task {data['task']}: the same failure {data['repeats']} times with the same input: "
        "not tried again"
    ),
    Kind.TASK_PARKED: lambda data: (
        f"task {data['task']} parked until {data['until']} (attempt given back): {data['reason']}"
    ),
    Kind.RESOURCE_PARKED: _parked,
    Kind.RESOURCE_PROBE: lambda data: (
        f"task {data['task']} let in to {_key(data)} as the probe after its parking"
    ),
    Kind.RESOURCE_COHORT: lambda data: (
        f"{_key(data)} lets in a cohort of {data['size']} after its parking"
    ),
    Kind.RESOURCE_REOPENED: lambda data: f"{_key(data)} reopened after its parking",
    Kind.TIMER_SET: _timer_set,
    Kind.TIMER_FIRED: lambda data: f"timer fired: {data['event']}",
    Kind.EVENT_REJECTED: lambda data: f"{data['event']} refused: {data['reason']}",
    Kind.EVENT_DEFERRED: lambda data: f"{data['event']} held while paused",
    Kind.EVENT_REPLAYED: lambda data: f"{data['event']} applied on resume",
    Kind.PAUSED: lambda data: "paused",
    Kind.RESUMED: lambda data: "resumed",
    Kind.RETRIED: _retried,
    Kind.MIGRATED: lambda data: f"migrated to {data['to']} (from {data['from']})",
    Kind.CANCELLED: _ended("cancelled"),
    Kind.COMPLETED: _ended("completed"),
    Kind.FAILED: _ended("failed"),
    Kind.CONTEXT_CHANGED: lambda data: f"context changed: {', '.join(data['changes'])}",
    Kind.NOTE: lambda data: str(data["text"]),
    Kind.MEMORY_SET: lambda data: f"memory set: {data['memory_key']} (in {data['state']})",
    Kind.MEMORY_DELETED: lambda data: f"memory deleted: {data['memory_key']} (in {data['state']})",
    Kind.BRANCH_STARTED: lambda data: f"branch {data['workflow']} started: {data['token']}",
    Kind.EVENT_DROPPED: lambda data: f"{data['event']} dropped: {data['reason']}",
    Kind.SPENT: lambda data: f"task {data['task']} spent {amounts_text(data['spent'])}",
    Kind.BUDGET_SET: lambda data: f"budget of the tree: {amounts_text(data['budget'])}",
    Kind.BUDGET_WARNED: lambda data: (
        f"the tree spent {data['spent']:g} {data['unit']} of its budget of {data['limit']:g}"
    ),
    Kind.OVER_BUDGET: lambda data: (
        f"over budget: {data['reason']}" + ("" if data["routed"] else "; the tree pauses")
    ),
    Kind.BUDGET_RAISED: lambda data: f"budget raised: {amounts_text(data['budget'])}",
}


def sentence(kind: str, data: Data, *, resuming: bool = False) -> str:
    """Say what one ledger entry records; `resuming` when it follows a resume."""
    try:
        if kind == Kind.EVENT_DROPPED and resuming:
            return f"{data['event']} dropped on resume: {data['reason']}"
        return SENTENCES[kind](data)
    except (KeyError, TypeError):
        return f"{kind}: {compact(data)}" if data else kind


class Narrator:
    """Says the entries of one token's history, in order, one at a time (a watched history
    arrives entry by entry): an entry's words can hang on the entries before it."""

    def __init__(self) -> None:
        self.resuming = False

    def say(self, kind: str, data: Data) -> str:
        """The sentence of the next entry, with who asked for it when the entry says."""
        if kind in (Kind.PAUSED, Kind.RESUMED):
            self.resuming = kind == Kind.RESUMED
        told = sentence(kind, data, resuming=self.resuming)
        by = data.get("by")
        return f"{told} (by {by})" if isinstance(by, str) else told
