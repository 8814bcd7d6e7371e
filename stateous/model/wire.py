"""The shapes that cross the HTTP API: request bodies and answers, as msgspec Structs.

The control plane decodes requests into these types and encodes its answers from
them; the client and the supervisor read the same shapes. Checks of request values
(ranges, patterns, models) are the engine's. The answers that a supervisor acts on
carry the bounds that every real answer keeps (ids, attempts, the lease), so that a
reader that decodes one with these types takes nothing out of bounds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from stateous.model.durations import LONGEST
from stateous.model.limits import BATCH_LIMIT, CLAIM_NAME_LIMIT, INTEGER_LIMIT, LEASE, NAME_LIMIT
from stateous.model.names import STARTED, TOKEN_PATTERN
from stateous.model.vocabulary import ReportKind

#: A task id: a positive signed 64-bit integer, as the database numbers tasks.
TaskId = Annotated[int, msgspec.Meta(ge=1, le=INTEGER_LIMIT)]
#: An attempt or a visit: counted from 1.
Count = Annotated[int, msgspec.Meta(ge=1, le=INTEGER_LIMIT)]
#: A token id, as `stateous token start` takes one.
TokenId = Annotated[str, msgspec.Meta(pattern=TOKEN_PATTERN)]
#: The lease of a grant, in seconds: a duration of the graph file, 1 s to 3650 days.
Lease = Annotated[int, msgspec.Meta(ge=1, le=LONGEST)]
#: The name of a state as a claim gives it: `<state>` or `<workflow>/<state>`.
StateName = Annotated[str, msgspec.Meta(min_length=1, max_length=CLAIM_NAME_LIMIT)]
#: The stable code of a refusal, such as `database_busy`.
Code = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z_]{0,63}\Z")]


class BudgetView(msgspec.Struct, kw_only=True):
    """The budget of a tree of tokens, kept under its top `token`: its limits, what the tree
    spent and what its claimed tasks reserved, by unit; the share at which the ledger
    warns; whether the spend reached a limit."""

    token: str
    limits: dict[str, float]
    spent: dict[str, float]
    reserved: dict[str, float]
    warn: float
    over: bool


class SpentView(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a token spent, and its whole tree (its children included), by unit; the budget
    of its tree, if it has one."""

    token: dict[str, float]
    tree: dict[str, float]
    budget: BudgetView | None = None


class TokenView(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A token as the API shows it; `parent` only on a child token; `checksum` (the graph
    file it moves by) only where one token is asked for."""

    token: str
    state: str
    status: str
    visit: int
    context: dict[str, Any]
    entered_at: str
    parent: str | None = None
    checksum: str | None = None
    #: Where one token is asked for and its task waits for a resource: what for, and who
    #: took it ("waits for repo=acme/api, held by task 17 of PR-12").
    waits_for: str | None = None
    #: Where one token is asked for and its queued task's state needs labels that no
    #: supervisor seen in the last hour has: `TaskView.waits`, the same sentence.
    waits: str | None = None
    #: Where one token is asked for and it, a child or its tree's budget has a spend: what
    #: it and its tree spent (`SpentView`).
    spent: SpentView | None = None


class VersionView(msgspec.Struct, kw_only=True):
    """A graph file the database keeps: its checksum and workflow, when it was first and
    last served, how many tokens (children too) still live on it, and whether it is the
    one served now."""

    checksum: str
    workflow: str
    first_served_at: str
    last_served_at: str
    live: int
    served: bool


class TokenBrief(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A token as a webhook is answered it: a `TokenView` without the context, which a
    webhook may not read."""

    token: str
    state: str
    status: str
    visit: int
    entered_at: str
    parent: str | None = None


class DuplicateBrief(msgspec.Struct, kw_only=True):
    """`Duplicate` as a webhook is answered it."""

    duplicate: bool = True
    token: TokenBrief


class Duplicate(msgspec.Struct, kw_only=True):
    """The answer to an event whose idempotency key was used before: nothing changed."""

    duplicate: bool = True
    token: TokenView


class Delivered(msgspec.Struct, kw_only=True):
    """The answer to a GitHub delivery on `POST /hooks/{name}` that a token took: the token
    without its context (a webhook reads none), and what the delivery did to it."""

    token: str
    state: str
    status: str
    #: The delivery's `X-GitHub-Event`, and the workflow event it maps to; None on a start.
    kind: str
    event: str | None
    started: bool = False
    fired: bool = False
    duplicate: bool = False


class Pong(msgspec.Struct, kw_only=True):
    """The answer to GitHub's `ping` delivery, sent when a hook is made: nothing changed."""

    pong: bool = True


class Ignored(msgspec.Struct, kw_only=True):
    """The answer to a delivery of a kind that its webhook does not take: nothing is kept."""

    ignored: str
    webhook: str
    reason: str


class HistoryEntry(msgspec.Struct, kw_only=True):
    """One row of a token's ledger, with its sentence as `stateous token show` says it
    (`text`, beside the fields of Stateous 0.2.2, which has none)."""

    seq: int
    at: str
    kind: str
    data: dict[str, Any]
    text: str = ""


class EnteredBy(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The event that moved the token into its state, with its payload if it has one."""

    name: Annotated[str, msgspec.Meta(min_length=1, max_length=NAME_LIMIT)]
    payload: Any = None


def _started() -> EnteredBy:
    return EnteredBy(name=STARTED)


class Grant(msgspec.Struct, kw_only=True):
    """A claimed task: what a supervisor needs to run the routine of its state.

    A grant of Stateous 0.2.2 has no `lease` (it is 2 minutes there); the
    supervisor takes an absent context, memory or entering event as empty.
    """

    task: TaskId
    token: TokenId
    state: StateName
    visit: Count
    attempt: Count
    context: dict[str, Any] = {}
    memory: dict[str, Any] = {}
    entered_by: EnteredBy = msgspec.field(default_factory=_started)
    lease: Lease = LEASE


class LastHour(msgspec.Struct):
    """What happened in the last hour, as `GET /stats` counts it."""

    events_fired: int
    leases_ended: int
    attempts_failed: int


class Stats(msgspec.Struct):
    """What `GET /stats` answers: the live tokens and tasks by state and status, the age in
    seconds of each state's oldest queued task, the pending timers, the last hour, and the
    tokens ended since the database was made, by status."""

    tokens: dict[str, dict[str, int]]
    tasks: dict[str, dict[str, int]]
    oldest_queued: dict[str, float]
    timers_pending: int
    last_hour: LastHour
    ended: dict[str, int]


class Health(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What `GET /health` answers: the served workflow and its checksum, the lease of its
    grants in seconds (so that the dashboard can tell a supervisor silent for a whole lease
    as gone), whether requests need a credential (`auth`: `on`, `off`, or `no_credential`
    when it is on and every credential is revoked), and a warning when no credential
    protects a control plane reached beyond this computer."""

    workflow: str
    checksum: str
    lease: int | None = None
    auth: Literal["on", "off", "no_credential"] | None = None
    warning: str | None = None


class Lost(msgspec.Struct, kw_only=True):
    """The answer to a heartbeat: the tasks that the supervisor no longer holds."""

    lost: Annotated[list[TaskId], msgspec.Meta(max_length=BATCH_LIMIT)]


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every refusal: a sentence for people and a stable code for programs."""

    error: str
    code: Code


class StartBody(msgspec.Struct, kw_only=True):
    token: str
    context: dict[str, Any] | None = None
    #: Higher first; inherited by the token's children (`PRIORITY_LIMIT` either way).
    priority: int = 0
    #: What the token and all its children may spend, by unit (its workflow's otherwise).
    budget: dict[str, Any] | None = None


class FireBody(msgspec.Struct, kw_only=True):
    payload: dict[str, Any] | None = None


class RetryBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A retry: the state to enter again (the token's last when absent), and the context
    changes to merge; an unknown field is refused, so that a misspelt `from` does not
    silently retry from the last state."""

    state: str | None = msgspec.field(default=None, name="from")
    context: dict[str, Any] | None = None


class MigrateBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A migration: the checksum of the graph file to move to (the served one when absent),
    and whether to only say what would move; an unknown field is refused."""

    to: str | None = None
    dry_run: bool = False


class MovedToken(msgspec.Struct, kw_only=True):
    """A token of a migrated tree, as it was when it moved."""

    token: str
    state: str
    status: str


class MigrationView(msgspec.Struct, kw_only=True):
    """A migration, done or (a dry run) checked only: the token's tree, top first, from the
    graph file it moved by to `to`; `moved` is empty when it moves by `to` already."""

    token: str
    source: str | None = msgspec.field(name="from")
    to: str
    dry_run: bool
    moved: list[MovedToken]


class PlanBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A plan to make: the action, the filter of its tokens (`status=failed state=review`),
    for a retry the state to enter again, for a migration the graph to move to (the served
    one when absent)."""

    action: str
    where: str
    state: str | None = msgspec.field(default=None, name="from")
    to: str | None = None


class ApplyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An apply: the action and options it expects of the plan, and at most how many of the
    tokens still to act on it acts on now (all when absent)."""

    action: str
    state: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    limit: int | None = None


class PlanToken(msgspec.Struct, kw_only=True):
    """A token of a plan: `pending` until acted on, then `done` or `refused` (with why)."""

    token: str
    outcome: str
    reason: str | None = None
    applied_at: str | None = None


class PlanView(msgspec.Struct, kw_only=True):
    """A plan: its action and options, the filter it was made with, its tokens in order."""

    plan: str
    action: str
    state: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    where: dict[str, str]
    by: str | None = None
    made_at: str
    pending: int
    tokens: list[PlanToken]


class ClaimBody(msgspec.Struct, kw_only=True):
    supervisor: str
    states: list[str]
    request: str | None = None
    #: Seconds to wait for a task when none is queued, 0 to 30 (0: answer at once).
    wait: float = 0.0
    #: The checksum of the graph file the supervisor was built for (its contract.py's): it
    #: is granted a task only when the task's state has the same contract there.
    checksum: str | None = None
    #: The supervisor's labels: it is granted only tasks whose state's needs they meet.
    labels: dict[str, Any] | None = None


class HeartbeatBody(msgspec.Struct, kw_only=True):
    supervisor: str
    tasks: list[int]


class Schedule(msgspec.Struct, kw_only=True):
    """A timer that a routine set: fire `event` with `payload` after a duration."""

    event: str
    after: str
    payload: dict[str, Any] | None = None


class NextBody(msgspec.Struct, kw_only=True):
    """What a report asks when its supervisor would take its next task in the answer: the
    fields of a claim (`ClaimBody`) but the supervisor, which is the report's, and `wait`."""

    states: list[str]
    request: str | None = None
    checksum: str | None = None
    labels: dict[str, Any] | None = None


class ReportBody(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The outcome of a task: an event, waiting, a failed attempt, or a quota that stopped it."""

    kind: Literal["event", "waiting", "failed", "quota"]
    event: str | None = None
    payload: dict[str, Any] | None = None
    error: str | None = None
    context: dict[str, Any] | None = None
    schedules: list[Schedule] = []
    attempt: int | None = None
    supervisor: str | None = None
    #: With `failed`: the seconds to wait before the next attempt (a provider's
    #: `Retry-After`), instead of the state's backoff.
    retry_after: float | None = None
    #: Ours, with `quota`: the resource whose key the task holds that the provider's quota
    #: stopped (none: only the task waits), when the quota resets (UTC, ISO), and why.
    resource: str | None = None
    resets_at: str | None = None
    reason: str | None = None
    #: Ours: the supervisor's next task, granted in the answer (`Reported`) as a claim
    #: with these fields would be; a report from outside cannot ask it.
    next: NextBody | None = None
    #: Ours: what the attempt spent, by unit (`ctx.spend`'s units), kept before the outcome.
    spent: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.kind == ReportKind.EVENT.value and not self.event:
            raise ValueError("a report of kind `event` names its event")
        if self.next is not None and self.supervisor is None:
            raise ValueError("a report that asks `next` names its `supervisor`")


class Reported(TokenView, kw_only=True):
    """The answer to a report that asked `next`: the token after the outcome, as to any
    report, and beside it the grant of the supervisor's next task, or null for none."""

    grant: Grant | None


class NoteBody(msgspec.Struct, kw_only=True):
    text: str
    attempt: int | None = None
    #: The supervisor that holds the task; required of a bound supervisor credential.
    supervisor: str | None = None


class SpendBody(msgspec.Struct, kw_only=True):
    """What a routine spent during its attempt, by unit (`ctx.spend`)."""

    spent: dict[str, Any]
    attempt: int | None = None
    #: The supervisor that holds the task; required of a bound supervisor credential.
    supervisor: str | None = None
    #: Ours: the spend's own key; a spend sent again with it counts once, a duplicate.
    key: str | None = None


class SpendDuplicate(msgspec.Struct, kw_only=True):
    """The answer to a spend whose key its token took before: nothing changed."""

    duplicate: bool = True


class BudgetBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """New limits of the budget of a token's tree, by unit."""

    budget: dict[str, Any]


class MemoryBody(msgspec.Struct, kw_only=True):
    """One key of a routine's memory; a `null` value deletes the key."""

    key: str
    value: Any
    attempt: int | None = None
    #: The supervisor that holds the task; required of a bound supervisor credential.
    supervisor: str | None = None


class TaskView(msgspec.Struct, kw_only=True):
    """A live task as `GET /tasks` shows it; `age` is the seconds since it was queued;
    `checksum`, the graph file its token moves by (a supervisor built for it, or for one
    where the state has the same contract, may claim it)."""

    task: int
    token: str
    state: str
    status: str
    attempt: int
    supervisor: str | None
    lease_until: str | None
    queued_at: str
    age: float
    checksum: str | None = None
    #: A queued task that waits for a resource: what for, and who took it.
    waits_for: str | None = None
    #: Of a queued task whose state needs labels that no supervisor seen in the last hour
    #: has, that sentence ("no supervisor with os=macos seen in the last hour").
    waits: str | None = None


class SupervisorView(msgspec.Struct, kw_only=True):
    """A supervisor as `GET /supervisors` shows it: when it last claimed and sent a
    heartbeat, and the tasks it holds now."""

    supervisor: str
    last_claim: str | None
    last_heartbeat: str | None
    tasks: list[int]
