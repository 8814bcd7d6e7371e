"""The engine: every operation of the control plane, each one transaction.

The engine checks each request, decides what it does to tokens, tasks and timers
by the graph's rules, and asks the store to keep it, all in one transaction, so
that a change is on disk whole or not at all. It does no HTTP and no SQL: the API
calls it, the store keeps what it decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from stateous.control import checks, claiming, eager, mending, quota, resources, spending
from stateous.control.errors import (
    ChildToken,
    DatabaseBusy,
    EventNotAllowed,
    InvalidContext,
    InvalidPayload,
    InvalidTokenId,
    OutcomeUnknown,
    TokenNotActive,
    TokenNotFound,
)
from stateous.control.fleet import SEEN_FOR, Fleet, needs_of
from stateous.control.graph import Graph, Route
from stateous.control.holding import held_task
from stateous.control.listings import Listings
from stateous.control.moves import Arrival, Moves, Unrouted
from stateous.control.store import (
    Counter,
    KeepAndRaise,
    Queues,
    Result,
    Store,
    TokenRow,
    Tx,
)
from stateous.control.versions import Graphs
from stateous.control.views import history_entries, live_detail, view
from stateous.control.waiting_claims import DEFAULT_WAITS, Ask, Waiter, Waits, Waking
from stateous.model.limits import LEASE
from stateous.model.names import BUILTIN_EVENTS, START_NAME
from stateous.model.vocabulary import (
    LIVE_TOKEN,
    Kind,
    TokenStatus,
)
from stateous.model.wire import (
    Duplicate,
    Grant,
    Health,
    HistoryEntry,
    ReportBody,
    Reported,
    TokenView,
)

#: A token's context as a start gives it (None: empty).
Context = dict[str, Any] | None
#: A token's budget, checked, by unit (None: its workflow's, if any).
Limits = dict[str, float] | None


class Engine:
    """The control plane's decisions, over one graph and one store."""

    def __init__(
        self, graph: Graph, store: Store, *, lease: float = LEASE, waits: Waits | None = None
    ) -> None:
        self.graph = graph
        #: The claims that wait for a task; every write wakes those it queued one for.
        self.waits = waits or Waits(DEFAULT_WAITS)
        self.store: Store = Waking(store, self.waits, self._handed_in)
        #: The graphs that tokens move by: this one, and the older ones the database keeps.
        self.graphs = Graphs(graph, self.store)
        self.lease = lease
        self.moves = Moves(self.graphs, lambda tx, top: spending.reach(self, tx, top))
        self.fleet = Fleet(store.clock)
        self.fleet.load(self.store.read(lambda tx: tx.labels_seen(tx.now - SEEN_FOR)))
        self.store.read(self.moves.budgets.live)  # read as it starts, not in a request
        #: The pages of tokens, tasks and supervisors that the API lists.
        self.listings = Listings(self.store, lambda state: self.fleet.unmet(needs_of(graph, state)))
        #: Set whenever the database failed the clock or a heartbeat: the next tick renews
        #: every claimed lease before it ends any (docs/concepts/reliability.md).
        self.leases_owed = False
        #: The supervisors whose last claim here found nothing; a hint, never a decision:
        #: their next claim reads before it writes (`claiming.must_write`).
        self.idle: set[str] = set()

    def write(self, operation: Callable[[Tx], Result], by: str | None = None) -> Result:
        """Run a change in one transaction through the engine's store, whose writes wake the
        claims waiting for a task they queued; `by`, the credential that asked for it, is
        named by the first ledger row that the change writes. The verbs beside the engine
        that a credential asks for (`spending.py`) run through it too."""
        if by is None:
            return self.store.write(operation)

        def signed(tx: Tx) -> Result:
            tx.by = by
            return operation(tx)

        return self.store.write(signed)

    # the workflow

    def health(self) -> Health:
        return Health(
            workflow=self.graph.name, checksum=self.graph.checksum, lease=math.ceil(self.lease)
        )

    # reading tokens

    def token_row(self, tx: Tx, token: str, key: str | None = None) -> TokenRow:
        """The row of a token, read (and in a write locked) in `tx`; `TokenNotFound` if none.
        `key`: an idempotency key that `tx.key_used` is asked about next."""
        row = tx.token_and_key(token, key) if checks.keepable(token) else None
        if row is None:
            raise TokenNotFound(f"no token has the id {token!r}")
        return row

    def get(self, token: str) -> TokenView:
        return self.store.read(lambda tx: live_detail(self.token_row(tx, token), tx, self))

    def history(self, token: str) -> list[HistoryEntry]:
        def read(tx: Tx) -> list[HistoryEntry]:
            self.token_row(tx, token)
            return history_entries(tx.history(token))

        return self.store.read(read)

    def list_tokens(
        self, status: str | None = None, parent: str | None = None, limit: str | int | None = None
    ) -> list[TokenView]:
        """The first page of tokens, the most recently moved first (`listings` pages on)."""
        return self.listings.tokens(status=status, parent=parent, limit=limit).rows

    # starting and firing

    def start(
        self,
        token: str,
        context: Context = None,
        *,
        by: str | None = None,
        priority: int = 0,
        budget: Any = None,
    ) -> tuple[TokenView, bool]:
        """Start a token, or answer the one that exists with this id, whatever the context,
        the priority and the budget (the context is checked only for a token that is new;
        the priority and the budget first, for every start)."""
        checks.token_id(token)
        checks.priority(priority)
        limits = None if budget is None else spending.checked_budget(self, budget)
        return self.write(lambda tx: self.start_in(tx, token, context, priority, limits), by)

    def start_in(
        self, tx: Tx, token: str, context: Context, priority: int = 0, budget: Limits = None
    ) -> tuple[TokenView, bool]:
        """Start a token in `tx`, or answer the one of this id (a schedule's start)."""
        existing = self._existing(tx, token)
        if existing is not None:
            return view(existing), False
        return self._start(tx, token, context, None, priority, budget), True

    @staticmethod
    def _existing(tx: Tx, token: str) -> TokenRow | None:
        """The token of this id, if any; one whose id differs only in case is refused."""
        existing = tx.token_any_case(token)
        if existing is not None and existing.token != token:
            raise InvalidTokenId(
                f"{token!r} differs only in case from the token {existing.token!r}"
            )
        return existing

    def _start(
        self,
        tx: Tx,
        token: str,
        context: Context,
        key: str | None = None,
        priority: int = 0,
        budget: Limits = None,
    ) -> TokenView:
        """Start a token that does not exist; its `started` entry keeps the idempotency key
        of the delivery that started it, so that a redelivery is a duplicate."""
        checked = checks.context(self.graph.top, context)
        flow = self.graph.top
        choice = self.moves.first_choice(flow, checked)
        if choice is None:
            raise InvalidContext("no transition from START holds for this context")
        if isinstance(choice, Route):
            too_long = self.moves.child_id_problem(token, flow, choice.target, 1, checked)
            if too_long is not None:
                raise InvalidTokenId(too_long)
        row = TokenRow(token, START_NAME, TokenStatus.ACTIVE, 1, checked, tx.now)
        row.checksum, row.priority = self.graph.checksum, priority
        tx.insert_token(row)
        tx.record(token, Kind.STARTED, {"context": checked}, key)
        spending.open_in(self, tx, token, budget)
        self.moves.first_move(tx, row)
        return view(row)

    def fire(
        self,
        token: str,
        event: str,
        payload: dict[str, Any] | None = None,
        key: str | None = None,
        *,
        by: str | None = None,
    ) -> TokenView | Duplicate:
        """Fire an event from outside; a repeated idempotency key changes nothing."""
        checks.idempotency_key(key)
        if payload is not None and not isinstance(payload, dict):
            raise InvalidPayload("a payload must be a JSON object")

        def operation(tx: Tx) -> TokenView | Duplicate:
            return self._fire(tx, self.token_row(tx, token, key), event, payload, key)

        return self.write(operation, by)

    def _fire(
        self, tx: Tx, row: TokenRow, event: str, payload: dict[str, Any] | None, key: str | None
    ) -> TokenView | Duplicate:
        token = row.token
        if not checks.keepable(event):
            raise EventNotAllowed(f"{event!r} is no event: an event's name holds no NUL")
        if key is not None and tx.key_used(token, key):
            return Duplicate(token=view(row))
        if row.status not in LIVE_TOKEN:
            reason = f"token {token!r} is {row.status}; it takes no events"
            tx.record(token, Kind.EVENT_REJECTED, {"event": event, "reason": reason})
            raise KeepAndRaise(TokenNotActive(reason))
        flow = self.moves.flow(tx, row)
        if event in BUILTIN_EVENTS:
            reason = f"{event!r} is an event of Stateous itself; it cannot be fired"
            self.moves.refuse(tx, row, event, reason)
        if not flow.has_event(event):
            self.moves.refuse(tx, row, event, f"workflow {flow.name!r} has no event {event!r}")
        checked = checks.payload(flow, event, payload)
        self.moves.route(tx, row, Arrival(event, checked, key=key), Unrouted.REFUSE)
        return view(row)

    def deliver(
        self,
        token: str,
        event: str,
        *,
        payload: Callable[[], dict[str, Any]],
        context: Callable[[], dict[str, Any] | None] | None,
        key: str | None,
        by: str | None,
    ) -> tuple[TokenView | Duplicate, bool]:
        """A webhook's delivery, in one transaction: fire `event` with the payload that
        `payload` takes, or start the token when none exists with the context that `context`
        takes (None: the webhook may not start); a redelivery of either is a duplicate."""
        checks.token_id(token)
        checks.idempotency_key(key)

        def operation(tx: Tx) -> tuple[TokenView | Duplicate, bool]:
            existing = self._existing(tx, token)
            if existing is not None:
                return self._fire(tx, existing, event, payload(), key), False
            if context is None:
                raise TokenNotFound(
                    f"no token has the id {token!r}, and this webhook may not start one"
                )
            return self._start(tx, token, context(), key), True

        return self.write(operation, by)

    # steering

    def _steerable(
        self, tx: Tx, token: str, allowed: tuple[str, ...], verb: str, done: str
    ) -> TokenRow:
        """The top token to steer with `verb`, if its status is one of `allowed`; `done` is
        the verb's past participle, for the refusal."""
        row = self.token_row(tx, token)
        if row.parent is not None:
            raise ChildToken(
                f"token {token!r} is a child of {row.parent!r}; {verb} its top token instead"
            )
        if row.status not in allowed:
            raise TokenNotActive(f"token {token!r} is {row.status}; it cannot be {done}")
        return row

    # Each steering verb is also a step of its own (`pause_in`, ...) that acts inside a
    # transaction opened by its caller: a plan's apply marks the token in the same one.

    def pause(self, token: str, *, by: str | None = None) -> TokenView:
        """Pause an active token and its live children."""
        return self.write(lambda tx: self.pause_in(tx, token), by)

    def pause_in(self, tx: Tx, token: str) -> TokenView:
        row = self._steerable(tx, token, (TokenStatus.ACTIVE,), "pause", "paused")
        for member in tx.family(row):
            if member.status == TokenStatus.ACTIVE:
                member.status = TokenStatus.PAUSED
                tx.save_token(member)
                tx.record(member.token, Kind.PAUSED, {})
                self.moves.queued_uses(tx, member, resources.pause_token)
        return view(row)

    def resume(self, token: str, *, by: str | None = None) -> TokenView:
        """Resume a paused token; its deferred events, and its children's, apply in order."""
        return self.write(lambda tx: self.resume_in(tx, token), by)

    def resume_in(self, tx: Tx, token: str) -> TokenView:
        row = self._steerable(tx, token, (TokenStatus.PAUSED,), "resume", "resumed")
        deferred = []
        for member in tx.family(row):
            if member.status != TokenStatus.PAUSED:
                continue
            paused = tx.last_entry(member.token, (Kind.PAUSED,))
            if paused is not None:
                tx.shift_timers(member.token, tx.now - paused.at)
                deferred.extend(tx.entries_after(member.token, paused.seq, Kind.EVENT_DEFERRED))
            member.status = TokenStatus.ACTIVE
            tx.save_token(member)
            tx.record(member.token, Kind.RESUMED, {})
            self.moves.queued_uses(tx, member, resources.admit)
        for entry in sorted(deferred, key=lambda item: item.data["arrival"]):
            self._replay(tx, entry.token, entry.data)
        self.moves.budgets.resumed(tx, token)
        return view(self.token_row(tx, token))

    def _replay(self, tx: Tx, token: str, deferred: dict[str, Any]) -> None:
        """Apply an event deferred while the token was paused, or drop it if it no longer fits.

        A deferred report applies only to the visit it was reported in; an event of
        Stateous itself that still cannot move the token fails it, as it would
        have when it arrived.
        """
        row = self.token_row(tx, token)
        event = deferred["event"]
        if row.status != TokenStatus.ACTIVE:
            self.moves.drop(tx, row, event, f"token {token!r} is {row.status}")
            return
        reported = "task" in deferred
        if reported and (row.state, row.visit) != (deferred["state"], deferred["visit"]):
            self.moves.drop(tx, row, event, f"the token left {deferred['state']!r}")
            return
        changes = deferred.get("context") or {}
        arrival = Arrival(
            event,
            deferred.get("payload"),
            task=tx.task(deferred["task"]) if reported else None,
            changes=changes,
            context={**row.context, **changes} if changes else None,
            schedules=deferred.get("schedules") or [],
            detail=deferred.get("error"),
            replay=deferred["arrival"],
        )
        own = event in BUILTIN_EVENTS and not reported
        self.moves.route(tx, row, arrival, Unrouted.FAIL if own else Unrouted.DROP)

    def cancel(self, token: str, *, by: str | None = None) -> TokenView:
        """Cancel an active or paused token for good, with its tasks, timers and children."""

        return self.write(lambda tx: self.cancel_in(tx, token), by)

    def cancel_in(self, tx: Tx, token: str) -> TokenView:
        row = self._steerable(tx, token, LIVE_TOKEN, "cancel", "cancelled")
        self.moves.cancel_token(tx, row, None)
        return view(row)

    def retry(
        self,
        token: str,
        state: str | None = None,
        context: dict[str, Any] | None = None,
        *,
        by: str | None = None,
    ) -> TokenView:
        """Bring a failed or cancelled token back, active, in `state` (its last state when
        None), with `context` changes merged (`mending.retry`)."""

        return self.write(lambda tx: self.retry_in(tx, token, state, context), by)

    def retry_in(
        self, tx: Tx, token: str, state: str | None, context: dict[str, Any] | None
    ) -> TokenView:
        row = self.token_row(tx, token)
        mending.retry(tx, self.moves, row, state, context)
        return view(row)

    # tasks

    def claim(
        self,
        supervisor: str,
        states: list[str],
        request: str | None = None,
        *,
        checksum: str | None = None,
        by: str | None = None,
    ) -> Grant | None:
        """Give the first queued task in turn of these states to a supervisor, or None; with
        the `checksum` of its graph, only of the same contract there (`claiming.queues`)."""
        return self.claim_or_wait(supervisor, states, request, checksum=checksum, by=by).grant

    def claim_or_wait(
        self,
        supervisor: str,
        states: list[str],
        request: str | None = None,
        *,
        checksum: str | None = None,
        by: str | None = None,
        wait: float = 0.0,
        waiter: Waiter | None = None,
        labels: Mapping[str, Any] | None = None,
    ) -> claiming.Claimed:
        """Claim as `claim` does; with `wait`, first enter the waits (unless the claim has a
        `waiter` already, from an earlier attempt), so that a task queued during the attempt
        wakes it. The caller parks the waiter or lets it leave."""
        checks.claim(supervisor, states, request, wait)
        if waiter is not None and waiter.handed is not None:
            # A write handed it a task in its own transaction, which wrote the grant.
            waiter.rewind()
            self._seen(waiter.ask, waiter.handed)
            return claiming.Claimed(waiter.handed, waiter, False)
        queues, turned_away = self._queues(supervisor, states, checksum, labels), False
        ask = Ask(supervisor, queues, request, self.fleet.to_keep(supervisor), by)
        if waiter is None and wait > 0 and queues.keys:
            waiter = self.waits.enter(ask, wait)
            turned_away = waiter is None
        if waiter is not None:
            waiter.rewind()
        try:
            grant = self._claim_once(ask)
        except BaseException:
            if waiter is not None:
                waiter.leave()
            raise
        return claiming.Claimed(grant, waiter, turned_away)

    def _queues(
        self,
        supervisor: str,
        states: list[str],
        checksum: str | None,
        labels: Mapping[str, Any] | None,
    ) -> Queues:
        """The queues a claim or a report's `next` takes from (`needs=`, `prefers=`, checksum)."""
        fitting = self.fleet.fitting(self.graph, supervisor, states, labels)
        prefer = self.fleet.preferring(self.graph, fitting, labels)
        return claiming.queues(self.graphs, fitting, checksum, prefer)

    def _claim_once(self, ask: Ask) -> Grant | None:
        # Only a supervisor whose last claim found nothing is likely to find nothing
        # again: it reads first; the others claim at once (as does one whose labels its
        # claim row may not hold).
        if (
            ask.labels is None
            and ask.supervisor in self.idle
            and not self.store.read(
                lambda tx: claiming.must_write(tx, ask.supervisor, ask.request, ask.queues)
            )
        ):
            return None
        grant = self.write(lambda tx: self._claimed_in(tx, ask), ask.by)
        self._seen(ask, grant)
        return grant

    def _claimed_in(self, tx: Tx, ask: Ask) -> Grant | None:
        """What a claim is granted in `tx`: in a transaction of its own, or in the write that
        queued a task while it waited (`waiting_claims.Waking`)."""
        grant = claiming.decide(
            tx, ask.supervisor, ask.queues, ask.request, self.lease, budgets=self.moves.budgets
        )
        if ask.labels is not None:
            tx.keep_labels(ask.supervisor, ask.labels)
        return grant

    def _handed_in(self, tx: Tx, ask: Ask) -> Grant | None:
        """What a waiting claim is handed in the write `tx` that queued a task: what its own
        transaction would grant it, while the credential it was made with is live (made
        without one: while none is needed); else nothing, and it is woken to ask again,
        where the API refuses it."""
        allowed = not tx.auth_on() if ask.by is None else tx.credential_live(ask.by)
        return self._claimed_in(tx, ask) if allowed else None

    def _seen(self, ask: Ask, grant: Grant | None) -> None:
        """After a claim's commit: its labels are kept, and whether it found nothing."""
        if ask.labels is not None:
            self.fleet.kept(ask.supervisor, ask.labels)
        self._seen_idle(ask.supervisor, grant)

    def _seen_idle(self, supervisor: str, grant: Grant | None) -> None:
        """Note whether the supervisor's last ask for a task found nothing (`self.idle`)."""
        if grant is None:
            self.idle.add(supervisor)
        else:
            self.idle.discard(supervisor)

    def heartbeat(self, supervisor: str, tasks: list[int]) -> list[int]:
        """Renew the leases of the tasks a supervisor still holds; name the others lost."""
        checks.supervisor_name(supervisor)
        checks.heartbeat_tasks(tasks)

        def operation(tx: Tx) -> list[int]:
            held = tx.renew_leases_of(supervisor, tasks, tx.now + self.lease) if tasks else set()
            tx.touch_heartbeat(supervisor)
            return [ident for ident in tasks if ident not in held]

        try:
            return self.store.write(operation)
        except (DatabaseBusy, OutcomeUnknown):
            # The supervisor tried; its lease must not end for the database's silence.
            self.leases_owed = True
            raise

    def note(
        self,
        task: int,
        text: str,
        attempt: int | None = None,
        *,
        supervisor: str | None = None,
        by: str | None = None,
    ) -> None:
        """Add one line of a routine's progress to the token's history; a note that names
        its `supervisor` lands only on a task that supervisor holds."""
        kept = checks.note_text(text)
        checks.attempt(attempt)
        if supervisor is not None:
            checks.supervisor_name(supervisor)

        def operation(tx: Tx) -> None:
            row, token = held_task(tx, task, attempt, supervisor)
            tx.record(token.token, Kind.NOTE, {"task": row.id, "text": kept})

        self.write(operation, by)

    def memory(
        self,
        task: int,
        key: str,
        value: Any,
        attempt: int | None = None,
        *,
        supervisor: str | None = None,
        by: str | None = None,
    ) -> None:
        """Save or delete one key of a routine's memory, at once; a write that names its
        `supervisor` lands only on a task that supervisor holds."""
        checks.memory_key(key)
        checks.attempt(attempt)
        if supervisor is not None:
            checks.supervisor_name(supervisor)

        def operation(tx: Tx) -> None:
            row, token = held_task(tx, task, attempt, supervisor)
            if value is None:
                tx.delete_memory(token.token, token.state, key)
                kind = Kind.MEMORY_DELETED
            else:
                tx.set_memory(token.token, token.state, key, value)
                kind = Kind.MEMORY_SET
            tx.record(token.token, kind, {"task": row.id, "state": token.state, "memory_key": key})

        self.write(operation, by)

    def report(self, task: int, body: ReportBody, *, by: str | None = None) -> TokenView | Reported:
        """Take the outcome of a task: an event, waiting, or a failed attempt; with `next`,
        grant its supervisor its next task in the same transaction (`eager.py`)."""
        if body.supervisor is not None:
            checks.supervisor_name(body.supervisor)
        checks.attempt(body.attempt)
        checks.retry_after(body.kind, body.retry_after)
        quota.check(body)
        wanted = eager.asked(self._queues, body)

        def operation(tx: Tx) -> TokenView | Reported:
            row, token = held_task(
                tx, task, body.attempt, body.supervisor, outside=body.supervisor is None
            )
            tx.count(Counter.REPORTS, body.kind)
            spending.apply(self, tx, row, token, body)
            if wanted is None:
                return view(token)
            return eager.answer(tx, self.graphs, wanted, token, self.lease, self.moves.budgets)

        answer = self.write(operation, by)
        if wanted is not None:
            self._seen_idle(wanted.supervisor, getattr(answer, "grant", None))
        return answer
