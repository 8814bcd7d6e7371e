"""A unit of work (`with store.turn() as turn:`): on SQLite its writes share one transaction,
each in a savepoint, a read inside sees them, leaving it commits, `turn.after` waits for
that commit, and it waits for the database a short while only; on Postgres it opens
nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import apsw
import pytest

from stateous.control.errors import DatabaseBusy
from stateous.control.store import COMMITTED, joined
from stateous.control.store.sqlite import TURN_BUSY_MILLISECONDS, SqliteStore
from tests.control.support import Backend
from tests.control.test_writes import (
    PATIENCE,
    Refused,
    fails,
    keeps,
    names,
    put,
    put_row,
    traced,
    wait_queued,
)


def committed_names(store: SqliteStore) -> list[str]:
    """The credentials on disk, read by a thread of its own, outside the turn."""
    with ThreadPoolExecutor(1) as pool:
        return sorted(pool.submit(names, store).result(PATIENCE))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "db.sqlite")
    yield opened
    opened.close()


def test_the_writes_of_a_turn_share_one_transaction_that_commits_as_it_ends(
    store: SqliteStore,
) -> None:
    statements = traced(store)
    with store.turn():
        put(store, "first", "h1")
        put(store, "second", "h2")
        assert committed_names(store) == []
    assert committed_names(store) == ["first", "second"]
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    batches = store.writer.batch_size.read()
    assert (batches.count, batches.total) == (1, 2.0)  # one commit of two writes
    with store.turn():
        pass  # a turn that wrote nothing begins and commits nothing
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 1
    put(store, "third", "h3")  # outside a turn, a write commits on its own
    assert committed_names(store) == ["first", "second", "third"]


def test_a_read_in_a_turn_sees_the_turns_own_writes(store: SqliteStore) -> None:
    put(store, "before", "h")
    with store.turn():
        assert names(store) == ["before"]
        put(store, "inside", "h")
        assert sorted(names(store)) == ["before", "inside"]
        assert committed_names(store) == ["before"]


def test_a_write_of_a_turn_that_fails_rolls_back_only_its_savepoint(
    store: SqliteStore,
) -> None:
    with store.turn():
        put(store, "before", "h")
        with pytest.raises(Refused, match="after its write"):
            store.write(fails)
        with pytest.raises(Refused, match="kept with its write"):
            store.write(keeps)
        put(store, "after", "h")
    assert committed_names(store) == ["after", "before", "kept"]


def test_a_turn_whose_block_raises_keeps_none_of_its_writes(store: SqliteStore) -> None:
    with pytest.raises(RuntimeError), store.turn():
        put(store, "lost", "h")
        raise RuntimeError("the block broke")
    assert committed_names(store) == []
    put(store, "next", "h")  # the turn to write was passed on
    assert committed_names(store) == ["next"]


def test_a_turn_inside_a_turn_joins_it(store: SqliteStore) -> None:
    with store.turn() as outer:
        put(store, "outer", "h")
        with store.turn() as inner:
            assert inner is outer
            put(store, "inner", "h")
        assert committed_names(store) == []
    assert committed_names(store) == ["inner", "outer"]


def test_what_waits_for_a_turn_runs_once_it_has_committed(store: SqliteStore) -> None:
    seen: list[list[str]] = []
    assert joined() is COMMITTED  # outside any turn: at once
    joined().after(lambda: seen.append(committed_names(store)))
    assert seen == [[]]
    with store.turn() as turn:
        assert joined() is turn
        put(store, "first", "h")
        turn.after(lambda: seen.append(committed_names(store)))
        with ThreadPoolExecutor(1) as pool:  # another thread is in no turn
            assert pool.submit(joined).result(PATIENCE) is COMMITTED
        assert seen == [[]]
    assert seen == [[], ["first"]]
    assert joined() is COMMITTED


def test_what_waits_for_a_turn_and_fails_stops_nothing_else(
    store: SqliteStore, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    def breaks() -> None:
        raise RuntimeError("a listener broke")

    with store.turn() as turn:
        put(store, "first", "h")
        turn.after(breaks)
        turn.after(lambda: ran.append("after"))
    assert ran == ["after"]
    assert "a listener broke" in caplog.text
    put(store, "second", "h")
    assert committed_names(store) == ["first", "second"]


def test_a_write_of_another_thread_waits_for_the_turn_to_commit(store: SqliteStore) -> None:
    with ThreadPoolExecutor(1, thread_name_prefix="request") as pool:
        with store.turn():
            put(store, "turn", "h")
            other = pool.submit(put, store, "request", "h")
            wait_queued(store, 1)
            assert not other.done()
        assert other.result(PATIENCE).startswith("request")
    assert committed_names(store) == ["request", "turn"]


def test_a_turn_whose_commit_fails_keeps_none_of_its_writes_and_says_busy(
    store: SqliteStore,
) -> None:
    after: list[str] = []
    store._writer.set_commit_hook(lambda: True)  # SQLite turns the COMMIT into a rollback
    with pytest.raises(DatabaseBusy, match="could not commit"), store.turn() as turn:
        put(store, "lost", "h")
        turn.after(lambda: after.append("ran"))
    store._writer.set_commit_hook(None)
    assert after == []
    assert committed_names(store) == []
    with store.turn():
        put(store, "next", "h")
    assert committed_names(store) == ["next"]


@pytest.fixture
def locked(tmp_path: Path, store: SqliteStore) -> Iterator[apsw.Connection]:
    """Another connection, as another process would hold it, with the file's write lock
    (through APSW's SQLite: another copy of SQLite in this process would not see it)."""
    other = apsw.Connection(str(tmp_path / "db.sqlite"))
    other.execute("BEGIN IMMEDIATE")
    yield other
    if not other.getautocommit():
        other.execute("ROLLBACK")
    other.close()


def test_a_turn_waits_a_short_while_for_a_locked_file_then_refuses_its_writes_as_busy(
    store: SqliteStore, locked: apsw.Connection
) -> None:
    began = time.monotonic()
    with store.turn():
        with pytest.raises(DatabaseBusy, match="busy"):
            put(store, "first", "h")
        waited = time.monotonic() - began
        with pytest.raises(DatabaseBusy, match="busy"):
            put(store, "second", "h")  # the turn is refused: no second wait
        assert time.monotonic() - began - waited < TURN_BUSY_MILLISECONDS / 1000 / 2
    assert TURN_BUSY_MILLISECONDS / 1000 * 0.8 <= waited < 2.0
    locked.execute("ROLLBACK")
    with store.turn():
        put(store, "later", "h")
    assert committed_names(store) == ["later"]


def test_a_turn_waits_a_short_while_for_a_write_of_another_thread(store: SqliteStore) -> None:
    running, finish = threading.Event(), threading.Event()

    def slow(tx: object) -> None:
        running.set()
        finish.wait(PATIENCE)

    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(store.write, slow)
        assert running.wait(PATIENCE)
        began = time.monotonic()
        with pytest.raises(DatabaseBusy), store.turn():
            put(store, "turn", "h")
        assert time.monotonic() - began < 2.0
        finish.set()
        held.result(PATIENCE)
    with store.turn():
        put(store, "after", "h")  # the turn to write was not lost
    assert committed_names(store) == ["after"]


def test_a_turn_begun_with_wake_waits_for_no_write_of_its_process_and_goes_next(
    store: SqliteStore,
) -> None:
    """The server's loop must not wait for a long write of a thread beside it: `begin(wake)`
    answers False at once, `wake` is called once that write passes the database on, and
    the turn begins before a write that queued meanwhile."""
    running, finish, woken = threading.Event(), threading.Event(), threading.Event()

    def slow(tx: object) -> None:
        running.set()
        finish.wait(PATIENCE)

    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(store.write, slow)
        assert running.wait(PATIENCE)
        with store.turn() as turn:
            began = time.monotonic()
            assert turn.begin(woken.set) is False
            assert time.monotonic() - began < TURN_BUSY_MILLISECONDS / 1000
        queued = pool.submit(put, store, "queued", "h")
        wait_queued(store, 1)
        finish.set()
        held.result(PATIENCE)
        assert woken.wait(PATIENCE)
        with store.turn() as turn:
            assert turn.begin(woken.set) is True
            put(store, "turn", "h")
            assert not queued.done()  # it waits for the turn, which went first
        queued.result(PATIENCE)
    assert committed_names(store) == ["queued", "turn"]
    put(store, "after", "h")  # nothing waits any more: a write runs at once


def test_a_turn_opens_nothing_on_postgres(backend: Backend) -> None:
    if backend.name != "postgres":
        pytest.skip("Postgres only")
    opened = backend.store()
    seen: list[str] = []
    try:
        with opened.turn() as turn:
            assert turn is COMMITTED and joined() is COMMITTED
            opened.write(lambda tx: put_row(tx, "pg"))
            turn.after(lambda: seen.append("at once"))
            assert seen == ["at once"]
            with ThreadPoolExecutor(1) as pool:  # committed before the block ends
                other = pool.submit(opened.read, lambda tx: [r.name for r in tx.credentials()])
                assert other.result(PATIENCE) == ["pg"]
    finally:
        opened.close()
