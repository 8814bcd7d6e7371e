"""The fingerprint of a failed attempt: what makes two failures "the same failure".

Two attempts fail the same way when their error texts agree once the parts that
change from run to run are taken out: numbers (counts, ports, durations, ids) and
hexadecimal ids (addresses, digests, UUIDs). The place the error was raised
(`(routines/review.py:12)`, as a supervisor writes it at the end of the error) is kept
whole, line number included, since a failure on another line is another failure.
The control plane computes it from the error text alone, so a supervisor of any
implementation gets one.
"""

import hashlib
import re

# The place a supervisor writes at the end of an error: ` (path:line)`.
_PLACE = re.compile(r" \([^()\s]+:\d+\)$")
# Hexadecimal ids: `0x7f3a...`, and runs of 8 or more hex digits (with the dashes of
# a UUID) that hold at least one digit, so a plain word like `deadbeef` stays.
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-fA-F-]*\d)[0-9a-fA-F]{8,}(?:-[0-9a-fA-F]{4,})*\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: How much of an error's message counts, its place aside: enough to tell failures apart,
#: and a bound on the work, since a report's error may be as long as its body (1 MiB),
#: and the hex-id pattern reads ahead at each dash.
MESSAGE_LIMIT = 1000


def failure_shape(error: str) -> str:
    """The error with numbers and hex ids written as `#`, its place kept as it was; only the
    first `MESSAGE_LIMIT` characters of the message count."""
    place = _PLACE.search(error)
    what, where = (error[: place.start()], place[0]) if place else (error, "")
    what = what[:MESSAGE_LIMIT]
    return _NUMBER.sub("#", _HEX.sub("#", what)) + where


def fingerprint(error: str) -> str:
    """A short id of the error's shape: 16 hex digits, equal for the same failure."""
    return hashlib.sha256(failure_shape(error).encode()).hexdigest()[:16]
