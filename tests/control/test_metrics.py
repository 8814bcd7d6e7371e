"""`GET /metrics` and `GET /stats` after a known workload, on both databases: the figures
read by a real Prometheus parser and checked against the database's own rows, the same
counters after a restart, and the HTTP requests by route template."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stateous.control.clock import tick
from stateous.control.engine import Engine
from stateous.control.errors import EventNotAllowed, TokenNotActive
from stateous.control.graph import Graph
from stateous.control.store import from_column
from stateous.control.store.sqlite import SqliteStore
from stateous.model.wire import ReportBody
from tests.control.conftest import Served, serving, write_graph
from tests.control.support import Backend, Clock, connected, counts_drift
from tests.control.test_migrations import BACK_TO_0008

SUPERVISOR = "box-1"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parsed(text: str) -> Samples:
    """Every sample of an exposition, by its name and labels, through Prometheus's parser."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def engine_on(backend: Backend, clock: Clock) -> Engine:
    graph = Graph.load(write_graph(backend.folder))
    return Engine(graph, backend.store(clock=clock), lease=120)


def through(engine: Engine, token: str, event: str) -> None:
    """Claim the task of the token's state and report `event`."""
    grant = engine.claim(SUPERVISOR, [engine.get(token).state])
    assert grant is not None and grant.token == token
    engine.report(grant.task, ReportBody(kind="event", event=event, supervisor=SUPERVISOR))


def fail_draft(engine: Engine, token: str) -> None:
    grant = engine.claim(SUPERVISOR, ["draft"])
    assert grant is not None and grant.token == token
    engine.report(grant.task, ReportBody(kind="failed", error="boom", supervisor=SUPERVISOR))


def workload(engine: Engine, clock: Clock) -> None:
    """Two hours of work: before the last hour, three tokens (one reported on then ended
    by its timeout, one failed by its routine, one cancelled then refused an event); in
    the last hour, five more (a lease that ended, a waiting task, a failed attempt, a
    token refused an event, a paused token)."""
    for token in ("A", "B", "E"):
        engine.start(token, {"title": token})
    through(engine, "A", "submitted")
    fail_draft(engine, "B")
    engine.cancel("E")
    with pytest.raises(TokenNotActive):
        engine.fire("E", "submitted")
    clock.advance(3601)
    assert tick(engine) == (0, 1)  # A's review times out: A fails
    clock.advance(3600)
    engine.start("C", {"title": "C"})
    grant = engine.claim(SUPERVISOR, ["draft"])
    assert grant is not None and grant.token == "C"
    clock.advance(121)
    assert tick(engine) == (1, 0)  # C's lease ends
    engine.start("F", {"title": "F"})
    through(engine, "F", "submitted")
    grant = engine.claim(SUPERVISOR, ["review"])
    assert grant is not None and grant.token == "F"
    engine.report(grant.task, ReportBody(kind="waiting", supervisor=SUPERVISOR))
    engine.start("H", {"title": "H"})
    fail_draft(engine, "H")
    for token in ("D", "G"):
        engine.start(token, {"title": token})
    with pytest.raises(EventNotAllowed):
        engine.fire("D", "reviewed", {"approved": True})
    engine.pause("G")
    clock.advance(30)


#: How many of each kind of ledger entry the counters stand for.
KINDS = {
    "stateous_tokens_started_total": "started",
    "stateous_events_fired_total": "event_accepted",
    "stateous_tasks_claimed_total": "task_claimed",
    "stateous_attempts_failed_total": "task_failed",
    "stateous_timers_fired_total": "timer_fired",
}


def ledger_count(backend: Backend, kind: str) -> int:
    with connected(backend) as run:
        return int(run(f"SELECT count(*) FROM ledger WHERE kind = '{kind}'")[0][0])


def rows(backend: Backend, statement: str) -> list[tuple[Any, ...]]:
    with connected(backend) as run:
        return run(statement)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def worked(backend: Backend, clock: Clock) -> Iterator[Served]:
    engine = engine_on(backend, clock)
    workload(engine, clock)
    with serving(engine) as served:
        yield served


def scrape(served: Served) -> Samples:
    status, headers, text = served.request("GET", "/metrics")
    assert status == 200, text
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    return parsed(text.decode())


def test_the_counters_are_the_workload_and_the_ledger(worked: Served, backend: Backend) -> None:
    samples = scrape(worked)
    for name, kind in KINDS.items():
        assert value(samples, name) == ledger_count(backend, kind), name
    assert value(samples, "stateous_tokens_started_total") == 8
    assert value(samples, "stateous_tasks_claimed_total") == 6
    assert value(samples, "stateous_attempts_failed_total") == 3
    assert value(samples, "stateous_leases_ended_total") == 1
    assert value(samples, "stateous_timers_fired_total") == 1
    assert value(samples, "stateous_events_refused_total", code="event_not_allowed") == 1
    assert value(samples, "stateous_events_refused_total", code="token_not_active") == 1
    reports = {
        outcome: value(samples, "stateous_reports_total", outcome=outcome)
        for outcome in ("event", "waiting", "failed")
    }
    assert reports == {"event": 2, "waiting": 1, "failed": 2}
    ended = {
        status: value(samples, "stateous_tokens_ended_total", status=status)
        for status in ("completed", "failed", "cancelled")
    }
    assert ended == {"completed": 0, "failed": 4, "cancelled": 1}


def test_the_gauges_are_the_live_rows(worked: Served, backend: Backend, clock: Clock) -> None:
    samples = scrape(worked)
    tokens = rows(
        backend,
        "SELECT state, status, count(*) FROM tokens WHERE status IN ('active', 'paused') "
        "GROUP BY state, status",
    )
    assert {(labels, n) for (name, labels), n in samples.items() if name == "stateous_tokens"} == {
        (frozenset({("state", state), ("status", status)}), n) for state, status, n in tokens
    }
    assert sorted(tokens) == [
        ("draft", "active", 1),
        ("draft", "paused", 1),
        ("review", "active", 1),
    ]
    tasks = {
        (state, status): value(samples, "stateous_tasks", state=state, status=status)
        for state in ("draft", "review")
        for status in ("queued", "claimed", "waiting")
    }
    assert tasks == {
        ("draft", "queued"): 2,
        ("draft", "claimed"): 0,
        ("draft", "waiting"): 0,
        ("review", "queued"): 0,
        ("review", "claimed"): 0,
        ("review", "waiting"): 1,
    }
    [(queued,)] = rows(
        backend, "SELECT min(queued_at) FROM tasks WHERE status = 'queued' AND state = 'draft'"
    )
    age = value(samples, "stateous_oldest_queued_task_age_seconds", state="draft")
    assert age == pytest.approx(clock.now - from_column(queued))
    assert ("stateous_oldest_queued_task_age_seconds", frozenset({("state", "review")})) not in (
        samples
    )
    assert value(samples, "stateous_timers_pending") == 1  # F's review timeout


def test_stats_answers_the_same_workload(worked: Served, backend: Backend, clock: Clock) -> None:
    status, _, stats = worked.request("GET", "/stats")
    assert status == 200, stats
    [(queued,)] = rows(
        backend, "SELECT min(queued_at) FROM tasks WHERE status = 'queued' AND state = 'draft'"
    )
    assert stats == {
        "tokens": {"draft": {"active": 1, "paused": 1}, "review": {"active": 1}},
        "tasks": {"draft": {"queued": 2}, "review": {"waiting": 1}},
        "oldest_queued": {"draft": pytest.approx(clock.now - from_column(queued), abs=0.01)},
        "timers_pending": 1,
        "last_hour": {
            "events_fired": last_hour_events(backend, clock.now),
            "leases_ended": 1,
            "attempts_failed": 2,
        },
        "ended": {"completed": 0, "failed": 4, "cancelled": 1},
    }


def last_hour_events(backend: Backend, now: float) -> int:
    """The events accepted in the minutes that `/stats` calls the last hour."""
    minute = int(now // 60)
    stamps = rows(backend, "SELECT at FROM ledger WHERE kind = 'event_accepted'")
    return sum(1 for (at,) in stamps if int(from_column(at) // 60) > minute - 60)


def test_the_counters_are_the_same_after_a_restart(backend: Backend, clock: Clock) -> None:
    engine = engine_on(backend, clock)
    workload(engine, clock)
    with serving(engine) as served:
        before = scrape(served)
    with serving(engine_on(backend, clock)) as served:
        after = scrape(served)
    kept = {
        key: n
        for key, n in before.items()
        if not key[0].startswith(("stateous_http", "stateous_writer"))
    }
    assert kept == {key: after[key] for key in kept}
    assert (
        "stateous_http_requests_total",
        frozenset({("route", "/metrics"), ("method", "GET"), ("status", "200")}),
    ) not in after  # the first scrape of the new process is counted once it is answered


def test_http_requests_are_counted_by_route_template(served: Served) -> None:
    served.request("POST", "/tokens", {"token": "ORDER-1", "context": {"title": "t"}})
    for token in ("ORDER-1", "ORDER-1", "NOPE"):
        served.request("GET", f"/tokens/{token}")
    served.request("GET", "/nowhere")
    for method in ("BREW", "XYZZY"):
        served.request(method, "/tokens/ORDER-1")
    samples = scrape(served)
    route = {"route": "/tokens/{token}", "method": "GET"}
    assert value(samples, "stateous_http_requests_total", **route, status="200") == 2
    assert value(samples, "stateous_http_requests_total", **route, status="404") == 1
    assert value(samples, "stateous_http_request_duration_seconds_count", **route) == 3
    assert value(samples, "stateous_http_request_duration_seconds_bucket", **route, le="+Inf") == 3
    assert value(samples, "stateous_http_request_duration_seconds_sum", **route) > 0
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(samples, "stateous_http_requests_total", **unmatched) == 1
    made_up = {"route": "/tokens/{token}", "method": "other", "status": "405"}
    assert value(samples, "stateous_http_requests_total", **made_up) == 2
    labels = {text for name, labels in samples for _, text in labels}
    assert not any("ORDER-1" in text or "NOPE" in text for text in labels)
    assert not {"BREW", "XYZZY"} & labels
    assert value(samples, "stateous_writer_commit_seconds_count") >= 1
    assert value(samples, "stateous_writer_batch_size_count") >= 1


def test_the_time_of_a_write_on_sqlite_runs_to_its_commit(tmp_path: Path) -> None:
    """The loop commits its turn's writes after their answers are made: their time does
    not end before the commit, when the answer leaves."""
    store = SqliteStore(tmp_path / "db.sqlite")
    engine = Engine(Graph.load(write_graph(tmp_path)), store, lease=120)

    def slow_commit() -> bool:
        time.sleep(0.2)
        return False  # go on with the commit

    with serving(engine) as served:
        store._writer.set_commit_hook(slow_commit)
        status, _, _ = served.request(
            "POST", "/tokens", {"token": "ORDER-1", "context": {"title": "t"}}
        )
        assert status == 201
        store._writer.set_commit_hook(None)
        samples = scrape(served)
    route = {"route": "/tokens", "method": "POST"}
    assert value(samples, "stateous_http_request_duration_seconds_count", **route) == 1
    assert value(samples, "stateous_http_request_duration_seconds_sum", **route) >= 0.2


def test_writers_at_once_count_every_change(backend: Backend, clock: Clock) -> None:
    engine = engine_on(backend, clock)
    barrier = threading.Barrier(8)

    def starts(number: int) -> None:
        barrier.wait()
        for index in range(5):
            engine.start(f"T-{number}-{index}", {"title": "t"})

    threads = [threading.Thread(target=starts, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with serving(engine) as served:
        samples = scrape(served)
    assert value(samples, "stateous_tokens_started_total") == 40
    assert value(samples, "stateous_events_fired_total") == 40
    assert value(samples, "stateous_tokens", state="draft", status="active") == 40
    assert value(samples, "stateous_tasks", state="draft", status="queued") == 40
    # Per writer at once: two totals and a minute of the ring, and the two gauges.
    [(kept,)] = rows(backend, "SELECT count(*) FROM counts")
    assert kept <= 5 * 8


def test_a_database_made_before_the_counts_takes_its_counts_from_its_rows_and_ledger(
    backend: Backend, clock: Clock
) -> None:
    engine = engine_on(backend, clock)
    workload(engine, clock)
    engine.store.close()
    with connected(backend) as run:
        for statement in (
            *BACK_TO_0008,
            "DROP INDEX ledger_pos",
            "ALTER TABLE ledger DROP COLUMN pos",
            "DROP TABLE counts",
            "UPDATE stateous_version SET version_num = '0005'",
        ):
            run(statement)

    with serving(engine_on(backend, clock)) as served:
        samples = scrape(served)
        assert counts_drift(served.engine.store) == {}
    for name, kind in KINDS.items():
        assert value(samples, name) == ledger_count(backend, kind), name
    assert value(samples, "stateous_leases_ended_total") == 1
    assert value(samples, "stateous_timers_pending") == 1
    assert value(samples, "stateous_events_refused_total", code="event_not_allowed") == 1
    assert value(samples, "stateous_events_refused_total", code="token_not_active") == 1
    assert value(samples, "stateous_tokens_ended_total", status="failed") == 4
    assert value(samples, "stateous_tokens_ended_total", status="cancelled") == 1
    # The ledger does not tell reports apart: they are counted from the upgrade on.
    assert value(samples, "stateous_reports_total", outcome="event") == 0
