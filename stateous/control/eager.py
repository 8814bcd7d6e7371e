"""Eager dispatch: a report that asks for its supervisor's next task (`next`) is answered
with the grant of one, decided in the report's own transaction by the claim's code
(`claiming.decide`): the task that the report queued for its token, when the supervisor
serves its state, else the oldest queued task of the states it names, as a claim would.
So a run of several steps neither waits in the queue nor pays a claim between its steps
(docs/design.md, "Eager dispatch")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import msgspec

from stateous.control import checks, claiming
from stateous.control.budgets import Budgets
from stateous.control.errors import GraphNotFound
from stateous.control.store import Queues, TokenRow, Tx
from stateous.control.versions import Graphs
from stateous.control.views import view
from stateous.model.wire import ReportBody, Reported


class Asked(NamedTuple):
    """A report's `next`, checked: who asks, for which states, from which queues."""

    supervisor: str
    states: list[str]
    queues: Queues
    request: str | None


#: The queues a claim of a supervisor's states takes from, by its checksum and labels.
QueuesOf = Callable[[str, list[str], str | None, Mapping[str, Any] | None], Queues]


def asked(queues_of: QueuesOf, body: ReportBody) -> Asked | None:
    """The `next` of a report, checked as a claim's fields are, its queues found as a
    claim's are (`queues_of`); None when it asks none. A checksum of no graph the database
    keeps takes from no queue: the report is taken, and its answer grants nothing (a claim
    would be refused `graph_not_found`)."""
    wanted = body.next
    if wanted is None or body.supervisor is None:
        return None
    checks.claimed_states(wanted.states)
    checks.request_id(wanted.request)
    try:
        queues = queues_of(body.supervisor, wanted.states, wanted.checksum, wanted.labels)
    except GraphNotFound:
        queues = Queues([])
    return Asked(body.supervisor, wanted.states, queues, wanted.request)


def answer(
    tx: Tx, graphs: Graphs, wanted: Asked, token: TokenRow, lease: float, budgets: Budgets
) -> Reported:
    """The answer of a report that asked `next`, in its transaction: its token, and the
    grant of the supervisor's next task (the one queued for `token`, if it may take it)."""
    prefer = claiming.queued_for(tx, graphs, token, wanted.queues)
    grant = claiming.decide(
        tx, wanted.supervisor, wanted.queues, wanted.request, lease, prefer, budgets, token
    )
    return Reported(**msgspec.structs.asdict(view(token)), grant=grant)
