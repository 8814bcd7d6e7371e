"""The words of the domain: token and task statuses, timers, the kinds of ledger entries,
and the kinds of reports and of the messages a supervisor sends.

Each word is written here once. The engine decides with these, the stores keep
them, and the history reads them back as sentences; the schema's CHECK lists
and index conditions, written in the migrations' SQL files, and the history's
sentences are checked against this module by tests, and so are the report
kinds of the wire and the message kinds of the supervisor's outbox.
Every member is a `str`, so it goes to JSON, SQL and logs as its plain value.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class TokenStatus(StrEnum):
    """Where a token is in its life."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: A token that can still move: it takes events, and its children can too.
LIVE_TOKEN: Final = (TokenStatus.ACTIVE, TokenStatus.PAUSED)


class TaskStatus(StrEnum):
    """Where the task of a visit is: waiting for a supervisor, worked on, or over."""

    QUEUED = "queued"
    CLAIMED = "claimed"
    WAITING = "waiting"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: Task statuses in which the task still belongs to its visit.
LIVE_TASK: Final = (TaskStatus.QUEUED, TaskStatus.CLAIMED, TaskStatus.WAITING)
#: Task statuses in which somebody works on the task: a supervisor, or someone outside.
WORKED_ON: Final = (TaskStatus.CLAIMED, TaskStatus.WAITING)


class TimerStatus(StrEnum):
    PENDING = "pending"
    FIRED = "fired"
    CANCELLED = "cancelled"


class TimerKind(StrEnum):
    """A state's `timeout`, a timer that a routine set, or the wait before a task's next
    attempt (`retry_delay`, `RetryLater`)."""

    TIMEOUT = "timeout"
    TIMER = "timer"
    RETRY = "retry"


class ParkingCause(StrEnum):
    """What closed a resource's key: a provider's quota, or its breaker (a failure storm)."""

    QUOTA = "quota"
    BREAKER = "breaker"


class Role(StrEnum):
    """What a credential may do: everything, the work of tasks, or firing its events."""

    OPERATOR = "operator"
    SUPERVISOR = "supervisor"
    WEBHOOK = "webhook"


class Kind(StrEnum):
    """The kind of a ledger entry: what happened to the token."""

    STARTED = "started"
    BRANCH_STARTED = "branch_started"
    EVENT_ACCEPTED = "event_accepted"
    EVENT_REJECTED = "event_rejected"
    EVENT_DEFERRED = "event_deferred"
    EVENT_REPLAYED = "event_replayed"
    EVENT_DROPPED = "event_dropped"
    ENTERED = "entered"
    TASK_QUEUED = "task_queued"
    TASK_CLAIMED = "task_claimed"
    TASK_WAITING = "task_waiting"
    TASK_DONE = "task_done"
    TASK_CANCELLED = "task_cancelled"
    TASK_FAILED = "task_failed"
    TASK_RETRYING = "task_retrying"
    #: A task's retries ended early: the same failure on the same context (`stop_on_repeat`).
    RETRIES_STOPPED = "retries_stopped"
    #: Ours: a quota report gave the attempt back; the task waits for the reset.
    TASK_PARKED = "task_parked"
    #: Ours: a key closed by a quota report or its breaker, opened by a probe and cohorts.
    RESOURCE_PARKED = "resource_parked"
    RESOURCE_PROBE = "resource_probe"
    RESOURCE_COHORT = "resource_cohort"
    RESOURCE_REOPENED = "resource_reopened"
    TIMER_SET = "timer_set"
    TIMER_FIRED = "timer_fired"
    CONTEXT_CHANGED = "context_changed"
    NOTE = "note"
    MEMORY_SET = "memory_set"
    MEMORY_DELETED = "memory_deleted"
    PAUSED = "paused"
    RESUMED = "resumed"
    RETRIED = "retried"
    MIGRATED = "migrated"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    #: Spend and budgets (0022).
    SPENT = "spent"
    BUDGET_SET = "budget_set"
    BUDGET_WARNED = "budget_warned"
    OVER_BUDGET = "over_budget"
    BUDGET_RAISED = "budget_raised"


#: The entry that ends a token, by the status it ends with.
ENDING: Final = {
    TokenStatus.COMPLETED: Kind.COMPLETED,
    TokenStatus.FAILED: Kind.FAILED,
    TokenStatus.CANCELLED: Kind.CANCELLED,
}
#: The entry that closes a task at the end of its visit, by the status it closes with.
CLOSING: Final = {TaskStatus.DONE: Kind.TASK_DONE, TaskStatus.CANCELLED: Kind.TASK_CANCELLED}


class ReportKind(StrEnum):
    """What a report says of a task's attempt: its event, that it waits for one from
    outside, that it failed, or that a provider's quota stopped it (ours: the attempt is
    given back and the resource's key parked)."""

    EVENT = "event"
    WAITING = "waiting"
    FAILED = "failed"
    QUOTA = "quota"


class MessageKind(StrEnum):
    """What a supervisor sends about a task it holds; each waits in its outbox until the
    control plane takes or refuses it."""

    REPORT = "report"
    NOTE = "note"
    MEMORY = "memory"
    #: What the routine spent (`ctx.spend`), sent at once as a note is.
    SPEND = "spend"


#: What an occurrence does while the last one's token is live: nothing (recorded as a
#: skip), wait as the one start that waits, or start beside it.
OVERLAPS = ("skip", "queue_one", "allow")
#: After an outage: start one token for the occurrences missed, or skip them all.
CATCH_UPS = ("latest", "none")
