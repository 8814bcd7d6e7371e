"""The parts of a claim that the engine's `claim` puts together: the queues it takes from,
whether it must write at all, the task it takes (or takes again, when sent again after a
lost answer), and the grant it answers. `decide` is what a supervisor is granted, by a
claim or in the answer of a report that asks for its next task (`next`), which prefers the
task that the report queued for its own token (docs/design.md, "Eager dispatch").

A claim that names the graph its supervisor was built for (`checksum`) takes from the
queues of its states' contracts in that graph, not from its states' queues: a task is
queued under the contract of its state in its own token's graph, so a supervisor is
granted a task of another version only when its state's contract is the same there.
A claim that names no graph takes from its states' queues, tasks of any version.

A task of a tree with a budget is taken only when its state's reservation fits what is
left (`stateous.control.budgets`); one that does not leaves its queue, and the claim takes
the next."""

from __future__ import annotations

from typing import NamedTuple

from stateous.control.budgets import Budgets
from stateous.control.store import QueueBy, Queues, TaskRow, TokenRow, Tx
from stateous.control.versions import Graphs
from stateous.control.waiting_claims import Waiter
from stateous.model.names import STARTED
from stateous.model.vocabulary import Kind, TaskStatus, TokenStatus
from stateous.model.wire import EnteredBy, Grant

#: How many tasks of trees whose budget they do not fit a claim sets aside, at most, before
#: it answers that it found none.
SET_ASIDE = 64

#: How old a supervisor's claim row may grow before an empty claim writes it again, in
#: seconds: `GET /supervisors` shows the last claim true to about this much.
CLAIM_TIME_KEPT = 60.0


class Claimed(NamedTuple):
    """What a claim that may wait found: its grant, else its waiter (None when it may not
    wait), and whether it was turned away for want of room to wait."""

    grant: Grant | None
    waiter: Waiter | None
    turned_away: bool


def queues(
    graphs: Graphs, states: list[str], checksum: str | None, prefer: list[str] | None = None
) -> Queues:
    """The queues a claim of `states` takes from: their own, or, when it names the graph
    `checksum`, those of their contracts there (`GraphNotFound` when no graph of that
    checksum is kept: no contract can be proved); `prefer`, the claim's labels when a
    state prefers one (`Queues.prefer`)."""
    if checksum is None:
        return Queues(states, prefer=prefer)
    return Queues(graphs.contracts(checksum, states), QueueBy.CONTRACT, prefer)


def must_write(tx: Tx, supervisor: str, request: str | None, queues: Queues) -> bool:
    """Whether a claim changes anything: its request id was granted a task (it is sent
    again), a task is queued for it, or the supervisor's claim row is missing or its claim
    time `CLAIM_TIME_KEPT` old. The claims of an idle fleet find nothing: they only read,
    and leave the writer alone but once a minute each."""
    reads = tx.claim_reads(supervisor, request, Queues([], queues.by))
    if reads.granted is not None or claim_time_old(tx.now, reads.claimed_at):
        return True
    return bool(queues.keys) and tx.any_queued(queues)


def claim_time_old(now: float, claimed_at: float | None) -> bool:
    """Whether a claim writes the time of the supervisor's last claim: it has none, or
    one `CLAIM_TIME_KEPT` old. Not at every claim: the asks of one supervisor run side by
    side, and on Postgres each write of its one row would wait for the last to commit."""
    return claimed_at is None or now - claimed_at >= CLAIM_TIME_KEPT


def claimed_again(tx: Tx, supervisor: str, granted: tuple[int, int] | None) -> TaskRow | None:
    """The task granted to this claim's request id (`granted`: the task and attempt kept
    under it), when the claim is sent again after a lost answer and the grant still holds;
    None when it is a new claim."""
    if granted is None:
        return None
    task = tx.task(granted[0])
    if task is None or task.status != TaskStatus.CLAIMED or task.claimed_by != supervisor:
        return None
    return task if task.attempt == granted[1] else None


def queued_for(tx: Tx, graphs: Graphs, token: TokenRow, queues: Queues) -> TaskRow | None:
    """The task queued for `token` (as a report just left it), when a claim of `queues` may
    take it: its state, or its state's contract in the token's graph, is one of them, and
    it is not preferred for a label the claim has not."""
    if token.status != TokenStatus.ACTIVE:
        return None
    task = tx.live_task(token.token)
    if task is None or task.status != TaskStatus.QUEUED:
        return None
    graph = graphs.of(tx, token.checksum)
    if graph.flows[token.workflow or graph.name].state(token.state).uses and tx.waits_for(
        [task.id]
    ):
        return None  # it waits for a resource's slot (or a parked key)
    key = task.state
    if queues.by == QueueBy.CONTRACT:
        key = graph.contract(task.state) or ""
    if key not in queues.keys or tx.preferred_elsewhere(task.id, queues):
        return None
    return task


def take(
    tx: Tx,
    supervisor: str,
    queues: Queues,
    request: str | None,
    lease: float,
    prefer: TaskRow | None = None,
    budgets: Budgets | None = None,
) -> TaskRow | None:
    """The task this claim takes, claimed: the one granted to its request already (its lease
    renewed), else `prefer` (queued, of its queues), else the oldest of its queues; None when
    none is queued (or none that its tree's budget `budgets` admits)."""
    reads = tx.claim_reads(supervisor, request, Queues([], queues.by) if prefer else queues)
    again = claimed_again(tx, supervisor, reads.granted)
    if again is not None:
        again.lease_until = tx.now + lease
        tx.save_task(again)
        return again
    if claim_time_old(tx.now, reads.claimed_at):
        tx.put_claim(supervisor)
    task = prefer or reads.queued
    if budgets is not None:
        task = _admitted(tx, budgets, queues, task, prefer is None)
    if task is None:
        return None
    if queues.prefer is not None:
        tx.taken(task.id)
    task.status, task.attempt = TaskStatus.CLAIMED, task.attempt + 1
    task.claimed_by, task.lease_until = supervisor, tx.now + lease
    tx.save_task(task)
    tx.record(
        task.token,
        Kind.TASK_CLAIMED,
        {"task": task.id, "supervisor": supervisor, "attempt": task.attempt},
    )
    if request is not None:
        tx.put_grant(supervisor, request, task.id, task.attempt)
    return task


def _admitted(
    tx: Tx, budgets: Budgets, queues: Queues, task: TaskRow | None, more: bool
) -> TaskRow | None:
    """The first of `task` and, with `more`, the next queued tasks that its tree's budget
    admits; the others leave their queues (`Budgets.admits`)."""
    for _ in range(SET_ASIDE):
        if task is None or budgets.admits(tx, task):
            return task
        task = tx.next_queued(queues) if more else None
    return None


def decide(
    tx: Tx,
    supervisor: str,
    queues: Queues,
    request: str | None,
    lease: float,
    prefer: TaskRow | None = None,
    budgets: Budgets | None = None,
    known: TokenRow | None = None,
) -> Grant | None:
    """What a supervisor that asks for a task of `queues` is granted, in `tx`: the task that
    `take` takes, else None; `known`, a token as the caller holds it, not read again when
    the task is its."""
    task = take(tx, supervisor, queues, request, lease, prefer, budgets)
    if task is not None:
        token = known if known is not None and known.token == task.token else tx.token(task.token)
        assert token is not None  # a task's token is deleted only with it
        return grant(tx, task, token, lease)
    return None


def grant(tx: Tx, task: TaskRow, token: TokenRow, lease: float) -> Grant:
    """What a claim answers for a task: its token's context and memory, what entered it."""
    reads = tx.grant_reads(task.token, token.state)
    accepted = reads.accepted
    name = STARTED if accepted is None else accepted["event"]
    payload = None if accepted is None else accepted.get("payload")
    return Grant(
        task=task.id,
        token=task.token,
        state=task.state,
        visit=task.visit,
        attempt=task.attempt,
        context=token.context,
        memory=reads.memory,
        entered_by=EnteredBy(name=name, payload=payload),
        lease=round(lease),
    )
