"""What counts as the same failure: the fingerprint of a failed attempt's error."""

import time

import pytest

from stateous.model.fingerprints import MESSAGE_LIMIT, failure_shape, fingerprint
from stateous.model.limits import BODY_LIMIT


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "TimeoutError: read timed out after 30 s (routines/fetch.py:12)",
            "TimeoutError: read timed out after 31.5 s (routines/fetch.py:12)",
        ),
        (
            "RuntimeError: worktree 3f9a1c2e7b is locked by pid 4411 (routines/agent.py:40)",
            "RuntimeError: worktree 88aa01cd90 is locked by pid 17 (routines/agent.py:40)",
        ),
        (
            "ValueError: <Conn object at 0x7f3a2c1d9e80> closed",
            "ValueError: <Conn object at 0x55d1e0> closed",
        ),
        (
            "KeyError: 'run-0d5b1f3e-8c2a-4e6f-9b1d-2a7c3e4f5a6b'",
            "KeyError: 'run-123e4567-e89b-12d3-a456-426614174000'",
        ),
    ],
)
def test_failures_that_differ_only_in_numbers_and_ids_are_the_same(first: str, second: str) -> None:
    assert fingerprint(first) == fingerprint(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "KeyError: 'name' (routines/review.py:12)",
            "KeyError: 'name' (routines/review.py:13)",
        ),
        ("KeyError: 'name'", "ValueError: 'name'"),
        (
            "RuntimeError: repository acme/api is broken",
            "RuntimeError: repository acme/web is broken",
        ),
    ],
)
def test_another_place_type_or_word_is_another_failure(first: str, second: str) -> None:
    assert fingerprint(first) != fingerprint(second)


def test_the_shape_keeps_the_place_and_plain_words() -> None:
    assert (
        failure_shape("OSError: deadbeef port 8080 refused (routines/a.py:7)")
        == "OSError: deadbeef port # refused (routines/a.py:7)"
    )
    assert len(fingerprint("anything")) == 16


def test_only_the_first_thousand_characters_of_a_message_count_and_a_long_one_is_quick() -> None:
    place = " (routines/a.py:7)"
    head = "RuntimeError: " + "x" * (MESSAGE_LIMIT - len("RuntimeError: "))
    assert fingerprint(head + "one tail" + place) == fingerprint(head + "another" + place)
    assert failure_shape(head + "one tail" + place) == head + place
    # Dashes between hex letters make the hex-id pattern read ahead at each one: a report's
    # error may be a whole body long, and the fingerprint is computed as the report is kept.
    started = time.perf_counter()
    fingerprint("a-" * (BODY_LIMIT // 2) + place)
    assert time.perf_counter() - started < 1.0
