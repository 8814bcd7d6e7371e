"""Schedules in real `stateous serve` processes on both backends, with the serving clock
moved by the test (`STATEOUS_TEST_CLOCK_FILE`): overlap rules, the catch-up after an
outage, one start per occurrence across a kill -9, and both DST changes of Europe/Paris."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from stateous import END, START, Workflow
from tests.control.serving import Launcher, Served, write_graph
from tests.control.support import Backend, connected


class Job(msgspec.Struct):
    """The context of a scheduled token."""

    kind: str


def scheduled(**schedules: dict[str, Any]) -> Workflow:
    """A workflow of one state whose tokens wait there until cancelled, with `schedules`."""
    flow = Workflow("jobs", context=Job)
    work = flow.state("work")
    done = flow.event("done")
    flow.transition(START, work)
    flow.transition(work, END, on=done)
    for name, options in schedules.items():
        flow.schedule(name, context={"kind": name}, **options)
    return flow


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


class MovedClock:
    """The serving clock, set by writing the offset from the wall clock into its file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def set(self, moment: str) -> None:
        self.path.write_text(repr(utc(moment) - time.time()))


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MovedClock:
    path = tmp_path / "clock"
    monkeypatch.setenv("STATEOUS_TEST_CLOCK_FILE", str(path))
    return MovedClock(path)


def serve(launcher: Launcher, backend: Backend, flow: Workflow) -> Served:
    graph = backend.folder / "jobs.json"
    write_graph(graph, flow)
    return launcher.serve(graph, None, "--db", backend.db)


def listed(served: Served) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in served.ok("GET", "/schedules")}


def wait_until(
    served: Served, holds: Callable[[dict[str, dict[str, Any]]], bool], timeout: float = 30.0
) -> dict[str, dict[str, Any]]:
    """Poll `GET /schedules` until `holds` is true of it; answer the last listing."""
    deadline = time.monotonic() + timeout
    while True:
        schedules = listed(served)
        if holds(schedules):
            return schedules
        assert time.monotonic() < deadline, schedules
        time.sleep(0.1)


def tokens_of(served: Served, prefix: str) -> list[str]:
    rows = served.ok("GET", "/tokens?limit=1000")
    return sorted(row["token"] for row in rows if row["token"].startswith(prefix + "."))


def history(backend: Backend, schedule: str) -> list[tuple[Any, ...]]:
    with connected(backend) as run:
        return run(
            "SELECT at, outcome, token, missed, reason FROM schedule_history "
            f"WHERE schedule = '{schedule}' ORDER BY at"
        )


def test_the_overlap_rules_skip_queue_one_and_allow(
    backend: Backend, launcher: Launcher, clock: MovedClock
) -> None:
    clock.set("2030-01-01T02:59:00")
    flow = scheduled(
        skipper={"cron": "0 3 * * *", "overlap": "skip"},
        queuer={"cron": "0 3 * * *", "overlap": "queue_one"},
        doubler={"cron": "0 3 * * *", "overlap": "allow"},
    )
    served = serve(launcher, backend, flow)
    first = listed(served)
    assert {row["next_at"] for row in first.values()} == {"2030-01-01T03:00:00Z"}
    assert all(row["last_at"] is None and row["source"] == "flow" for row in first.values())

    clock.set("2030-01-01T03:00:01")
    wait_until(served, lambda rows: all(row["last_token"] for row in rows.values()))
    for name in ("skipper", "queuer", "doubler"):
        assert tokens_of(served, name) == [f"{name}.20300101T0300Z"]
        assert served.ok("GET", f"/tokens/{name}.20300101T0300Z")["context"] == {"kind": name}

    clock.set("2030-01-02T03:00:01")
    rows = wait_until(served, lambda rows: rows["skipper"]["last_at"] == "2030-01-02T03:00:00Z")
    rows = wait_until(
        served, lambda rows: all(r["last_at"] == "2030-01-02T03:00:00Z" for r in rows.values())
    )
    assert rows["skipper"]["last_skip"] == {
        "at": "2030-01-02T03:00:00Z",
        "reason": "the token skipper.20300101T0300Z of an earlier occurrence is still live "
        "(overlap)",
    }
    assert tokens_of(served, "skipper") == ["skipper.20300101T0300Z"]
    assert rows["queuer"]["waiting_at"] == "2030-01-02T03:00:00Z"
    assert rows["queuer"]["last_skip"] is None
    assert tokens_of(served, "queuer") == ["queuer.20300101T0300Z"]
    assert tokens_of(served, "doubler") == ["doubler.20300101T0300Z", "doubler.20300102T0300Z"]

    clock.set("2030-01-03T03:00:01")
    rows = wait_until(
        served, lambda rows: all(r["last_at"] == "2030-01-03T03:00:00Z" for r in rows.values())
    )
    assert rows["queuer"]["waiting_at"] == "2030-01-02T03:00:00Z"  # at most one waits
    assert "waits already" in rows["queuer"]["last_skip"]["reason"]
    assert len(tokens_of(served, "doubler")) == 3

    # The last token ends: the start that waited goes, under its own occurrence's id.
    served.ok("POST", "/tokens/queuer.20300101T0300Z/cancel")
    rows = wait_until(served, lambda rows: rows["queuer"]["waiting_at"] is None)
    assert rows["queuer"]["last_token"] == "queuer.20300102T0300Z"
    assert tokens_of(served, "queuer") == ["queuer.20300101T0300Z", "queuer.20300102T0300Z"]
    outcomes = [(row[1], row[2]) for row in history(backend, "queuer")]
    assert outcomes == [
        ("started", "queuer.20300101T0300Z"),
        ("started", "queuer.20300102T0300Z"),
        ("skipped", None),
    ]
    started = served.history("queuer.20300102T0300Z")[0]
    assert started["kind"] == "started"


def test_after_12_missed_occurrences_latest_starts_one_token_and_none_starts_none(
    backend: Backend, launcher: Launcher, clock: MovedClock
) -> None:
    clock.set("2030-01-01T00:59:30")
    flow = scheduled(
        latest={"cron": "0 * * * *", "catch_up": "latest", "overlap": "allow"},
        dropper={"cron": "0 * * * *", "catch_up": "none", "overlap": "allow"},
    )
    served = serve(launcher, backend, flow)
    clock.set("2030-01-01T01:00:01")
    wait_until(served, lambda rows: all(row["last_token"] for row in rows.values()))
    assert served.stop() == 0

    # Twelve hours without a control plane: 02:00 to 13:00 came due, and nobody served.
    clock.set("2030-01-01T13:20:00")
    served = serve(launcher, backend, flow)
    rows = wait_until(
        served, lambda rows: all(r["last_at"] == "2030-01-01T13:00:00Z" for r in rows.values())
    )
    assert tokens_of(served, "latest") == ["latest.20300101T0100Z", "latest.20300101T1300Z"]
    assert tokens_of(served, "dropper") == ["dropper.20300101T0100Z"]
    assert history(backend, "latest")[-1][1:4] == ("started", "latest.20300101T1300Z", 11)
    assert history(backend, "dropper")[-1][1:4] == ("skipped", None, 11)
    assert rows["dropper"]["last_skip"]["reason"] == (
        "missed: no control plane served at 2030-01-01T13:00:00Z and 11 occurrence(s) "
        "before it (catch_up none)"
    )
    assert rows["latest"]["next_at"] == rows["dropper"]["next_at"] == "2030-01-01T14:00:00Z"
    time.sleep(2.5)  # more beats start nothing more
    assert len(tokens_of(served, "latest")) == 2


def test_one_occurrence_starts_one_token_across_a_kill_9_and_a_rewound_schedule(
    backend: Backend, launcher: Launcher, clock: MovedClock
) -> None:
    clock.set("2030-01-01T02:59:58")
    flow = scheduled(nightly={"cron": "0 3 * * *"})
    served = serve(launcher, backend, flow)
    wait_until(served, lambda rows: rows["nightly"]["last_token"] is not None)
    served.kill()
    served = serve(launcher, backend, flow)
    time.sleep(2.5)
    assert tokens_of(served, "nightly") == ["nightly.20300101T0300Z"]
    served.kill()
    # A control plane that took over with the schedule's row behind (as a standby whose view
    # lagged would): the occurrence's token exists, so it is not started again.
    with connected(backend) as run:
        run("UPDATE schedules SET next_at = '2030-01-01 03:00:00.000000', last_token = NULL")
    served = serve(launcher, backend, flow)
    wait_until(served, lambda rows: rows["nightly"]["next_at"] == "2030-01-02T03:00:00Z")
    assert tokens_of(served, "nightly") == ["nightly.20300101T0300Z"]
    assert served.kinds("nightly.20300101T0300Z").count("started") == 1


@pytest.mark.parametrize(
    ("before", "first", "second", "token", "next_at"),
    [
        # spring: 02:30 does not exist on 2026-03-29; it runs at 03:00 CEST (01:00 UTC), and
        # not again at 03:30 CEST
        (
            "2026-03-29T00:59:30",
            "2026-03-29T01:00:01",
            "2026-03-29T01:30:01",
            "paris.20260329T0100Z",
            "2026-03-30T00:30:00Z",
        ),
        # autumn: 02:30 happens twice on 2026-10-25; it runs at the first (02:30 CEST, 00:30
        # UTC), not at the second (02:30 CET, 01:30 UTC)
        (
            "2026-10-25T00:29:30",
            "2026-10-25T00:30:01",
            "2026-10-25T01:30:01",
            "paris.20261025T0030Z",
            "2026-10-26T01:30:00Z",
        ),
    ],
    ids=["spring", "autumn"],
)
def test_a_dst_change_in_europe_paris_runs_the_occurrence_once(
    backend: Backend,
    launcher: Launcher,
    clock: MovedClock,
    before: str,
    first: str,
    second: str,
    token: str,
    next_at: str,
) -> None:
    clock.set(before)
    flow = scheduled(paris={"cron": "30 2 * * *", "tz": "Europe/Paris", "overlap": "allow"})
    served = serve(launcher, backend, flow)
    clock.set(first)
    rows = wait_until(served, lambda rows: rows["paris"]["last_token"] is not None)
    assert rows["paris"]["last_token"] == token
    assert rows["paris"]["next_at"] == next_at
    clock.set(second)
    time.sleep(2.5)
    assert tokens_of(served, "paris") == [token]
    assert listed(served)["paris"]["next_at"] == next_at
