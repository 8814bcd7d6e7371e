"""How a token moves: the one router of events, and the steps of a move.

Every path that moves a token (an event from outside, a report, a timer, a
failed attempt, a join, a deferred event on resume) hands its event to
`Moves.route`, which decides in one place what the event does: defer it while
the token is paused, take the transition that the guards choose, or, when no
transition takes it, refuse, reject, fail or drop it as the caller says. The
steps of a move (leave the state, enter the next one, start children, end)
follow, each writing exactly its ledger entries. Everything runs inside the
transaction that the engine opened.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NoReturn

from stateous.control import breaker, checks, pauses, repeats, resources, turns
from stateous.control.budgets import Budgets, Reach
from stateous.control.errors import EventNotAllowed
from stateous.control.graph import Ambiguous, Flow, Route
from stateous.control.store import KeepAndRaise, TaskRow, TokenRow, Tx, to_iso
from stateous.control.versions import Graphs
from stateous.model.backoff import retry_wait
from stateous.model.durations import parse_duration
from stateous.model.graph_file import ResourceSpec
from stateous.model.limits import TOKEN_ID_LIMIT
from stateous.model.names import (
    END_NAME,
    ERROR_EVENT,
    JOINED_EVENT,
    START_NAME,
    STARTED,
    TIMEOUT_EVENT,
)
from stateous.model.vocabulary import (
    CLOSING,
    ENDING,
    LIVE_TOKEN,
    WORKED_ON,
    Kind,
    TaskStatus,
    TimerKind,
    TokenStatus,
)

#: The event name that a `retry` timer carries: it is never routed, only shown.
RETRY_EVENT = "retry"


class Unrouted(Enum):
    """What becomes of an event that no transition takes; the sender decides."""

    #: Record `event_rejected` and answer 409 `event_not_allowed`: an event from outside,
    #: a report.
    REFUSE = "refuse"
    #: Record `event_rejected`; the token stays where it is: a routine's timer.
    REJECT = "reject"
    #: Fail the token: the events of Stateous itself (`timeout`, `error`, `joined`).
    FAIL = "fail"
    #: Record `event_dropped`: a deferred event that no longer fits at resume.
    DROP = "drop"


@dataclass(slots=True)
class Arrival:
    """An event that arrives at a token, with what travels with it."""

    event: str
    payload: Any = None
    #: The idempotency key of an event from outside.
    key: str | None = None
    #: The task whose report carries the event.
    task: TaskRow | None = None
    #: A report's context changes, and the context they make, already checked.
    changes: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] | None = None
    #: The timers that a report sets: `event`, `payload`, `after` in seconds.
    schedules: list[dict[str, Any]] = field(default_factory=list)
    #: Why Stateous sends `error`: the failed attempt's error.
    detail: str | None = None
    #: The arrival number of a deferred event that applies now, at resume.
    replay: int | None = None


@dataclass(frozen=True, slots=True)
class NoRoute:
    """No transition takes the event; `reason` says why in one sentence."""

    reason: str


#: How a token fails when an event of Stateous itself cannot move it.
_FAILURES = {
    JOINED_EVENT: "the join of {state!r} cannot move the token",
    ERROR_EVENT: "{state!r} failed, and has no transition on 'error'",
    TIMEOUT_EVENT: "{state!r} timed out",
}


class Moves:
    """The rules by which tokens move: each token's by the graph it started on."""

    def __init__(self, graphs: Graphs, reach: Reach | None = None) -> None:
        self.graphs = graphs
        self.budgets = Budgets(graphs, reach)

    def flow(self, tx: Tx, token: TokenRow) -> Flow:
        """The workflow that moves the token, in the graph it is pinned to."""
        graph = self.graphs.of(tx, token.checksum)
        return graph.flows[token.workflow or graph.name]

    # the router

    def route(self, tx: Tx, token: TokenRow, arrival: Arrival, unrouted: Unrouted) -> None:
        """Decide what `arrival` does to the token in its state, and do it.

        A paused token defers the event. An event that a task reports is judged
        first, paused or not, because its supervisor waits to learn whether the
        outcome was taken; any other event is deferred unjudged, since the guards
        read the token as it will be at resume. A token that is not paused takes
        the transition that the guards choose, with the report's context
        changes and timers first; when none takes it, `unrouted` says what then.
        """
        paused = token.status == TokenStatus.PAUSED
        if paused and arrival.task is None:
            self.defer(tx, token, arrival)
            return
        choice = self.choose(tx, token, arrival)
        if isinstance(choice, NoRoute):
            self.unrouted(tx, token, arrival, choice.reason, unrouted)
            return
        if paused:
            self.defer(tx, token, arrival)
            return
        if arrival.replay is not None:
            self.replayed(tx, token, arrival)
        self.keep_outcome(tx, token, arrival.changes, arrival.context, arrival.schedules)
        self.take(tx, token, arrival, choice)

    def choose(self, tx: Tx, token: TokenRow, arrival: Arrival) -> Route | Ambiguous | NoRoute:
        """Pick the transition that the event takes from the token's state now, with the
        context that the report makes, if any."""
        flow = self.flow(tx, token)
        event, payload = arrival.event, arrival.payload
        context = token.context if arrival.context is None else arrival.context
        choice = flow.choose(
            token.state,
            event,
            ctx=context,
            payload=payload,
            counts=self.counts(tx, token, event) if flow.counts_needed(token.state, event) else {},
            branches=payload.get("branches") if event == JOINED_EVENT and payload else None,
        )
        if choice is None:
            return NoRoute(self.no_route_reason(tx, token, event))
        if isinstance(choice, Route):
            visit = token.visits.get(choice.target, 0) + 1
            too_long = self.child_id_problem(token.token, flow, choice.target, visit, context)
            if too_long is not None:
                return NoRoute(too_long)
        return choice

    def counts(self, tx: Tx, token: TokenRow, event: str) -> dict[str, int]:
        """Count accepted events over the token's life, this one included."""
        counts = tx.event_counts(token.token)
        counts[event] = counts.get(event, 0) + 1
        return counts

    def no_route_reason(self, tx: Tx, token: TokenRow, event: str) -> str:
        if self.flow(tx, token).routes.get((token.state, event)):
            return f"no guard of {event!r} in {token.state!r} holds, and it has no fallback"
        return f"{token.state!r} has no transition on {event!r}"

    def unrouted(
        self, tx: Tx, token: TokenRow, arrival: Arrival, reason: str, unrouted: Unrouted
    ) -> None:
        """Do what the sender asked with an event that no transition takes."""
        event = arrival.event
        if unrouted is Unrouted.DROP:
            self.drop(tx, token, event, reason, arrival.task)
        elif unrouted is Unrouted.FAIL:
            if arrival.replay is not None:
                self.replayed(tx, token, arrival)
            why = _FAILURES.get(event, "{event!r} cannot move the token")
            detail = arrival.detail or reason
            self.fail(tx, token, f"{why.format(state=token.state, event=event)}: {detail}")
        elif unrouted is Unrouted.REJECT:
            self.reject(tx, token, event, reason)
        else:
            self.refuse(tx, token, event, reason)

    def reject(self, tx: Tx, token: TokenRow, event: str, reason: str) -> None:
        """Record that an event was turned away; the token stays where it is."""
        tx.record(token.token, Kind.EVENT_REJECTED, {"event": event, "reason": reason})

    def refuse(self, tx: Tx, token: TokenRow, event: str, reason: str) -> NoReturn:
        """Record a refused event, then refuse the request once that is committed."""
        self.reject(tx, token, event, reason)
        raise KeepAndRaise(EventNotAllowed(reason))

    def drop(
        self, tx: Tx, token: TokenRow, event: str, reason: str, task: TaskRow | None = None
    ) -> None:
        """Record that a deferred event no longer applies. The `task` whose held outcome it
        was, still waiting with no one on it, is queued again: else nothing would ever move
        the token on."""
        tx.record(token.token, Kind.EVENT_DROPPED, {"event": event, "reason": reason})
        if task is not None and task.status == TaskStatus.WAITING:
            self.requeue(tx, token, task)

    def replayed(self, tx: Tx, token: TokenRow, arrival: Arrival) -> None:
        tx.record(
            token.token, Kind.EVENT_REPLAYED, {"event": arrival.event, "arrival": arrival.replay}
        )

    def defer(self, tx: Tx, token: TokenRow, arrival: Arrival) -> None:
        """Keep an event for a paused token, numbered in the order of arrival.

        A deferred report keeps its task waiting, with what it would change, so that
        the resume can apply it whole, or drop it if the token moved on.
        """
        data: dict[str, Any] = {
            "event": arrival.event,
            "payload": arrival.payload,
            "arrival": tx.last_arrival() + 1,
        }
        task = arrival.task
        if task is not None:
            task.status, task.lease_until = TaskStatus.WAITING, None
            tx.save_task(task)
            self.release(tx, token, task)
            data.update(
                state=token.state,
                visit=token.visit,
                task=task.id,
                context=arrival.changes,
                schedules=arrival.schedules,
            )
        if arrival.detail is not None:
            data["error"] = arrival.detail
        tx.record(token.token, Kind.EVENT_DEFERRED, data, arrival.key)

    def keep_outcome(
        self,
        tx: Tx,
        token: TokenRow,
        changes: dict[str, Any],
        context: dict[str, Any] | None,
        schedules: list[dict[str, Any]],
    ) -> None:
        """Keep what a report changes besides the move: the context, and its timers."""
        checks.room_for_timers(tx.pending_timers(token.token), len(schedules))
        if changes and context is not None:
            token.context = context
            tx.record(token.token, Kind.CONTEXT_CHANGED, {"changes": changes})
            tx.save_token(token)
        for schedule in schedules:
            self.set_timer(
                tx,
                token,
                schedule["event"],
                schedule["payload"],
                schedule["after"],
                TimerKind.TIMER,
            )

    # a move

    def take(self, tx: Tx, token: TokenRow, arrival: Arrival, choice: Route | Ambiguous) -> None:
        """Move the token along the chosen transition, or fail it when guards clash."""
        event = arrival.event
        if isinstance(choice, Ambiguous):
            listed = " and ".join(repr(text) for text in choice.guards)
            self.fail(
                tx,
                token,
                f"{event!r} in {token.state!r} matched more than one guard ({listed})",
            )
            return
        tx.record(
            token.token,
            Kind.EVENT_ACCEPTED,
            {"event": event, "payload": arrival.payload, "state": token.state},
            arrival.key,
        )
        self.leave(tx, token, event, reported=arrival.task is not None)
        if choice.target == END_NAME:
            token.result = arrival.payload
            self.end(tx, token, TokenStatus.COMPLETED, {})
        else:
            self.enter(tx, token, choice.target)

    def leave(self, tx: Tx, token: TokenRow, event: str, *, reported: bool) -> None:
        """End the visit: its task is done or cancelled, its timers and children stop."""
        task = tx.live_task(token.token)
        if task is not None:
            done = reported or (
                task.status in WORKED_ON and self.flow(tx, token).emits(token.state, event)
            )
            self.close_task(tx, token, task, TaskStatus.DONE if done else TaskStatus.CANCELLED)
        tx.cancel_timers(token.token)
        self.stop_children(tx, token, f"the parent left {token.state!r} on {event!r}")

    def close_task(self, tx: Tx, token: TokenRow, task: TaskRow, status: TaskStatus) -> None:
        """Close the task of a visit that ends: `done` or `cancelled`."""
        task.status = status
        task.lease_until = None
        tx.save_task(task)
        self.release(tx, token, task)
        tx.record(task.token, CLOSING[status], {"task": task.id})

    # resources

    def uses(self, tx: Tx, token: TokenRow) -> dict[str, str | int] | None:
        """The resources that the task of the token's state uses, if any."""
        return self.flow(tx, token).state(token.state).uses

    def declared(self, tx: Tx, token: TokenRow) -> dict[str, ResourceSpec]:
        return self.graphs.of(tx, token.checksum).document.resources

    def release(self, tx: Tx, token: TokenRow, task: TaskRow) -> None:
        """Give back what the task holds: its resources' slots, its budget's reservation."""
        if self.uses(tx, token):
            resources.release(tx, task.id)
        self.budgets.settle(tx, task.id)

    def queued_uses(self, tx: Tx, token: TokenRow, then: Callable[[Tx, int], object]) -> None:
        """Apply `then` to the token's queued task when its state uses resources: a paused
        token's task gives back its slots, a resumed one's is let in again."""
        task = tx.live_task(token.token) if self.uses(tx, token) else None
        if task is not None and task.status == TaskStatus.QUEUED:
            then(tx, task.id)

    def enter(self, tx: Tx, token: TokenRow, state: str) -> None:
        """Enter `state`: a new visit, with its task (or children) and its timeout."""
        flow = self.flow(tx, token)
        spec = flow.state(state)
        visit = token.visits.get(state, 0) + 1
        token.visits[state] = visit
        token.state, token.visit, token.entered_at = state, visit, tx.now
        tx.record(token.token, Kind.ENTERED, {"state": state, "visit": visit})
        tx.save_token(token)
        if spec.parallel:
            self.start_children(tx, token, spec.parallel, spec.inputs or [])
        else:
            name = flow.claim_name(state)
            contract = self.graphs.of(tx, token.checksum).contract(name)
            turn = turns.queued(tx, flow, spec, token, name)
            task = tx.insert_task(token.token, name, visit, contract, turn)
            tx.record(token.token, Kind.TASK_QUEUED, {"task": task, "state": state})
            if spec.uses:
                resources.queue(tx, task, token, spec.uses, self.declared(tx, token))
        if spec.timeout is not None:
            self.set_timer(
                tx, token, TIMEOUT_EVENT, None, parse_duration(spec.timeout), TimerKind.TIMEOUT
            )

    def set_timer(
        self,
        tx: Tx,
        token: TokenRow,
        event: str,
        payload: Any,
        seconds: float,
        kind: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Keep a timer of the token's visit, due in `seconds` by its clock (`pauses.clock`,
        which stands still while it is paused); `detail` goes to its entry."""
        due = pauses.clock(tx, token) + seconds
        timer = tx.insert_timer(token.token, token.state, token.visit, event, payload, due, kind)
        tx.record(
            token.token,
            Kind.TIMER_SET,
            {"timer": timer, "event": event, "due_at": to_iso(due), "kind": kind, **(detail or {})},
        )

    # retries

    def fail_attempt(
        self, tx: Tx, task: TaskRow, token: TokenRow, error: str, retry_after: float | None = None
    ) -> None:
        """Count a failed attempt: try again while retries are left (after the state's backoff,
        or the `retry_after` seconds the routine asked for), else deliver `error`; retries
        end early on a repeated failure (`repeats`)."""
        failed = repeats.failure(task, token, error)
        tx.record(token.token, Kind.TASK_FAILED, failed)
        tx.cancel_timers(token.token, TimerKind.TIMER)
        spec = self.flow(tx, token).state(token.state)
        task.claimed_by, task.lease_until = None, None
        if spec.uses:
            breaker.failed(tx, task, token.token, failed, self.declared(tx, token))
        self.release(tx, token, task)
        if task.attempt <= spec.retries and not repeats.stopped(tx, token, spec, failed):
            delay, cap = spec.retry_delay, spec.retry_delay_max
            self.retry(tx, token, task, retry_wait(delay, cap, task.id, task.attempt, retry_after))
            return
        task.status = TaskStatus.FAILED
        tx.save_task(task)
        self.route(tx, token, Arrival(ERROR_EVENT, detail=error), Unrouted.FAIL)

    def retry(self, tx: Tx, token: TokenRow, task: TaskRow, wait: float) -> None:
        """Bring a failed task to its next attempt: queued now, or waiting for a `retry`
        timer that queues it when it is due (kept in the database, so a restart keeps it)."""
        if wait <= 0:
            self.requeue(tx, token, task)
            return
        task.status = TaskStatus.WAITING
        tx.save_task(task)
        detail = {"task": task.id, "attempt": task.attempt + 1}
        self.set_timer(tx, token, RETRY_EVENT, None, wait, TimerKind.RETRY, detail)

    def requeue(self, tx: Tx, token: TokenRow, task: TaskRow) -> None:
        """Queue a task for its next attempt, as a task queued anew (held by no one, with a
        turn anew, let in to its resources or waiting for them)."""
        turn = turns.turn_at(tx, self.flow(tx, token), token, task.state)
        task.status, task.queued_at, task.claimed_by = TaskStatus.QUEUED, tx.now, None
        tx.save_task(task)
        tx.set_turn(task.id, turn)
        tx.record(task.token, Kind.TASK_RETRYING, {"task": task.id, "attempt": task.attempt + 1})
        if self.uses(tx, token):
            resources.requeued(tx, token, task.id)

    def first_move(self, tx: Tx, token: TokenRow) -> None:
        """Move a new token out of START, by the guards on its context."""
        choice = self.first_choice(self.flow(tx, token), token.context)
        if not isinstance(choice, Route):
            self.fail(tx, token, "no transition from START holds for its context")
            return
        tx.record(
            token.token,
            Kind.EVENT_ACCEPTED,
            {"event": STARTED, "payload": None, "state": START_NAME},
        )
        self.enter(tx, token, choice.target)

    @staticmethod
    def first_choice(flow: Flow, context: dict[str, Any]) -> Route | Ambiguous | None:
        """The transition out of START that a new token's context takes."""
        return flow.choose(START_NAME, None, ctx=context, payload=None, counts={})

    # ending

    def end(self, tx: Tx, token: TokenRow, status: TokenStatus, data: dict[str, Any]) -> None:
        """End the token: completed, failed or cancelled. Only a completed token loses its
        memory: a failed or cancelled one may be retried, and its routines need it then."""
        token.status = status
        tx.record(token.token, ENDING[status], data)
        tx.save_token(token)
        tx.cancel_timers(token.token)
        if status == TokenStatus.COMPLETED:
            tx.drop_memory(token.token)
        if token.parent is not None and status != TokenStatus.CANCELLED:
            self.child_ended(tx, token)

    def fail(self, tx: Tx, token: TokenRow, reason: str) -> None:
        """Fail the token: its live task and timers stop, its children are cancelled."""
        task = tx.live_task(token.token)
        if task is not None:
            self.close_task(tx, token, task, TaskStatus.CANCELLED)
        self.stop_children(tx, token, f"the parent failed: {reason}")
        self.end(tx, token, TokenStatus.FAILED, {"reason": reason})

    def cancel_token(self, tx: Tx, token: TokenRow, reason: str | None) -> None:
        """Cancel a live token, its task, its timers and its own children."""
        for deferred in self.deferred(tx, token):
            self.drop(tx, token, deferred.data["event"], "the token was cancelled")
        task = tx.live_task(token.token)
        if task is not None:
            self.close_task(tx, token, task, TaskStatus.CANCELLED)
        self.stop_children(tx, token, "the parent was cancelled")
        self.end(tx, token, TokenStatus.CANCELLED, {} if reason is None else {"reason": reason})

    def deferred(self, tx: Tx, token: TokenRow) -> list[Any]:
        """The events deferred for a paused token since its last pause, in order."""
        if token.status != TokenStatus.PAUSED:
            return []
        paused = tx.last_entry(token.token, (Kind.PAUSED,))
        return (
            [] if paused is None else tx.entries_after(token.token, paused.seq, Kind.EVENT_DEFERRED)
        )

    # children of parallel states

    @staticmethod
    def child_id(parent: str, state: str, visit: int, workflow: str) -> str:
        return f"{parent}.{state}.{visit}.{workflow}"

    @staticmethod
    def child_context(child: Flow, inputs: list[str], context: dict[str, Any]) -> Any:
        """The context a child starts with: the parent's `inputs`, with the child's defaults."""
        given = {key: context[key] for key in inputs if key in context}
        return child.context_check(given, "context")

    def child_id_problem(
        self, token: str, flow: Flow, state: str, visit: int, context: dict[str, Any]
    ) -> str | None:
        """Say why entering `state` cannot be done when a child it would start, or a child of
        that child, would get an id longer than `TOKEN_ID_LIMIT`; None when every id fits."""
        spec = flow.spec.states.get(state)
        if spec is None or not spec.parallel:
            return None
        for workflow in spec.parallel:
            child = self.child_id(token, state, visit, workflow)
            if len(child) > TOKEN_ID_LIMIT:
                return (
                    f"the child token id {child[:40]}... would have {len(child)} "
                    f"characters, more than {TOKEN_ID_LIMIT}"
                )
            child_flow = flow.family[workflow]
            child_context = self.child_context(child_flow, spec.inputs or [], context)
            first = self.first_choice(child_flow, child_context)
            if isinstance(first, Route):
                problem = self.child_id_problem(child, child_flow, first.target, 1, child_context)
                if problem is not None:
                    return problem
        return None

    def start_children(
        self, tx: Tx, token: TokenRow, workflows: list[str], inputs: list[str]
    ) -> None:
        """Start one child token per workflow of a parallel state, in this transaction.

        `child_id_problem` was asked before the move, so every id fits.
        """
        family = self.flow(tx, token).family
        for workflow in workflows:
            child_id = self.child_id(token.token, token.state, token.visit, workflow)
            child = TokenRow(
                child_id,
                START_NAME,
                token.status,
                1,
                self.child_context(family[workflow], inputs, token.context),
                tx.now,
                parent=token.token,
                workflow=workflow,
                checksum=token.checksum,
                priority=token.priority,
            )
            tx.insert_token(child)
            tx.record(token.token, Kind.BRANCH_STARTED, {"workflow": workflow, "token": child_id})
            tx.record(child_id, Kind.STARTED, {"context": child.context, "parent": token.token})
            self.first_move(tx, child)

    def stop_children(self, tx: Tx, token: TokenRow, reason: str) -> None:
        """Cancel every child of the token that has not ended.

        Children live only while their parent is in the parallel state that started
        them, so a token in any other state has none to look for.
        """
        spec = self.flow(tx, token).spec.states.get(token.state)
        if spec is None or not spec.parallel:
            return
        for child in tx.children(token.token):
            if child.status in LIVE_TOKEN:
                self.cancel_token(tx, child, reason)

    def child_ended(self, tx: Tx, child: TokenRow) -> None:
        """Check the join of the parent's parallel state when one of its children ends."""
        parent = tx.token(child.parent or "")
        if parent is None or parent.status not in LIVE_TOKEN:
            return
        prefix = f"{parent.token}.{parent.state}.{parent.visit}."
        if not child.token.startswith(prefix):
            return
        spec = self.flow(tx, parent).state(parent.state)
        siblings = [row for row in tx.children(parent.token) if row.token.startswith(prefix)]
        if spec.join == "any":
            ended = [child]
        else:
            if any(row.status in LIVE_TOKEN for row in siblings):
                return
            ended = [
                row for row in siblings if row.status in (TokenStatus.COMPLETED, TokenStatus.FAILED)
            ]
        payload = {"branches": [self.branch(tx, row) for row in ended]}
        self.route(tx, parent, Arrival(JOINED_EVENT, payload), Unrouted.FAIL)

    def branch(self, tx: Tx, child: TokenRow) -> dict[str, Any]:
        """Describe an ended child for `joined`: the payload that brought it to its state, and
        the result, the payload of the event that completed it (None for a failed child)."""
        accepted: Any = None
        payload: Any = None
        for entry in tx.history(child.token):
            if entry.kind == Kind.EVENT_ACCEPTED:
                accepted = entry.data.get("payload")
            elif entry.kind == Kind.ENTERED and entry.data.get("state") == child.state:
                payload = accepted
        return {
            "workflow": child.workflow,
            "token": child.token,
            "status": child.status,
            "final": child.state,
            "payload": payload,
            "result": child.result,
        }
