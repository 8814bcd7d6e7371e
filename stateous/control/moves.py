"""How a token moves: routing an event, leaving a state, entering the next one, ending.

These steps run inside a transaction that the engine opened, and write exactly
the ledger entries of each move. Every path that moves a token (an event from
outside, a report, a timer, a failed task, a held event on resume, a join) goes
through `Moves.route`, so one token always moves by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stateous.control.errors import EventNotAllowed, InvalidTokenId
from stateous.control.graph import Ambiguous, Flow, Graph, Route
from stateous.control.store import TaskRow, TokenRow, Tx, to_iso
from stateous.model.durations import parse_duration
from stateous.model.names import END_NAME

ID_LIMIT = 128


@dataclass(slots=True)
class Outcome:
    """The parts of a report that travel with its event: context changes and timers."""

    task: TaskRow | None = None
    schedules: tuple[dict[str, Any], ...] = ()


class Moves:
    """The rules by which tokens move, on one graph."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def flow(self, token: TokenRow) -> Flow:
        return self.graph.flows[token.workflow or self.graph.name]

    # routing

    def counts(self, tx: Tx, token: TokenRow, event: str) -> dict[str, int]:
        """Count accepted events over the token's life, this one included."""
        counts = tx.event_counts(token.token)
        counts[event] = counts.get(event, 0) + 1
        return counts

    def choose(self, tx: Tx, token: TokenRow, event: str, payload: Any) -> Route | Ambiguous | None:
        """Pick the transition that `event` takes from the token's state now."""
        flow = self.flow(token)
        branches = payload.get("branches") if event == "joined" and payload else None
        counted = flow.counts_needed(token.state, event)
        return flow.choose(
            token.state,
            event,
            ctx=token.context,
            payload=payload,
            counts=self.counts(tx, token, event) if counted else {},
            branches=branches,
        )

    def take(
        self,
        tx: Tx,
        token: TokenRow,
        event: str,
        payload: Any,
        choice: Route | Ambiguous,
        *,
        key: str | None = None,
        outcome: Outcome | None = None,
    ) -> None:
        """Move the token along the chosen transition, or fail it when guards clash."""
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
            "event_accepted",
            {"event": event, "payload": payload, "state": token.state},
            key,
        )
        self.leave(tx, token, event, from_report=outcome is not None and outcome.task is not None)
        if choice.target == END_NAME:
            self.end(tx, token, "completed", {})
        else:
            self.enter(tx, token, choice.target)

    def reject(self, tx: Tx, token: TokenRow, event: str, reason: str) -> EventNotAllowed:
        """Record a refused event and return the refusal to raise after the commit."""
        tx.record(token.token, "event_rejected", {"event": event, "reason": reason})
        return EventNotAllowed(reason)

    def no_route_reason(self, token: TokenRow, event: str) -> str:
        flow = self.flow(token)
        if flow.routes.get((token.state, event)):
            return f"no guard of {event!r} in {token.state!r} holds, and it has no fallback"
        return f"{token.state!r} has no transition on {event!r}"

    # leaving and entering

    def leave(self, tx: Tx, token: TokenRow, event: str, *, from_report: bool) -> None:
        """End the visit: its task is done or cancelled, its timers and children stop."""
        task = tx.live_task(token.token)
        if task is not None:
            done = from_report or (
                task.status in ("claimed", "waiting") and self.flow(token).emits(token.state, event)
            )
            self.close_task(tx, task, "done" if done else "cancelled")
        tx.cancel_timers(token.token)
        self.stop_children(tx, token, f"the parent left {token.state!r} on {event!r}")

    def close_task(self, tx: Tx, task: TaskRow, status: str) -> None:
        task.status = status
        task.lease_until = None
        tx.save_task(task)
        tx.record(task.token, f"task_{status}", {"task": task.id})

    def enter(self, tx: Tx, token: TokenRow, state: str) -> None:
        """Enter `state`: a new visit, with its task (or children) and its timeout."""
        flow = self.flow(token)
        spec = flow.state(state)
        visit = token.visits.get(state, 0) + 1
        token.visits[state] = visit
        token.state, token.visit, token.entered_at = state, visit, tx.now
        tx.record(token.token, "entered", {"state": state, "visit": visit})
        tx.save_token(token)
        if spec.parallel:
            self.start_children(tx, token, spec.parallel, spec.inputs or [])
        else:
            task = tx.insert_task(token.token, flow.claim_name(state), visit)
            tx.record(token.token, "task_queued", {"task": task, "state": state})
        if spec.timeout is not None:
            self.set_timer(tx, token, "timeout", None, parse_duration(spec.timeout), "timeout")

    def set_timer(
        self, tx: Tx, token: TokenRow, event: str, payload: Any, seconds: float, kind: str
    ) -> None:
        due = tx.now + seconds
        timer = tx.insert_timer(token.token, token.state, token.visit, event, payload, due, kind)
        tx.record(
            token.token,
            "timer_set",
            {"timer": timer, "event": event, "due_at": to_iso(due), "kind": kind},
        )

    # ending

    def end(self, tx: Tx, token: TokenRow, status: str, data: dict[str, Any]) -> None:
        """End the token for good: completed, failed or cancelled."""
        token.status = status
        tx.record(token.token, status, data)
        tx.save_token(token)
        tx.cancel_timers(token.token)
        tx.drop_memory(token.token)
        if token.parent is not None and status != "cancelled":
            self.child_ended(tx, token)

    def fail(self, tx: Tx, token: TokenRow, reason: str) -> None:
        """Fail the token: its live task and timers stop, its children are cancelled."""
        task = tx.live_task(token.token)
        if task is not None:
            self.close_task(tx, task, "cancelled")
        self.stop_children(tx, token, f"the parent failed: {reason}")
        self.end(tx, token, "failed", {"reason": reason})

    # children of parallel states

    def child_id(self, token: TokenRow, workflow: str) -> str:
        return f"{token.token}.{token.state}.{token.visit}.{workflow}"

    def start_children(
        self, tx: Tx, token: TokenRow, workflows: list[str], inputs: list[str]
    ) -> None:
        """Start one child token per workflow of a parallel state, in this transaction."""
        context = {key: token.context[key] for key in inputs if key in token.context}
        for workflow in workflows:
            child_id = self.child_id(token, workflow)
            if len(child_id) > ID_LIMIT:
                raise InvalidTokenId(
                    f"the child token id {child_id[:40]}... would have {len(child_id)} "
                    f"characters, more than {ID_LIMIT}"
                )
            flow = self.graph.flows[workflow]
            child = TokenRow(
                child_id,
                "__start__",
                token.status,
                1,
                flow.context_check(context, "context"),
                tx.now,
                parent=token.token,
                workflow=workflow,
            )
            tx.insert_token(child)
            tx.record(token.token, "branch_started", {"workflow": workflow, "token": child_id})
            tx.record(child_id, "started", {"context": child.context, "parent": token.token})
            self.first_move(tx, child)

    def first_move(self, tx: Tx, token: TokenRow) -> None:
        """Move a new token out of START, by the guards on its context."""
        choice = self.flow(token).choose(
            "__start__", None, ctx=token.context, payload=None, counts={}
        )
        if choice is None or isinstance(choice, Ambiguous):
            self.fail(tx, token, "no transition from START holds for its context")
            return
        tx.record(
            token.token,
            "event_accepted",
            {"event": "__started__", "payload": None, "state": "__start__"},
        )
        self.enter(tx, token, choice.target)

    def stop_children(self, tx: Tx, token: TokenRow, reason: str) -> None:
        """Cancel every child of the token that has not ended.

        Children live only while their parent is in the parallel state that started
        them, so a token in any other state has none to look for.
        """
        spec = self.flow(token).spec.states.get(token.state)
        if spec is None or not spec.parallel:
            return
        for child in tx.children(token.token):
            if child.status in ("active", "paused"):
                self.cancel_token(tx, child, reason)

    def cancel_token(self, tx: Tx, token: TokenRow, reason: str | None) -> None:
        """Cancel a live token, its task, its timers and its own children."""
        for held in self.held(tx, token):
            tx.record(
                token.token,
                "event_dropped",
                {"event": held.data["event"], "reason": "the token was cancelled"},
            )
        task = tx.live_task(token.token)
        if task is not None:
            self.close_task(tx, task, "cancelled")
        self.stop_children(tx, token, "the parent was cancelled")
        self.end(tx, token, "cancelled", {} if reason is None else {"reason": reason})

    def held(self, tx: Tx, token: TokenRow) -> list[Any]:
        """The events held for a paused token since its last pause, in order."""
        if token.status != "paused":
            return []
        paused = tx.last_entry(token.token, ("paused",))
        return [] if paused is None else tx.entries_after(token.token, paused.seq, "event_deferred")

    def child_ended(self, tx: Tx, child: TokenRow) -> None:
        """Check the join of the parent's parallel state when one of its children ends."""
        parent = tx.token(child.parent or "")
        if parent is None or parent.status not in ("active", "paused"):
            return
        prefix = f"{parent.token}.{parent.state}.{parent.visit}."
        if not child.token.startswith(prefix):
            return
        spec = self.flow(parent).state(parent.state)
        siblings = [row for row in tx.children(parent.token) if row.token.startswith(prefix)]
        if spec.join == "any":
            ended = [child]
        else:
            if any(row.status in ("active", "paused") for row in siblings):
                return
            ended = [row for row in siblings if row.status in ("completed", "failed")]
        payload = {"branches": [self.branch(tx, row) for row in ended]}
        self.deliver(tx, parent, "joined", payload)

    def branch(self, tx: Tx, child: TokenRow) -> dict[str, Any]:
        """Describe an ended child for `joined`, with the payload that brought it to its state."""
        accepted: Any = None
        payload: Any = None
        for entry in tx.history(child.token):
            if entry.kind == "event_accepted":
                accepted = entry.data.get("payload")
            elif entry.kind == "entered" and entry.data.get("state") == child.state:
                payload = accepted
        return {
            "workflow": child.workflow,
            "token": child.token,
            "status": child.status,
            "final": child.state,
            "payload": payload,
        }

    def deliver(
        self, tx: Tx, token: TokenRow, event: str, payload: Any, detail: str | None = None
    ) -> None:
        """Route an event of Stateous itself (`joined`, `error`, `timeout`): hold, move, fail."""
        if token.status == "paused":
            self.hold(tx, token, event, payload, {} if detail is None else {"error": detail})
            return
        choice = self.choose(tx, token, event, payload)
        if choice is None:
            reasons = {
                "joined": f"the join of {token.state!r} cannot move the token",
                "error": f"{token.state!r} failed, and has no transition on 'error'",
                "timeout": f"{token.state!r} timed out",
            }
            reason = reasons.get(event, f"{event!r} cannot move the token")
            self.fail(tx, token, f"{reason}: {detail or self.no_route_reason(token, event)}")
            return
        self.take(tx, token, event, payload, choice)

    def hold(
        self,
        tx: Tx,
        token: TokenRow,
        event: str,
        payload: Any,
        extra: dict[str, Any],
        key: str | None = None,
    ) -> None:
        """Keep an event for a paused token, numbered in the order of arrival."""
        arrival = tx.last_arrival() + 1
        data = {"event": event, "payload": payload, "arrival": arrival, **extra}
        tx.record(token.token, "event_deferred", data, key)
