"""The cron parser on its own: fields, names, steps, lists, bad lines, and the occurrences
of a line in a time zone, across both DST changes of Europe/Paris."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from stateous.model import cron


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M")


def following(line: str, start: str, count: int, tz: str = "UTC") -> list[str]:
    """The `count` occurrences of `line` after `start` (UTC)."""
    parsed, zone = cron.parse(line), cron.zone(tz)
    found, at = [], utc(start)
    for _ in range(count):
        nxt = cron.next_after(parsed, zone, at)
        assert nxt is not None
        found.append(iso(nxt))
        at = nxt
    return found


@pytest.mark.parametrize(
    ("line", "start", "expected"),
    [
        ("0 3 * * *", "2025-01-01T00:00", ["2025-01-01T03:00", "2025-01-02T03:00"]),
        ("*/15 * * * *", "2025-01-01T00:07", ["2025-01-01T00:15", "2025-01-01T00:30"]),
        ("5-10/5 1 * * *", "2025-01-01T00:00", ["2025-01-01T01:05", "2025-01-01T01:10"]),
        ("0 0,12 * * *", "2025-01-01T01:00", ["2025-01-01T12:00", "2025-01-02T00:00"]),
        ("0 9 * * mon-fri", "2025-01-03T10:00", ["2025-01-06T09:00", "2025-01-07T09:00"]),
        ("0 9 * * SUN", "2025-01-01T00:00", ["2025-01-05T09:00", "2025-01-12T09:00"]),
        ("0 9 * * 7", "2025-01-01T00:00", ["2025-01-05T09:00", "2025-01-12T09:00"]),
        ("0 0 1 jan,JUL *", "2025-01-02T00:00", ["2025-07-01T00:00", "2026-01-01T00:00"]),
        ("0 0 29 feb *", "2025-01-01T00:00", ["2028-02-29T00:00", "2032-02-29T00:00"]),
        # both day fields limited: either one lets the day in (Vixie cron)
        ("0 0 13 * fri", "2025-06-01T00:00", ["2025-06-06T00:00", "2025-06-13T00:00"]),
        ("30/10 * * * *", "2025-01-01T00:00", ["2025-01-01T00:30", "2025-01-01T00:40"]),
        ("  0   3 * *  * ", "2025-01-01T00:00", ["2025-01-01T03:00", "2025-01-02T03:00"]),
    ],
)
def test_a_line_occurs_at_the_times_its_fields_name(
    line: str, start: str, expected: list[str]
) -> None:
    assert following(line, start, len(expected)) == expected


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("", "0 field(s)"),
        ("* * * *", "4 field(s)"),
        ("* * * * * *", "6 field(s)"),
        ("60 * * * *", "the minute field: 60 is not within 0-59"),
        ("* 24 * * *", "the hour field: 24"),
        ("* * 0 * *", "the day of the month field: 0"),
        ("* * * 13 *", "the month field: 13"),
        ("* * * * 8", "the day of the week field: 8"),
        ("*/0 * * * *", "the minute field: the step"),
        ("*/x * * * *", "the minute field: the step"),
        ("5-1 * * * *", "the minute field: the range '5-1' runs backwards"),
        ("a * * * *", "the minute field: 'a' is not a number or a name"),
        ("* * * foo *", "the month field: 'foo'"),
        ("* * * * funday", "the day of the week field: 'funday'"),
        ("1,,2 * * * *", "the minute field: '' is not"),
        ("0 0 30 feb *", "would never run"),
        ("\uff10 3 * * *", "the minute field"),  # a full-width digit zero
    ],
)
def test_a_bad_line_is_refused_naming_its_field(line: str, field: str) -> None:
    with pytest.raises(cron.CronError, match=None) as refused:
        cron.parse(line)
    assert field in str(refused.value)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "/etc/localtime", 3])
def test_an_unknown_time_zone_is_refused(name: object) -> None:
    with pytest.raises(cron.CronError, match="time zone"):
        cron.zone(name)


def test_a_time_the_spring_change_skips_runs_once_at_the_end_of_the_gap() -> None:
    # 2026-03-29 in Paris: 02:00 CET becomes 03:00 CEST (01:00 UTC).
    assert following("30 2 * * *", "2026-03-28T00:00", 3, "Europe/Paris") == [
        "2026-03-28T01:30",  # 02:30 CET
        "2026-03-29T01:00",  # no 02:30 that day: 03:00 CEST, the first instant after the gap
        "2026-03-30T00:30",  # 02:30 CEST
    ]
    # Every time of the gap is the same instant, so it runs once.
    assert following("*/15 2 * * *", "2026-03-29T00:00", 2, "Europe/Paris") == [
        "2026-03-29T01:00",
        "2026-03-30T00:00",
    ]


def test_a_time_the_autumn_change_repeats_runs_once_at_its_first_pass() -> None:
    # 2026-10-25 in Paris: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:xx happens twice.
    assert following("30 2 * * *", "2026-10-24T12:00", 2, "Europe/Paris") == [
        "2026-10-25T00:30",  # 02:30 CEST, the first pass; 02:30 CET (01:30 UTC) does not run
        "2026-10-26T01:30",
    ]
    assert following("0,30 * * * *", "2026-10-25T00:00", 4, "Europe/Paris") == [
        "2026-10-25T00:30",
        "2026-10-25T02:00",  # 03:00 CET: the repeated 02:00 and 02:30 CET are not run again
        "2026-10-25T02:30",
        "2026-10-25T03:00",
    ]


def test_the_last_occurrence_and_the_count_between_two_instants() -> None:
    line, zone = cron.parse("0 * * * *"), cron.zone("UTC")
    assert iso(cron.last_until(line, zone, utc("2025-01-01T12:30")) or 0) == "2025-01-01T12:00"
    assert iso(cron.last_until(line, zone, utc("2025-01-01T12:00")) or 0) == "2025-01-01T12:00"
    start = utc("2025-01-01T00:00")
    assert cron.count_between(line, zone, start, utc("2025-01-01T12:00"), 99) == 11
    assert cron.count_between(line, zone, start, utc("2026-01-01T00:00"), 50) == 50
