"""The parts of a claim that the engine's `claim` puts together: whether a claim must
write at all, a claim sent again after a lost answer, and the grant a claim answers."""

from __future__ import annotations

from typing import NamedTuple

from stateous.control.store import TaskRow, TokenRow, Tx
from stateous.control.waits import Waiter
from stateous.model.names import STARTED
from stateous.model.vocabulary import TaskStatus
from stateous.model.wire import EnteredBy, Grant

#: How old a supervisor's claim row may grow before an empty claim writes it again, in
#: seconds: `GET /supervisors` shows the last claim true to about this much.
CLAIM_TIME_KEPT = 60.0


class Claimed(NamedTuple):
    """What a claim that may wait found: its grant, else its waiter (None when it may not
    wait), and whether it was turned away for want of room to wait."""

    grant: Grant | None
    waiter: Waiter | None
    turned_away: bool


def must_write(tx: Tx, supervisor: str, states: list[str]) -> bool:
    """Whether a claim changes anything: a task is queued for it, the claim row is not
    yet this supervisor's empty one (its first claim, or its first after a grant), or the
    row's claim time is `CLAIM_TIME_KEPT` old. The claims of an idle fleet find nothing:
    they only read, and leave the writer alone but once a minute each."""
    last = tx.last_claim(supervisor)
    if last is None or last.task is not None:
        return True
    if last.claimed_at is None or tx.now - last.claimed_at >= CLAIM_TIME_KEPT:
        return True
    return bool(states) and tx.any_queued(states)


def claimed_again(tx: Tx, supervisor: str, request: str) -> TaskRow | None:
    """The task granted to this claim's request id, when the claim is sent again after a
    lost answer and the grant still holds; None when it is a new claim."""
    last = tx.last_claim(supervisor)
    if last is None or last.request != request or last.task is None:
        return None
    task = tx.task(last.task)
    if task is None or task.status != TaskStatus.CLAIMED or task.claimed_by != supervisor:
        return None
    return task if task.attempt == last.attempt else None


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
