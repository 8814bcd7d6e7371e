"""The writes that `serve`'s loop serves on SQLite, in units of work of the store: a write
that cannot get the database's file within a turn's short wait answers `503
database_busy` and holds no other socket, a write with a large body is served beside the
loop, and what a turn wrote is seen by the reads after it."""

from __future__ import annotations

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
    """Its cost grows with its body, so a request thread serves it, with SQLite's own busy
    wait: it is kept once the file is free, while the loop answered others meanwhile."""
    big = big_token_body("big")
    assert len(big["context"]["title"]) > LOOP_BODY
    with ThreadPoolExecutor(1) as pool:
        with file_locked(tmp_path / "db.sqlite"):
            started = pool.submit(plane.request, "POST", "/tokens", big)
            time.sleep(QUICKLY)
            assert not started.done()
            assert plane.request("GET", "/health")[0] == 200
            small = {"token": "small", "context": {"title": "x"}}
            assert plane.request("POST", "/tokens", small)[0] == 503
        status, token = started.result(30)
    assert status == 201 and token["token"] == "big"


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
