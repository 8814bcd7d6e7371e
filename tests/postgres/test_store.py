"""The Postgres store under load and under locks: many tokens at once, row locks, time limits."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from stateous.control import schedules
from stateous.control.errors import DatabaseBusy, OutcomeUnknown
from stateous.control.plans import Plans
from stateous.control.store import Tx, postgres
from stateous.control.store.migrations import LATEST, SchemaError
from stateous.control.store.postgres import PostgresStore
from stateous.control.store.postgres.connection import Connection
from stateous.control.store.postgres.pipeline import Pipeline
from stateous.model.schedule import ScheduleBody
from stateous.model.wire import ReportBody
from tests.control.conftest import build_engine, serving
from tests.control.support import Backend, Plane, fan_out, one_step, orders, plane_for
from tests.control.test_races import together

#: A short lock limit, so that the tests that wait for it stay short.
LOCK_LIMIT_MS = 300
LIMITS = (
    "statement_timeout",
    "lock_timeout",
    "tcp_keepalives_idle",
    "tcp_keepalives_interval",
    "tcp_keepalives_count",
)
#: What `SHOW` answers for each of `LIMITS` (the server's end of the keepalives included).
SHOWN = ["30s", "10s", "30", "10", "3"]


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(orders(), backend)
    yield served
    served.store.close()


@contextmanager
def holding_token(url: str, token: str) -> Iterator[None]:
    """Lock a token's row from a connection of the test's own, and release it on leaving.

    The ROLLBACK waits for the server: a closed connection's lock can outlive the close.
    """
    with psycopg.connect(url, autocommit=True) as other:
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM tokens WHERE token = %s FOR UPDATE", (token,))
        try:
            yield
        finally:
            other.execute("ROLLBACK")


def test_many_tokens_move_at_once_from_many_threads_with_no_lost_or_doubled_move(
    plane: Plane,
) -> None:
    tokens = [f"T-{index}" for index in range(24)]
    for token in tokens:
        plane.engine.start(token, {"title": token})
    rounds = 30

    def work(index: int) -> dict[str, int]:
        fired: dict[str, int] = {}
        for step in range(rounds):
            token = tokens[(index * 7 + step * 5) % len(tokens)]
            plane.engine.fire(token, "remind")
            fired[token] = fired.get(token, 0) + 1
        return fired

    results = together(work)
    for token in tokens:
        fires = sum(result.get(token, 0) for result in results)
        history = plane.engine.history(token)
        assert [entry.seq for entry in history] == list(range(1, len(history) + 1))
        assert plane.engine.get(token).visit == 1 + fires
        assert [entry.kind for entry in history].count("task_queued") == 1 + fires
    live = plane.store.read(
        lambda tx: tx.execute(
            "SELECT token, count(*) FROM tasks WHERE status = 'queued' GROUP BY token"
        )
    )
    assert sorted(live) == sorted((token, 1) for token in tokens)


def test_claims_and_reports_from_many_threads_move_every_token_once(plane: Plane) -> None:
    for index in range(40):
        plane.engine.start(f"T-{index}", {"title": "x"})

    def cycle(index: int) -> list[str]:
        moved = []
        while (grant := plane.engine.claim(f"box-{index}", ["draft"])) is not None:
            body = ReportBody(
                kind="event", event="submitted", attempt=grant.attempt, supervisor=f"box-{index}"
            )
            plane.engine.report(grant.task, body)
            moved.append(grant.token)
        return moved

    moved = [token for result in together(cycle) for token in result]
    assert sorted(moved) == sorted(f"T-{index}" for index in range(40))
    assert {plane.engine.get(token).state for token in moved} == {"review"}


def test_a_token_locked_elsewhere_makes_a_request_answer_503_database_busy(
    backend: Backend,
) -> None:
    with serving(build_engine(backend, lock_timeout=LOCK_LIMIT_MS)) as served:
        status, _, _ = served.request("POST", "/tokens", {"token": "A", "context": {"title": "x"}})
        assert status == 201
        with holding_token(backend.url, "A"):
            began = time.monotonic()
            status, _, body = served.request("POST", "/tokens/A/events/submitted")
            waited = time.monotonic() - began
        assert (status, body["code"]) == (503, "database_busy"), body
        assert LOCK_LIMIT_MS / 1000 <= waited < 5
        status, _, body = served.request("POST", "/tokens/A/events/submitted")
        assert (status, body["state"]) == (200, "review")


def test_a_grandchild_waits_for_the_top_token_of_its_family(backend: Backend) -> None:
    nested = fan_out("outer", "reviews", fan_out("middle", "checks", one_step("inner", "finish")))
    plane = plane_for(nested, backend, lock_timeout=LOCK_LIMIT_MS)
    grandchild = "T.reviews.1.middle.checks.1.inner"
    try:
        plane.engine.start("T", {"title": "x"})  # the child starts the grandchild
        with holding_token(backend.url, "T"), pytest.raises(DatabaseBusy):
            plane.engine.fire(grandchild, "finish")
        assert plane.engine.fire(grandchild, "finish").status == "completed"
        assert plane.engine.get("T").status == "completed"
    finally:
        plane.store.close()


def test_a_claim_skips_the_task_of_a_token_locked_elsewhere(plane: Plane, url: str) -> None:
    plane.engine.start("OLDER", {"title": "x"})
    plane.clock.advance(1)
    plane.engine.start("NEWER", {"title": "x"})
    with holding_token(url, "OLDER"):
        began = time.monotonic()
        grant = plane.engine.claim("box-1", ["draft"])
        assert time.monotonic() - began < 1
        assert grant is not None and grant.token == "NEWER"
        assert plane.engine.claim("box-1", ["draft"]) is None
    grant = plane.engine.claim("box-1", ["draft"])
    assert grant is not None and grant.token == "OLDER"


def test_a_deadlock_runs_the_transaction_once_more(backend: Backend) -> None:
    plane = plane_for(orders(), backend)
    for token in ("A", "B"):
        plane.engine.start(token, {"title": token})
    first_runs = threading.Barrier(2)
    runs = {"A": 0, "B": 0}

    def crosswise(first: str, second: str) -> None:
        def operation(tx: Tx) -> None:
            runs[first] += 1
            tx.token(first)
            tx.graph_versions()  # a read: the lock of `first` is surely taken by now
            if runs[first] == 1:
                first_runs.wait()
            tx.token(second)

        plane.store.write(operation)

    results = together(lambda index: crosswise(*(("A", "B"), ("B", "A"))[index]), threads=2)
    plane.store.close()
    assert results == [None, None]
    assert sorted(runs.values()) == [1, 2]


def test_a_conflict_on_the_second_run_too_answers_database_busy(plane: Plane) -> None:
    runs = []

    def operation(tx: Tx) -> None:
        runs.append(1)
        tx.execute("INSERT INTO stateous_version (version_num) VALUES (?)", (LATEST,))

    with pytest.raises(DatabaseBusy, match="met another transaction twice"):
        plane.store.write(operation)
    assert len(runs) == 2


def test_a_statement_stopped_by_the_statement_limit_answers_database_busy(
    backend: Backend,
) -> None:
    store = backend.store(statement_timeout=100)
    try:
        began = time.monotonic()
        with pytest.raises(DatabaseBusy, match="statement timeout"):
            store.write(lambda tx: tx.execute("SELECT pg_sleep(5)"))
        assert time.monotonic() - began < 4
        assert store.read(lambda tx: tx.execute("SELECT 1")) == [(1,)]
    finally:
        store.close()


def test_every_connection_carries_the_time_limits(plane: Plane) -> None:
    def limits(tx: Tx) -> list[str]:
        return [tx.execute(f"SHOW {name}")[0][0] for name in LIMITS]  # type: ignore[attr-defined]

    assert plane.store.read(limits) == SHOWN
    assert plane.store.write(limits) == SHOWN

    def client_side(tx: Tx) -> tuple[dict[str, str], list[int]]:
        connection = tx.connection  # type: ignore[attr-defined]
        sock = socket.socket(fileno=connection.pgconn.socket)
        try:
            options = [
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            ]
        finally:
            sock.detach()
        return connection.info.get_parameters(), options

    parameters, options = plane.store.read(client_side)
    assert parameters["connect_timeout"] == "10"
    assert options[0] != 0 and options[1:] == [30, 10, 3]


def test_the_lock_connection_carries_the_time_limits_too(url: str) -> None:
    lock = postgres.AdvisoryLock(url)
    lock.take()
    try:
        connection = lock._connection
        assert connection is not None
        shown = [connection.execute(f"SHOW {name}").fetchone()[0] for name in LIMITS]
        assert shown == SHOWN
        assert connection.info.get_parameters()["keepalives_idle"] == "30"
    finally:
        lock.release()


def test_a_schema_upgrade_keeps_the_lock_limit_and_has_no_statement_limit(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[list[str]] = []
    real = postgres.store.migrate

    def watched(tx: Any, *, dialect: str) -> str:
        seen.append(
            [tx.execute(f"SHOW {name}")[0][0] for name in ("statement_timeout", "lock_timeout")]
        )
        return real(tx, dialect=dialect)

    monkeypatch.setattr(postgres.store, "migrate", watched)
    store = PostgresStore(url)
    try:
        assert seen == [["0", "10s"]]
        shown = store.read(lambda tx: tx.execute("SHOW statement_timeout"))  # type: ignore[attr-defined]
        assert shown == [("30s",)]
    finally:
        store.close()


def test_a_database_of_a_newer_stateous_is_refused(url: str) -> None:
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("UPDATE stateous_version SET version_num = '9999'")
    with pytest.raises(SchemaError, match="schema version 9999, made by a newer Stateous"):
        PostgresStore(url)


def test_tables_named_like_ours_without_a_version_are_refused(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE tokens (id integer)")
    with pytest.raises(SchemaError, match=r"tables named like Stateous's \(tokens\)"):
        PostgresStore(url)


def test_a_connection_that_the_server_closed_is_replaced_and_the_request_served_on_a_new_one(
    plane: Plane, url: str
) -> None:
    plane.engine.start("A", {"title": "x"})
    pid = plane.store.read(lambda tx: tx.execute("SELECT pg_backend_pid()"))[0][0]
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert plane.engine.get("A").state == "draft"
    assert plane.store.read(lambda tx: tx.execute("SELECT pg_backend_pid()"))[0][0] != pid


def test_task_ids_stay_unique_and_grow_across_threads_and_a_restart(backend: Backend) -> None:
    first = plane_for(orders(), backend)

    def start(index: int) -> None:
        for step in range(20):
            first.engine.start(f"T-{index}-{step}", {"title": "x"})

    together(start)
    before = [row[0] for row in first.store.read(lambda tx: tx.execute("SELECT id FROM tasks"))]
    first.store.close()
    assert len(before) == len(set(before)) == 8 * 20

    again = plane_for(orders(), backend)
    try:
        again.engine.start("LATER", {"title": "x"})
        later = again.store.read(
            lambda tx: tx.execute("SELECT id FROM tasks WHERE token = 'LATER'")
        )
        assert later[0][0] > max(before)
    finally:
        again.store.close()


@contextmanager
def answer_of_next_commit_lost(*, arrives: bool) -> Iterator[list[int]]:
    """Lose the answer of the next COMMIT, as a network that fails then would.

    When the COMMIT `arrives`, the server runs it; otherwise it never sees it, and
    its session waits on in the transaction, as across a network cut, until the
    block ends. Yields the server process ids of the sessions it cut.
    """
    original = Connection.end_transaction
    kept: list[int] = []
    cut: list[int] = []

    def end_transaction(self: Connection, pipeline: Pipeline) -> None:
        if cut:
            return original(self, pipeline)
        cut.append(self.info.backend_pid)
        if arrives:
            pipeline.send("COMMIT", ())
        # Every statement before the COMMIT (and the COMMIT, when it arrives) is answered:
        # the server has done its part, and only the last answer is lost.
        pipeline.sync()
        # The session's socket stays open here, and libpq's says goodbye to /dev/null:
        # the server sees no end of the session.
        kept.append(os.dup(self.pgconn.socket))
        with open(os.devnull, "wb") as nowhere:
            os.dup2(nowhere.fileno(), self.pgconn.socket)
        self.pgconn.finish()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    Connection.end_transaction = end_transaction  # type: ignore[method-assign]
    try:
        yield cut
    finally:
        Connection.end_transaction = original  # type: ignore[method-assign]
        for descriptor in kept:
            os.close(descriptor)


def test_a_commit_whose_answer_is_lost_but_was_kept_answers_as_kept(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    with answer_of_next_commit_lost(arrives=True) as cut:
        moved = plane.engine.fire("A", "submitted")
    assert cut and moved.state == "review"
    kinds = [kind for kind, _ in plane.entries("A")]
    assert kinds.count("event_accepted") == 2  # started, then submitted once
    assert plane.engine.get("A").state == "review"


def test_a_commit_that_never_arrived_ends_its_session_and_answers_database_busy(
    plane: Plane, url: str
) -> None:
    plane.engine.start("A", {"title": "x"})
    with answer_of_next_commit_lost(arrives=False) as cut:
        with pytest.raises(DatabaseBusy, match="nothing was written"):
            plane.engine.fire("A", "submitted")
        with psycopg.connect(url, autocommit=True) as admin:
            lingering = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (cut[0],)
            ).fetchone()
        assert lingering == (0,)
    assert plane.engine.get("A").state == "draft"
    assert plane.engine.fire("A", "submitted").state == "review"
    kinds = [kind for kind, _ in plane.entries("A")]
    assert kinds.count("event_accepted") == 2


def test_a_change_with_no_ledger_row_whose_commit_answer_is_lost_is_not_called_unwritten(
    plane: Plane,
) -> None:
    plane.engine.start("A", {"title": "x"})
    # A plan leaves no ledger row to look for: the database cannot be asked whether it kept
    # it, and `database_busy` ("nothing was written; try again") would make a second.
    with (
        answer_of_next_commit_lost(arrives=True) as cut,
        pytest.raises(OutcomeUnknown, match="may have been kept"),
    ):
        Plans(plane.engine).make("pause", "state=draft")
    assert cut
    assert len(plane.store.read(lambda tx: tx.execute("SELECT id FROM plans"))) == 1


def test_a_claim_whose_commit_answer_is_lost_but_was_kept_answers_its_grant(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    with answer_of_next_commit_lost(arrives=True) as cut:
        grant = plane.engine.claim("box-1", ["draft"])
    assert cut and grant is not None and grant.token == "A"
    assert plane.kinds("A").count("task_claimed") == 1
    assert plane.engine.claim("box-2", ["draft"]) is None


def test_two_adds_of_one_schedule_at_once_keep_one_and_refuse_the_other(plane: Plane) -> None:
    store = plane.store
    plain = store.write
    both_read = threading.Barrier(2)

    def held(operation: Any) -> Any:
        """Each add commits only once both have read that no schedule of the name exists."""

        def after_reading(tx: Tx) -> Any:
            result = operation(tx)
            with contextlib.suppress(threading.BrokenBarrierError):
                both_read.wait(timeout=2)
            return result

        return plain(after_reading)

    store.write = held  # type: ignore[method-assign]
    added = together(
        lambda index: schedules.add(
            plane.engine,
            ScheduleBody(name="nightly", cron=f"0 {index + 1} * * *", context={"title": "x"}),
            None,
        ),
        threads=2,
    )
    store.write = plain  # type: ignore[method-assign]
    refused = [each for each in added if isinstance(each, Exception)]
    assert len(refused) == 1 and "exists already" in str(refused[0]), added
    kept = [each.cron for each in added if not isinstance(each, Exception)]
    assert [row.cron for row in store.read(lambda tx: tx.schedules())] == kept
