"""Schedules: their rules, the checks `flow.py`, `compile` and `POST /schedules` share, and
the shapes the API reads and answers.

A schedule starts a token of the served workflow at each occurrence of a cron line in a
time zone. `overlap` says what an occurrence does while the token of the last one is still
live, `catch_up` what happens to the occurrences that came due while no control plane
served (docs/how-to/run-on-a-schedule.md).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from stateous.model.cron import CronError, parse, zone
from stateous.model.names import name_problem
from stateous.model.vocabulary import CATCH_UPS, OVERLAPS

#: Where a schedule comes from: the graph file (`flow.schedule`), or an operator at run time.
FLOW, ADDED = "flow", "added"


def problems(
    name: object, cron: object, tz: object, overlap: object, catch_up: object
) -> list[str]:
    """Every problem of a schedule's fields, each naming its field; empty when it is good."""
    found = []
    problem = name_problem(name)
    if problem is not None:
        found.append(f"name: {problem}")
    try:
        parse(cron)  # type: ignore[arg-type]
    except CronError as ex:
        found.append(f"cron: {ex}")
    try:
        zone(tz)
    except CronError as ex:
        found.append(f"tz: {ex}")
    if overlap not in OVERLAPS:
        found.append(f"overlap: {overlap!r} is not one of {', '.join(OVERLAPS)}")
    if catch_up not in CATCH_UPS:
        found.append(f"catch_up: {catch_up!r} is not one of {', '.join(CATCH_UPS)}")
    return found


def token_id(name: str, at: float) -> str:
    """The id of the token that the occurrence at `at` (UTC seconds) starts: the schedule's
    name and the occurrence's UTC minute, so that each occurrence starts at most once."""
    return f"{name}.{time.strftime('%Y%m%dT%H%MZ', time.gmtime(at))}"


class ScheduleBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """`POST /schedules`: a schedule added at run time."""

    name: str
    cron: str
    tz: str = "UTC"
    context: dict[str, Any] = {}
    overlap: str = "skip"
    catch_up: str = "latest"


class Skip(msgspec.Struct, kw_only=True):
    """An occurrence that started no token, and why."""

    at: str
    reason: str


class ScheduleView(msgspec.Struct, kw_only=True):
    """A schedule as `GET /schedules` lists it; times are UTC, `next_at` is null while
    paused, `waiting_at` is the occurrence that waits to start (`queue_one`)."""

    name: str
    source: str
    cron: str
    tz: str
    overlap: str
    catch_up: str
    context: dict[str, Any]
    paused: bool
    next_at: str | None
    last_at: str | None
    last_token: str | None
    waiting_at: str | None
    last_skip: Skip | None
