"""The writes that `serve`'s loop serves on SQLite, in units of work of the store: a write
that cannot get the database's file from another process within a turn's short wait
answers `503 database_busy` and holds no other socket, a write with a large body is served
beside the loop, a write of the loop waits for such a write (neither refused nor holding
the sockets), and what a turn wrote is seen by the reads after it."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from stateous.control.http.loop_writes import LOOP_BODY
from tests.control.raw import big_token_body
from tests.control.serving import Launcher, Served, orders, write_graph

#: Well under SQLite's busy timeout of 30 s, well over a turn's wait for the database.
QUICKLY = 2.0


@pytest.fixture
def plane(launcher: Launcher, tmp_path: Path) -> Served:
    write_graph(tmp_path / "orders.json", orders())
    return launcher.serve(tmp_path / "orders.json", tmp_path / "db.sqlite", "--no-auth")


@contextmanager
def file_locked(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the database file's write lock from this process, as `auth add` or another
    program that writes to it would, for the block."""
    other = sqlite3.connect(path, isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


def timed_health(served: Served, stop: threading.Event) -> list[float]:
    """Ask `/health` on one kept-alive connection until `stop`: each answer's time."""
    link, times = served.connect(), []
    try:
        while not stop.is_set():
            began = time.monotonic()
            status, _ = served.request("GET", "/health", connection=link)
            assert status == 200
            times.append(time.monotonic() - began)
    finally:
        link.close()
    return times


def test_a_write_while_another_process_holds_the_file_answers_busy_quickly_and_health_goes_on(
    plane: Served, tmp_path: Path
) -> None:
    plane.ok("POST", "/tokens", {"token": "before", "context": {"title": "x"}})
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool, file_locked(tmp_path / "db.sqlite"):
        health = pool.submit(timed_health, plane, stop)
        began = time.monotonic()
        status, answer = plane.request(
            "POST", "/tokens", {"token": "blocked", "context": {"title": "x"}}
        )
        took = time.monotonic() - began
        status_again, _ = plane.request("POST", "/tokens/before/events/submitted")
        time.sleep(0.3)
        stop.set()
        times = health.result(QUICKLY * 5)
    assert status == 503
    assert answer == {"error": "the database is busy; try again", "code": "database_busy"}
    assert took < QUICKLY
    assert status_again == 503
    assert len(times) > 10 and max(times) < QUICKLY
    # Nothing was written; once the file is free, the same requests go through.
    assert plane.request("GET", "/tokens/blocked")[0] == 404
    assert plane.ok("GET", "/tokens/before")["state"] == "draft"
    plane.ok("POST", "/tokens", {"token": "blocked", "context": {"title": "x"}})
    plane.ok("POST", "/tokens/before/events/submitted")


def test_a_write_with_a_large_body_waits_beside_the_loop_for_a_locked_file(
    plane: Served, tmp_path: Path
) -> None:
    """Its cost grows with its body, so a thread beside the loop serves it, with SQLite's own
    busy wait: it is kept once the file is free, while the loop answered others meanwhile. A
    write of the loop that comes meanwhile waits for it, as every write of the process does,
    without holding the loop: it is not refused, and is kept after it."""
    big = big_token_body("big")
    assert len(big["context"]["title"]) > LOOP_BODY
    small = {"token": "small", "context": {"title": "x"}}
    with ThreadPoolExecutor(2) as pool:
        with file_locked(tmp_path / "db.sqlite"):
            started = pool.submit(plane.request, "POST", "/tokens", big)
            time.sleep(QUICKLY)
            assert not started.done()
            waiting = pool.submit(plane.request, "POST", "/tokens", small)
            time.sleep(QUICKLY)
            assert not waiting.done()
            assert plane.request("GET", "/health")[0] == 200
            assert plane.request("GET", "/tokens/small")[0] == 404
        status, token = started.result(30)
        status_small, token_small = waiting.result(30)
    assert status == 201 and token["token"] == "big"
    assert status_small == 201 and token_small["token"] == "small"


def test_a_write_of_the_loop_put_off_when_serve_stops_is_kept_and_answered(
    plane: Served, tmp_path: Path
) -> None:
    """Stopping `serve` while a small write waits for a long one of the process: the loop's
    last turn waits for the database and keeps it, rather than refusing it as busy."""
    small = {"token": "small", "context": {"title": "x"}}
    with ThreadPoolExecutor(3) as pool:
        with file_locked(tmp_path / "db.sqlite"):
            started = pool.submit(plane.request, "POST", "/tokens", big_token_body("big"))
            time.sleep(QUICKLY)
            waiting = pool.submit(plane.request, "POST", "/tokens", small)
            time.sleep(QUICKLY)
            assert not waiting.done()
            plane.process.send_signal(signal.SIGTERM)
            time.sleep(QUICKLY)
        assert started.result(30)[0] == 201
        status, token = waiting.result(30)
    assert plane.process.wait(60) == 0
    assert (status, token["token"]) == (201, "small")


def test_health_and_the_loops_writes_go_on_while_heavy_writes_hold_the_database(
    plane: Served,
) -> None:
    """Clients that start tokens of 1 MB contexts in a loop keep the database busy, one
    long write after another, beside the loop; meanwhile `/health` is answered every time,
    and every small write is kept, none refused as busy."""
    stop = threading.Event()

    def heavy(index: int) -> int:
        link, sent = plane.connect(timeout=60), 0
        try:
            while not stop.is_set():
                status, _ = plane.request(
                    "POST", "/tokens", big_token_body(f"big-{index}-{sent}"), connection=link
                )
                assert status == 201
                sent += 1
        finally:
            link.close()
        return sent

    def small() -> list[int]:
        link, statuses = plane.connect(), []
        try:
            while not stop.is_set():
                body = {"token": f"small-{len(statuses)}", "context": {"title": "x"}}
                statuses.append(plane.request("POST", "/tokens", body, connection=link)[0])
        finally:
            link.close()
        return statuses

    with ThreadPoolExecutor(6) as pool:
        heavies = [pool.submit(heavy, index) for index in range(4)]
        smalls = pool.submit(small)
        health = pool.submit(timed_health, plane, stop)
        time.sleep(3)
        stop.set()
        sent = sum(future.result(60) for future in heavies)
        statuses = smalls.result(60)
        times = health.result(60)
    assert sent >= 4
    assert statuses and set(statuses) == {201}
    assert len(times) > 10 and max(times) < QUICKLY


def test_a_plan_is_made_beside_the_loop(plane: Served, tmp_path: Path) -> None:
    """A plan acts on up to 10,000 tokens, one write each: a request thread serves it."""
    plane.ok("POST", "/tokens", {"token": "one", "context": {"title": "x"}})
    with ThreadPoolExecutor(1) as pool:
        with file_locked(tmp_path / "db.sqlite"):
            made = pool.submit(
                plane.request, "POST", "/plans", {"action": "cancel", "where": "status=active"}
            )
            time.sleep(QUICKLY)
            assert not made.done()
            assert plane.request("GET", "/health")[0] == 200
        status, plan = made.result(30)
    assert status == 201 and [row["token"] for row in plan["tokens"]] == ["one"]


def test_what_a_write_of_the_loop_kept_is_read_by_the_requests_after_it(plane: Served) -> None:
    link = plane.connect()
    try:
        for index in range(20):
            token = f"t{index}"
            status, _ = plane.request(
                "POST", "/tokens", {"token": token, "context": {"title": "x"}}, connection=link
            )
            assert status == 201
            assert plane.request("GET", f"/tokens/{token}", connection=link)[0] == 200
            plane.request("POST", f"/tokens/{token}/events/submitted", connection=link)
            assert plane.request("GET", f"/tokens/{token}")[1]["state"] == "review"
    finally:
        link.close()
