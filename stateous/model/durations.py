"""Durations as people write them in a workflow: a whole number and one unit.

`30s`, `10m`, `6h` and `2d` are the only forms, up to `3650d`, so that a timeout
reads the same in `flow.py`, in the graph file and in the history.
"""

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LONGEST = 3650 * UNITS["d"]
_DURATION = re.compile(r"([0-9]+)([smhd])\Z")
HINT = "write e.g. '30s', '10m', '2h', '1d'"


def parse_duration(text: object) -> int:
    """Return the number of seconds of a duration such as '10m'.

    Raises ValueError with a sentence that says how to write it instead.
    """
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a duration; {HINT}")
    seconds = int(match.group(1)) * UNITS[match.group(2)]
    if seconds <= 0:
        raise ValueError(f"{text!r} is not a duration: it must be longer than zero; {HINT}")
    if seconds > LONGEST:
        raise ValueError(f"{text!r} is too long: the longest duration is '3650d'")
    return seconds


def in_words(seconds: float) -> str:
    """A number of seconds as a person says it: '2 minutes', '1 hour', '90 seconds'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    count = round(seconds)
    return f"{count} second{'s' if count != 1 else ''}"
