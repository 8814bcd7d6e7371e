"""The ledger's global order on Postgres, where transactions commit in another order than
they took their positions: a reader never reads past a position still held."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from stateous.control.store import Tx
from stateous.control.store.postgres import PostgresStore

#: How long a test waits for a thread that must get on.
WAIT = 10.0


def note(token: str) -> Callable[[Tx], None]:
    def operation(tx: Tx) -> None:
        tx.record(token, "note", {"text": token})

    return operation


def positions(store: PostgresStore, upto: int) -> list[tuple[int, str]]:
    rows = store.read(lambda tx: tx.entries_since(0, upto, None, 100))
    return [(pos, entry.token) for pos, entry in rows]


def test_a_later_commit_stays_unread_while_an_earlier_position_is_uncommitted(url: str) -> None:
    store = PostgresStore(url)
    recorded, go_on = threading.Event(), threading.Event()

    def slow(tx: Tx) -> None:
        tx.record("SLOW", "note", {"text": "slow"})
        tx.execute("SELECT 1")  # the row is sent: the transaction holds its position
        recorded.set()
        assert go_on.wait(WAIT)

    slow_writer = threading.Thread(target=store.write, args=(slow,))
    try:
        slow_writer.start()
        assert recorded.wait(WAIT)
        store.write(note("FAST"))  # takes position 2, and commits first

        assert store.horizon() == 0
        assert positions(store, 10) == [(2, "FAST")]  # in the table, not yet to be read
        assert positions(store, store.horizon()) == []
    finally:
        go_on.set()
        slow_writer.join(WAIT)
    assert store.horizon() == 2
    assert positions(store, store.horizon()) == [(1, "SLOW"), (2, "FAST")]
    store.close()


def test_a_rolled_back_position_is_a_gap_and_a_new_store_numbers_after_the_largest(
    url: str,
) -> None:
    store = PostgresStore(url)

    def refused(tx: Tx) -> None:
        tx.record("GONE", "note", {"text": "gone"})
        raise ValueError("refused")

    store.write(note("A"))
    with pytest.raises(ValueError, match="refused"):
        store.write(refused)
    store.write(note("B"))
    assert positions(store, store.horizon()) == [(1, "A"), (3, "B")]
    store.close()

    again = PostgresStore(url)
    again.write(note("C"))
    assert positions(again, again.horizon()) == [(1, "A"), (3, "B"), (4, "C")]
    again.close()
