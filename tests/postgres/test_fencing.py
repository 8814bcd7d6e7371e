"""A Postgres control plane whose serving lock is gone serves no write on a session opened
after that: not on a new session, not after a connection that could not be made, and the
clock's check of the lock's session gives up on a silent one within its bound."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stateous.control.errors import DatabaseBusy, NotServing
from stateous.control.store import ControlRow, Tx
from stateous.control.store.postgres import LOCK_CLASS, PostgresStore, sessions
from stateous.control.store.postgres.connection import Connection
from stateous.control.store.postgres.lock import CHECK_SECONDS, AdvisoryLock
from tests.control.serving import Launcher, orders, write_graph
from tests.postgres.test_serving import end_lock_session, start_token

#: The name the test's own control plane writes on the `control_plane` row.
HOLDER = "here:1:0a0b0c0d"
#: A port where nothing listens.
CLOSED = "127.0.0.1:1"


@pytest.fixture
def graph(tmp_path: Path) -> Path:
    path = tmp_path / "orders.json"
    write_graph(path, orders())
    return path


@pytest.fixture
def lock(url: str) -> Iterator[AdvisoryLock]:
    held = AdvisoryLock(url)
    held.take()
    yield held
    held.release()


def serving_store(url: str, lock: AdvisoryLock, size: int = 2) -> PostgresStore:
    """A store under `lock`, its row naming this control plane, with one idle session."""
    store = PostgresStore(url, lock=lock, size=size)
    store.write(lambda tx: tx.put_control(ControlRow(None, None, HOLDER, tx.now)))
    lock.serve_as(HOLDER)
    return store


def mark(tx: Tx) -> None:
    """A write that leaves its trace on the row."""
    tx.put_control(ControlRow("written", None, HOLDER, tx.now))


def written(url: str) -> bool:
    with psycopg.connect(url) as connection:
        row = connection.execute("SELECT structure FROM control_plane").fetchone()
    return row is not None and row[0] == "written"


def test_a_new_session_serves_no_write_once_another_control_plane_holds_the_lock(
    url: str, lock: AdvisoryLock
) -> None:
    store = serving_store(url, lock)
    admin = end_lock_session(url, then_hold=True)
    try:
        store._pool.flush()  # the next write opens a new session
        with pytest.raises(NotServing):
            store.write(mark)
        assert not written(url)
        with pytest.raises(NotServing):
            store.read(lambda tx: tx.control())
    finally:
        admin.close()
        store.close()


def test_after_a_connection_that_could_not_be_made_the_lock_is_checked_before_a_session_serves(
    url: str, lock: AdvisoryLock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = serving_store(url, lock)
    real = sessions.connect
    refused: list[str] = []

    def once_refused(to: str, **limits: Any) -> Connection:
        if not refused:
            refused.append(to)
            return real(f"postgresql://postgres@{CLOSED}/none", **limits)
        return real(to, **limits)

    monkeypatch.setattr(sessions, "connect", once_refused)
    try:
        # the idle session is busy: the write needs a new one
        with store._pool.connection(), pytest.raises(DatabaseBusy):
            store.write(mark)
        assert refused
        admin = end_lock_session(url, then_hold=True)
        try:
            with pytest.raises(NotServing):
                store.write(mark)  # on the session that was idle all along
            assert not written(url)
        finally:
            admin.close()
    finally:
        store.close()


def lock_backend(url: str) -> int:
    """The server process of the session that holds the serving lock of `url`'s schema."""
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND objid::int = hashtext(current_schema()) AND granted",
            (LOCK_CLASS,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_serve_whose_lock_session_stops_answering_stops_within_the_bound(
    launcher: Launcher, graph: Path, url: str
) -> None:
    served = launcher.serve(graph, None, "--db", url)
    start_token(served, "ORDER-1")
    pid = lock_backend(url)

    os.kill(pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        # the bound, a beat of the clock, and a slow machine's start of the stop
        code = served.process.wait(timeout=CHECK_SECONDS + 4)
        seconds = time.monotonic() - stopped
    finally:
        os.kill(pid, signal.SIGCONT)
    assert code == 1 and seconds < CHECK_SECONDS + 4
    assert served.rest()[-1].endswith("; this control plane stopped")
