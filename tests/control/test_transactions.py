"""A store's transaction is put together, not stacked: each verb of `Tx` is written in one
class, the counts and the queues woken are watchers that the plain transaction tells once of
each row it writes, and a backend writes only what its database does its own way."""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

import msgspec
import pytest

from stateous.control.store import Tx
from stateous.control.store.counts import TURNED_AWAY
from stateous.control.store.postgres.store import PostgresTx
from stateous.control.store.rows import TokenRow
from stateous.control.store.sqlite import SqliteTx
from stateous.control.store.turn_sql import TaskTurn
from stateous.control.store.watchers import Watcher
from stateous.model.vocabulary import Kind
from tests.control.support import Backend

#: Every verb of the store's interface.
VERBS = sorted(
    name
    for name, value in vars(Tx).items()
    if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))
)
#: The verbs that Postgres writes its own way: a write's reads lock the token's family, a
#: claim reads its grant in its statement, held events are numbered one at a time, and reads
#: that the engine makes one after the other share a round trip (a claim's row with its
#: claim, a fire's idempotency key with its token's lock).
POSTGRES_OWN = {
    "token",
    "task",
    "timer",
    "next_queued",
    "grant_reads",
    "last_arrival",
    "claim_reads",
    "token_and_key",
    "key_used",
}


@pytest.mark.parametrize("transaction", [SqliteTx, PostgresTx], ids=["sqlite", "postgres"])
def test_each_verb_is_written_in_one_class_and_a_backend_writes_only_its_own(
    transaction: type,
) -> None:
    own = POSTGRES_OWN if transaction is PostgresTx else set()
    for verb in VERBS:
        written = [part.__name__ for part in transaction.__mro__ if verb in vars(part)]
        if verb in own:
            assert written[0] == transaction.__name__ and len(written) == 2, (verb, written)
        else:
            assert len(written) == 1, f"{verb} is written in {written}"
    assert "record" in VERBS


class Seen(Watcher):
    """Every ledger row that a transaction says it writes."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[tuple[str, int | None, str, dict[str, Any]]] = []

    def recorded(self, token: str, seq: int | None, kind: str, data: str) -> None:
        self.rows.append((token, seq, kind, msgspec.json.decode(data)))


def test_a_watcher_is_told_each_ledger_row_once_as_the_ledger_keeps_it(backend: Backend) -> None:
    store = backend.store(clock=lambda: 1_000_000.0)
    seen = Seen()

    def start(tx: Any) -> Counter[str] | None:
        tx.watchers.append(seen)
        tx.by = "operator"
        tx.insert_token(TokenRow("T", "draft", "active", 1, {}, tx.now, visits={"draft": 1}))
        tx.record("T", Kind.STARTED, {"context": {}})
        task = tx.insert_task("T", "draft", 1, "c1", TaskTurn(tx.now))
        tx.record("T", Kind.TASK_QUEUED, {"task": task})
        tx.record("T", Kind.EVENT_REJECTED, {"event": "nope"})
        queued: Counter[str] | None = tx.queued_in
        return queued

    try:
        assert store.write(start) == Counter({"draft": 1, "c1": 1})
        history = store.read(lambda tx: tx.history("T"))
        counters = store.read(lambda tx: tx.counters())
    finally:
        store.close()
    assert [(e.token, e.seq, e.kind, e.data) for e in history] == seen.rows
    assert seen.rows[0][3] == {"context": {}, "by": "operator"}  # signed once, the first row
    assert [kind for _, _, kind, _ in seen.rows] == ["started", "task_queued", "event_rejected"]
    assert {key: n for key, n in counters.items() if n} == {
        ("tokens_started", ""): 1,
        ("live_tokens", "active draft"): 1,
        ("live_tasks", "queued draft"): 1,
        ("events_refused", TURNED_AWAY): 1,
    }


def test_a_resumed_token_makes_the_queues_woken_unknown(backend: Backend) -> None:
    store = backend.store()

    def resume(tx: Any) -> Counter[str] | None:
        tx.insert_token(TokenRow("T", "draft", "active", 1, {}, tx.now, visits={"draft": 1}))
        tx.insert_task("T", "draft", 1, None, TaskTurn(tx.now))
        tx.record("T", Kind.RESUMED, {})
        queued: Counter[str] | None = tx.queued_in
        return queued

    try:
        assert store.write(resume) is None
    finally:
        store.close()
