"""`/schedules` over HTTP, on both backends: a schedule added, listed, paused, resumed and
removed; bad fields refused with the field named and nothing kept."""

from __future__ import annotations

from typing import Any

import pytest

from tests.control.conftest import Served

GOOD = {"name": "nightly", "cron": "0 3 * * *", "context": {"title": "a report"}}


def test_a_schedule_is_added_listed_paused_resumed_and_removed(served: Served) -> None:
    status, _, added = served.request("POST", "/schedules", {**GOOD, "tz": "Europe/Paris"})
    assert status == 201
    assert added["source"] == "added"
    assert added["cron"] == "0 3 * * *" and added["tz"] == "Europe/Paris"
    assert (added["overlap"], added["catch_up"]) == ("skip", "latest")
    assert added["next_at"].endswith(":00:00Z") and added["last_at"] is None
    assert added["context"] == {"title": "a report", "amount": 0}  # the defaults filled
    status, _, listed = served.request("GET", "/schedules")
    assert (status, listed) == (200, [added])

    status, _, paused = served.request("POST", "/schedules/nightly/pause", {})
    assert (status, paused["paused"], paused["next_at"]) == (200, True, None)
    status, _, resumed = served.request("POST", "/schedules/nightly/resume", {})
    assert (status, resumed["paused"], resumed["next_at"]) == (200, False, added["next_at"])

    status, _, again = served.request("POST", "/schedules", GOOD)
    assert (status, again["code"]) == (409, "schedule_exists")
    status, _, removed = served.request("POST", "/schedules/nightly/remove", {})
    assert (status, removed["name"]) == (200, "nightly")
    assert served.request("GET", "/schedules")[2] == []
    status, _, missing = served.request("POST", "/schedules/nightly/pause", {})
    assert (status, missing["code"]) == (404, "schedule_not_found")


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cron": "0 3 * *"}, "cron: '0 3 * *' has 4 field(s)"),
        ({"cron": "0 25 * * *"}, "cron: the hour field: 25 is not within 0-23"),
        ({"tz": "Europe/Atlantis"}, "tz: 'Europe/Atlantis' is no time zone known here"),
        ({"overlap": "sometimes"}, "overlap: 'sometimes' is not one of skip, queue_one, allow"),
        ({"catch_up": "all"}, "catch_up: 'all' is not one of latest, none"),
        ({"name": "Night Shift"}, "name: 'Night Shift' is not a valid name"),
        ({"context": {}}, "context: the context does not fit the model"),
    ],
)
def test_a_bad_schedule_is_refused_with_its_field_named_and_nothing_kept(
    served: Served, change: dict[str, Any], named: str
) -> None:
    status, _, refused = served.request("POST", "/schedules", {**GOOD, **change})
    assert (status, refused["code"]) == (422, "invalid_schedule")
    assert named in refused["error"]
    assert served.request("GET", "/schedules")[2] == []


def test_a_body_with_an_unknown_field_is_refused(served: Served) -> None:
    status, _, refused = served.request("POST", "/schedules", {**GOOD, "every": "day"})
    assert (status, refused["code"]) == (422, "invalid_body")
