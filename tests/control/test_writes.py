"""How a write reaches the disk: on SQLite, alone in the caller's thread or in the writer's
group (in a turn: `test_turns.py`); on either database, kept once answered, even
across a kill -9; and the SQLite WAL checkpointed by a thread of its own, never by a write."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import apsw
import pytest

from stateous.control.store import Tx
from stateous.control.store.contract import KeepAndRaise
from stateous.control.store.sqlite import SqliteStore
from tests.conftest import ROOT
from tests.control.serving import Launcher, Served, orders, write_graph
from tests.control.support import Backend

#: How long a background thread may take to do what the test waits for on a loaded machine.
PATIENCE = 20.0
#: SQLite's own automatic checkpoint starts at this many WAL frames.
SQLITE_AUTOCHECKPOINT = 1000


def put_row(tx: Tx, key: str, value: str = "h") -> str:
    """Insert one credential row (a row of no token); answer the thread that runs it."""
    tx.execute(
        "INSERT INTO credentials (name, secret_hash, role, created_at) VALUES (?, ?, ?, ?)",
        (key, f"{key}:{value}", "operator", tx.stamp),
    )
    return threading.current_thread().name


def put(store: SqliteStore, key: str, value: str) -> str:
    """Write one credential row and answer the thread that ran the write."""
    return store.write(lambda tx: put_row(tx, key, value))


def names(store: SqliteStore) -> list[str]:
    return [row.name for row in store.read(lambda tx: tx.credentials())]


def test_a_write_alone_runs_in_its_callers_thread_and_those_behind_one_in_one_group(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    running, finish = threading.Event(), threading.Event()

    def slow(tx: Tx) -> str:
        running.set()
        finish.wait(PATIENCE)
        return threading.current_thread().name

    try:
        assert put(store, "alone", "h1") == threading.current_thread().name
        with ThreadPoolExecutor(3, thread_name_prefix="request") as pool:
            first = pool.submit(store.write, slow)
            assert running.wait(PATIENCE)
            second = pool.submit(put, store, "second", "h2")
            wait_queued(store, 1)
            third = pool.submit(put, store, "third", "h3")
            wait_queued(store, 2)
            # Both wait while the first write holds the database.
            assert not second.done() and not third.done()
            finish.set()
            assert first.result(PATIENCE).startswith("request")
            # The first of those that waited ran both, in one transaction.
            leader = second.result(PATIENCE)
            assert leader.startswith("request") and leader != first.result()
            assert third.result(PATIENCE) == leader
        assert sorted(names(store)) == ["alone", "second", "third"]
    finally:
        store.close()


class Refused(Exception):
    """What an operation of these tests raises once it has written."""


def fails(tx: Tx) -> None:
    put_row(tx, "failed")
    raise Refused("after its write")


def keeps(tx: Tx) -> None:
    put_row(tx, "kept")
    raise KeepAndRaise(Refused("kept with its write"))


def run_in_one_group(store: SqliteStore, operations: list[Callable[[Tx], Any]]) -> list[Future]:
    """Write each operation from a thread of its own while the writer is held, so that they
    wait and then run in one group; answer their futures once the group has run."""
    running, finish = threading.Event(), threading.Event()

    def slow(tx: Tx) -> None:
        running.set()
        finish.wait(PATIENCE)

    pool = ThreadPoolExecutor(len(operations) + 1)
    pool.submit(store.write, slow)
    assert running.wait(PATIENCE)
    group = []
    for operation in operations:
        group.append(pool.submit(store.write, operation))
        wait_queued(store, len(group))
    finish.set()
    pool.shutdown(wait=True)
    return group


def traced(store: SqliteStore) -> list[str]:
    """The statements that the store's writer runs from now on."""
    statements: list[str] = []
    store._writer.trace_v2(apsw.SQLITE_TRACE_STMT, lambda event: statements.append(event["sql"]))
    return statements


def test_a_group_in_which_one_operation_fails_commits_the_others_and_none_of_its_writes(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "db.sqlite")
    statements = traced(store)
    try:
        before, failed, kept, after = run_in_one_group(
            store, [lambda tx: put_row(tx, "before"), fails, keeps, lambda tx: put_row(tx, "after")]
        )
        assert before.result() == after.result()
        with pytest.raises(Refused, match="after its write"):
            failed.result()
        with pytest.raises(Refused, match="kept with its write"):
            kept.result()
        assert sorted(names(store)) == ["after", "before", "kept"]
        # The group ran together until the failure and was rolled back; the others ran
        # again, each in a savepoint of its own; one commit.
        assert statements.count("ROLLBACK") == 1
        assert statements.count("SAVEPOINT operation") == 3
        assert statements.count("COMMIT") == 2  # the slow write's, then the group's
    finally:
        store.close()


def test_writes_in_which_nothing_fails_run_no_savepoint(tmp_path: Path) -> None:
    """A savepoint copies every page its operation changes: work that a group spares when
    none of its operations fails, and a write alone always."""
    store = SqliteStore(tmp_path / "db.sqlite")
    statements = traced(store)
    try:
        put(store, "alone", "h")
        with pytest.raises(Refused):
            store.write(fails)
        first, kept = run_in_one_group(store, [lambda tx: put_row(tx, "first"), keeps])
        assert first.exception() is None
        with pytest.raises(Refused):
            kept.result()
        assert sorted(names(store)) == ["alone", "first", "kept"]
        assert "SAVEPOINT operation" not in statements
        assert statements.count("ROLLBACK") == 1  # the write alone that failed
    finally:
        store.close()


def wait_queued(store: SqliteStore, count: int) -> None:
    """Wait until `count` writes wait for their turn."""
    deadline = time.monotonic() + PATIENCE
    while len(store._jobs) < count and time.monotonic() < deadline:
        time.sleep(0.001)
    assert len(store._jobs) == count


def wal_bytes(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_the_checkpointer_copies_the_wal_into_the_database_and_it_starts_over_small(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path, checkpoint_pages=50)
    limit = 50 * 4096
    try:
        index = 0
        while store.checkpointer.completed == 0 and index < 20_000:
            put(store, f"k{index}", "h" * 200)
            index += 1
        assert store.checkpointer.completed >= 1
        deadline = time.monotonic() + PATIENCE
        while wal_bytes(path) > limit and time.monotonic() < deadline:
            # The write after a whole checkpoint starts the WAL over, cut back to the limit.
            put(store, f"k{index}", "h")
            index += 1
        assert wal_bytes(path) <= limit
        assert len(names(store)) == index
    finally:
        store.close()


def test_without_the_checkpointer_the_wal_only_grows_so_no_write_checkpoints(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db.sqlite"
    store = SqliteStore(path, checkpoint_pages=50)
    store.checkpointer.close()
    try:
        sizes = []
        for index in range(300):
            put(store, f"k{index}", "h" * 30_000)
            sizes.append(wal_bytes(path))
        assert sizes == sorted(sizes)
        assert sizes[-1] > 2 * SQLITE_AUTOCHECKPOINT * 4096
    finally:
        store.close()


def fire_all(served: Served, tokens: list[str]) -> None:
    """Start each token and submit it, from 16 clients at once, every answer a 2xx."""

    def one(token: str) -> None:
        served.ok("POST", "/tokens", {"token": token, "context": {"title": "x"}})
        served.ok("POST", f"/tokens/{token}/events/submitted")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, tokens))


def test_every_answered_write_is_kept_across_a_kill_9(
    launcher: Launcher, backend: Backend, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph, orders())
    served = launcher.serve(graph, None, "--db", backend.db)
    # Alone: run by its request thread. Then many at once: some wait for the writer's group.
    served.ok("POST", "/tokens", {"token": "ALONE", "context": {"title": "x"}})
    many = [f"MANY-{index}" for index in range(64)]
    fire_all(served, many)

    assert served.stop(signal.SIGKILL) == -signal.SIGKILL

    again = launcher.serve(graph, None, "--db", backend.db)
    assert again.ok("GET", "/tokens/ALONE")["state"] == "draft"
    assert {again.ok("GET", f"/tokens/{token}")["state"] for token in many} == {"review"}
    assert again.stop() == 0


#: Writes through a store, each changing every page of a table of 200 KiB; prints the bytes
#: the process wrote for them (/proc/self/io) over the bytes they added to the WAL.
WRITTEN_PER_WAL_BYTE = """
import os, sys
from stateous.control.store.sqlite import SqliteStore
store = SqliteStore(sys.argv[1])
store._writer.set_wal_hook(None)  # no checkpoint: the WAL keeps every frame written
def fill(tx):
    for n in range(200):
        tx.execute(
            "INSERT INTO credentials (name, secret_hash, role, created_at) VALUES (?, ?, ?, ?)",
            (f"key-{n}", f"{n}-" + "0" * 1000, "operator", tx.stamp),
        )
def written():
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar"))
store.write(fill)
wal, before = os.path.getsize(sys.argv[1] + "-wal"), written()
for n in range(20):
    role = ("operator", "supervisor")[n % 2]
    store.write(lambda tx: tx.execute("UPDATE credentials SET role = ?", (role,)))
print((written() - before) / (os.path.getsize(sys.argv[1] + "-wal") - wal))
store.close()
"""


def test_a_write_keeps_its_savepoint_journal_in_memory_not_in_a_temporary_file(
    tmp_path: Path,
) -> None:
    """Each operation of a write runs in a savepoint, whose journal of the pages it changes
    SQLite writes to a temporary file past 64 KiB unless told to keep it in memory: every
    page written twice, once to that file and once to the WAL."""
    done = subprocess.run(
        [sys.executable, "-c", WRITTEN_PER_WAL_BYTE, str(tmp_path / "writes.db")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1.2, done.stdout
