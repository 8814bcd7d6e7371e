"""Backoff between the attempts of a task: `retry_delay`, doubled per attempt, capped by
`retry_delay_max`, with full jitter.

A provider that is down for a minute must not take every attempt of every task in the
same second: each wait doubles, and each is drawn at random between none and the whole
of it, so that tasks failed together come back apart. A key parked for a quota with no
stated reset waits by the same doubling draw, from half of the wait to the whole.
"""

from __future__ import annotations

import random

from stateous.model.durations import parse_duration


def backoff_problem(retries: int, delay: object, cap: object) -> str | None:
    """Say what is wrong with a state's `retry_delay` and `retry_delay_max`, or None."""
    if delay is None:
        return None if cap is None else "retry_delay_max= goes with retry_delay="
    if not retries:
        return "retry_delay= needs retries= of 1 or more: it is the wait between attempts"
    try:
        first = parse_duration(delay)
    except ValueError as ex:
        return f"retry_delay={delay!r}: {ex}"
    if cap is None:
        return None
    try:
        longest = parse_duration(cap)
    except ValueError as ex:
        return f"retry_delay_max={cap!r}: {ex}"
    if longest < first:
        return f"retry_delay_max={cap!r} is shorter than retry_delay={delay!r}"
    return None


def doubling_wait(first: float, longest: float, times: int, least: float, seed: str) -> float:
    """The `times`-th wait of a series (1 for the first): `first` doubled each time, at most
    `longest`, drawn evenly between the fraction `least` of it and the whole.

    Retry backoff and quota parking share it. The draw is seeded by `seed`, so the engine's
    operation stays a function of what it reads: run again after a conflict, it draws the
    same wait.
    """
    ceiling = min(longest, first * 2.0 ** min(times - 1, 64))
    return random.Random(seed).uniform(ceiling * least, ceiling)


def retry_wait(
    delay: str | None, cap: str | None, task: int, attempt: int, asked: float | None
) -> float:
    """The seconds before a task's next attempt: what its routine asked for, else its
    state's backoff after `attempt` (none without a `retry_delay`), with full jitter."""
    if asked is not None:
        return asked
    if delay is None:
        return 0.0
    first = float(parse_duration(delay))
    longest = first if cap is None else float(parse_duration(cap))
    return doubling_wait(first, longest, attempt, 0.0, f"{task}:{attempt}")
