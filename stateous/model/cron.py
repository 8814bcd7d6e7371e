"""Cron lines of five fields, and their occurrences in a time zone named for `zoneinfo`.

Our own parser, so that the pyz needs nothing beside Python: minute, hour, day of the
month, month, day of the week; `*`, numbers, ranges `a-b`, steps `*/n` and `a-b/n`
(`a/n` runs from `a` to the field's end), lists `a,b`, the names `jan`..`dec` and
`sun`..`sat` in any case, and 7 for Sunday beside 0. As in Vixie cron, a line that limits
both the day of the month and the day of the week runs on a day that either allows.

An occurrence is a wall-clock time of the zone, turned into an instant once: a time that a
DST change skips (02:30 on the spring day in Europe/Paris) runs at the first instant after
the gap (03:00 CEST), once however many times of the gap the line names; a time that the
autumn change repeats runs once, at its first pass (02:30 CEST, not 02:30 CET). The
instants are UTC seconds, strictly increasing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: Each field: its name, its bounds, and the names that stand for its numbers.
FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of the month", 1, 31, {}),
    ("month", 1, 12, {name: number for number, name in enumerate(MONTHS, start=1)}),
    ("day of the week", 0, 7, {name: number for number, name in enumerate(DAYS)}),
)
#: How far a search for the next or previous day of a line looks, in days: past a leap day
#: that falls on a given weekday's month (28 years would be exact; a line that needs more
#: never runs and is refused).
HORIZON = 366 * 8
#: The longest DST gap looked across, in minutes.
LONGEST_GAP = 180
#: How much wall-clock time a search looks at before its start: more than any DST shift.
SLACK = timedelta(hours=3)


class CronError(ValueError):
    """A cron line or a time zone that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed cron line: the numbers each field allows."""

    line: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    #: Whether the day of the month, or the day of the week, was `*` (then only the other
    #: one limits the days).
    any_day: bool
    any_weekday: bool

    def runs_on(self, day: date) -> bool:
        """Whether the line runs on this calendar day."""
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = day.isoweekday() % 7 in self.weekdays
        if self.any_day or self.any_weekday:
            return by_date and by_weekday
        return by_date or by_weekday

    def times_of(self, day: date, backward: bool = False) -> Iterator[datetime]:
        """The wall-clock times of a day that the line names, in order (or reversed)."""
        hours = reversed(self.hours) if backward else self.hours
        for hour in hours:
            minutes = reversed(self.minutes) if backward else self.minutes
            for minute in minutes:
                yield datetime(day.year, day.month, day.day, hour, minute)


def _number(text: str, names: dict[str, int], what: str, low: int, high: int) -> int:
    value = names.get(text.lower())
    if value is None:
        if not text.isascii() or not text.isdigit():
            raise CronError(f"the {what} field: {text!r} is not a number or a name")
        value = int(text)
    if not low <= value <= high:
        raise CronError(f"the {what} field: {value} is not within {low}-{high}")
    return value


def _part(text: str, what: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    span, slash, step_text = text.partition("/")
    step = 1
    if slash:
        if not step_text.isascii() or not step_text.isdigit() or int(step_text) == 0:
            raise CronError(f"the {what} field: the step in {text!r} is not a number above 0")
        step = int(step_text)
    if span == "*":
        first, last = low, high
    elif "-" in span:
        start, _, end = span.partition("-")
        first = _number(start, names, what, low, high)
        last = _number(end, names, what, low, high)
        if first > last:
            raise CronError(f"the {what} field: the range {span!r} runs backwards")
    else:
        first = _number(span, names, what, low, high)
        last = high if slash else first
    return set(range(first, last + 1, step))


def _field(text: str, what: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    if not text:
        raise CronError(f"the {what} field is empty")
    found: set[int] = set()
    for part in text.split(","):
        found |= _part(part, what, low, high, names)
    return found


def parse(line: str) -> Cron:
    """Parse a cron line of five fields; a line that never runs is refused too."""
    if not isinstance(line, str):
        raise CronError(f"{line!r} is not a cron line: give a string such as '0 3 * * *'")
    words = line.split()
    if len(words) != len(FIELDS):
        raise CronError(
            f"{line!r} has {len(words)} field(s); a cron line has 5: "
            "minute, hour, day of the month, month, day of the week"
        )
    sets = [
        _field(word, what, low, high, names)
        for word, (what, low, high, names) in zip(words, FIELDS, strict=True)
    ]
    minutes, hours, days, months, weekdays = sets
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    cron = Cron(
        line=" ".join(words),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(weekdays),
        any_day=words[2] == "*",
        any_weekday=words[4] == "*",
    )
    if not any(cron.runs_on(date(2024, 1, 1) + timedelta(days=n)) for n in range(HORIZON)):
        raise CronError(f"{cron.line!r} names no day that exists: it would never run")
    return cron


def zone(name: object) -> ZoneInfo:
    """The time zone of an IANA name, such as 'Europe/Paris' or 'UTC'."""
    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name:
        raise CronError(f"{name!r} is not a time zone name such as 'Europe/Paris'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(
            f"{name!r} is no time zone known here; use a name such as 'Europe/Paris'"
        ) from None


def _exists(wall: datetime, tz: ZoneInfo) -> bool:
    there = wall.replace(tzinfo=tz)
    return there.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == wall


def instant(wall: datetime, tz: ZoneInfo) -> float:
    """The UTC seconds of a wall-clock time: its first pass when the hour repeats, the first
    instant after the gap when the hour is skipped."""
    for _ in range(LONGEST_GAP):
        if _exists(wall, tz):
            return wall.replace(tzinfo=tz, fold=0).timestamp()
        wall = wall.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return wall.replace(tzinfo=tz).timestamp()


def _walls(cron: Cron, tz: ZoneInfo, start: float, backward: bool) -> Iterator[float]:
    """Every instant of the line from about `start` on (or back), in order. The walk starts
    `SLACK` of wall-clock time early (or late), so that a time that a DST change moves
    across `start` is not lost; the callers drop what lies on the wrong side."""
    step = timedelta(days=-1 if backward else 1)
    edge = datetime.fromtimestamp(start, tz).replace(tzinfo=None)
    edge = edge + SLACK if backward else edge - SLACK
    day = edge.date()
    for _ in range(HORIZON):
        if cron.runs_on(day):
            for wall in cron.times_of(day, backward):
                if (wall <= edge) if backward else (wall >= edge):
                    yield instant(wall, tz)
        day += step


def next_after(cron: Cron, tz: ZoneInfo, after: float) -> float | None:
    """The first occurrence strictly after `after` (UTC seconds)."""
    return next((at for at in _walls(cron, tz, after, False) if at > after), None)


def last_until(cron: Cron, tz: ZoneInfo, until: float) -> float | None:
    """The last occurrence at or before `until` (UTC seconds)."""
    return next((at for at in _walls(cron, tz, until, True) if at <= until), None)


def count_between(cron: Cron, tz: ZoneInfo, after: float, before: float, most: int) -> int:
    """How many occurrences fall strictly between two instants, counted up to `most`."""
    seen, last = 0, after
    for at in _walls(cron, tz, after, False):
        if at >= before or seen >= most:
            break
        if at > last:
            seen, last = seen + 1, at
    return seen
