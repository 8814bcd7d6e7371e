"""Backoff between the attempts of a task: `retry_delay`, doubled per attempt, capped by
`retry_delay_max`, with full jitter.

A provider that is down for a minute must not take every attempt of every task in the
same second: each wait doubles, and each is drawn at random between none and the whole
of it, so that tasks failed together come back apart.
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


def ceiling(delay: str, cap: str | None, attempt: int) -> float:
    """The longest wait after failed attempt `attempt` (1 for the first): `delay` doubled
    once per attempt before it, at most `cap`."""
    longest = delay_seconds = float(parse_duration(delay))
    if cap is not None:
        longest = float(parse_duration(cap))
    return min(longest, delay_seconds * 2.0 ** min(attempt - 1, 64))


def jittered(ceiling_seconds: float, seed: str) -> float:
    """A wait drawn evenly from [0, `ceiling_seconds`] (full jitter).

    The draw is seeded by `seed` (the task and its attempt), so the engine's operation
    stays a function of what it reads: run again after a conflict, it draws the same wait.
    """
    return random.Random(seed).uniform(0.0, ceiling_seconds)


def retry_wait(
    delay: str | None, cap: str | None, task: int, attempt: int, asked: float | None
) -> float:
    """The seconds before a task's next attempt: what its routine asked for, else its
    state's backoff after `attempt` (none without a `retry_delay`)."""
    if asked is not None:
        return asked
    if delay is None:
        return 0.0
    return jittered(ceiling(delay, cap, attempt), f"{task}:{attempt}")
