"""The waiting claims' wake-ups, in-process: one claim woken per task queued, the longest
waiting first, and a wake that its claim leaves unused passed on to the others."""

from __future__ import annotations

from collections import Counter

from stateous.control.store import Queues
from stateous.control.waiting_claims import Ask, Waiter, Waits
from stateous.model.wire import Grant


def asking(states: list[str]) -> Ask:
    """What a claim of `states` asks, as the waits keep it."""
    return Ask("s1", Queues(states), None, None)


class Claims:
    """Claims waiting on one `Waits`, each counting the wakes its listener heard."""

    def __init__(self, limit: int = 8) -> None:
        self.waits = Waits(limit)
        self.woken: Counter[str] = Counter()
        self.waiters: dict[str, Waiter] = {}

    def wait(self, name: str, states: list[str]) -> None:
        waiter = self.waits.enter(asking(states), 5.0)
        assert waiter is not None
        self.waiters[name] = waiter
        self.listen(name)

    def listen(self, name: str) -> None:
        """Attempt again (finding nothing) and listen for the next wake."""
        waiter = self.waiters[name]
        waiter.rewind()

        def heard() -> None:
            self.woken[name] += 1

        assert waiter.listen(heard)


def test_a_task_queued_wakes_one_waiting_claim_of_its_state_the_longest_waiting() -> None:
    claims = Claims()
    for name in ("first", "second", "third"):
        claims.wait(name, ["coding"])
    claims.wait("elsewhere", ["review"])
    claims.waits.queued(Counter({"coding": 1}))
    assert claims.woken == Counter(first=1)
    # A claim woken and not yet back is not woken twice: the next tasks go to the others.
    claims.waits.queued(Counter({"coding": 2, "review": 1}))
    assert claims.woken == Counter(first=1, second=1, third=1, elsewhere=1)


def test_a_write_that_may_have_made_any_task_claimable_wakes_every_claim() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    claims.wait("b", ["review"])
    claims.waits.queued(None)
    assert claims.woken == Counter(a=1, b=1)


def test_a_claim_woken_that_leaves_without_claiming_passes_its_wake_to_the_others() -> None:
    claims = Claims()
    claims.wait("leaving", ["coding"])
    claims.wait("staying", ["coding"])
    claims.waits.queued(Counter({"coding": 1}))
    assert claims.woken == Counter(leaving=1)
    claims.waiters["leaving"].leave()  # its client left before it claimed
    assert claims.woken == Counter(leaving=1, staying=1)


def test_a_claim_that_leaves_after_its_attempt_wakes_nobody() -> None:
    claims = Claims()
    claims.wait("granted", ["coding"])
    claims.wait("other", ["coding"])
    claims.waits.queued(Counter({"coding": 1}))
    claims.waiters["granted"].rewind()  # it attempts again, and its attempt is granted
    claims.waiters["granted"].leave()
    assert claims.woken == Counter(granted=1)


def test_a_wake_during_an_attempt_is_kept_for_the_next_listen() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    waiter = claims.waiters["a"]
    waiter.rewind()
    claims.waits.queued(Counter({"coding": 1}))  # queued while it attempted
    assert not waiter.listen(lambda: None)  # it attempts again at once instead


def test_claims_beyond_the_limit_find_no_room_and_none_after_close() -> None:
    claims = Claims(limit=2)
    claims.wait("a", ["coding"])
    claims.wait("b", ["coding"])
    assert claims.waits.enter(asking(["coding"]), 5.0) is None
    claims.waiters["a"].leave()
    assert claims.waits.enter(asking(["coding"]), 5.0) is not None
    claims.waits.close()
    # Closing wakes every claim still listening, and tells it the control plane stops.
    assert claims.woken == Counter(b=1)
    assert claims.waiters["b"].stopping() and not claims.waiters["b"].may_wait()
    assert claims.waits.enter(asking(["coding"]), 5.0) is None


def test_a_claim_taken_by_a_write_is_woken_by_nobody_else_and_goes_only_when_given_back() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    claims.wait("b", ["coding"])
    taken = claims.waits.take("coding")
    assert taken is not None and taken[0] is claims.waiters["a"]
    waiter, listener = taken
    assert claims.waits.take("coding") is not None  # the next one: "b"
    claims.waits.queued(Counter(coding=1))
    assert claims.woken == Counter()  # both taken: no wake reaches them
    # Its wait over or its client acting, a taken claim is not served again yet.
    assert not waiter.may_go()
    claims.waits.give_back(waiter, listener)
    assert claims.woken == Counter(a=1)  # woken meanwhile: served again at once


def test_a_claim_given_back_unwoken_waits_on_and_a_grant_handed_goes_with_its_wake() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    waiter, listener = claims.waits.take("coding") or (None, None)
    assert waiter is not None and listener is not None
    claims.waits.give_back(waiter, listener)
    assert claims.woken == Counter()
    # It listens again: the next write may take it.
    waiter, listener = claims.waits.take("coding") or (None, None)
    assert waiter is not None and listener is not None
    grant = Grant(task=7, token="T-1", state="coding", visit=1, attempt=1, context={}, lease=120)
    claims.waits.hand(waiter, listener, grant)
    assert claims.woken == Counter(a=1)
    assert waiter.handed == grant


def test_a_claim_that_leaves_the_room_can_no_longer_be_taken_by_a_write() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    # Its wait over (or its client acting), the room lets it go to be answered: a write
    # that queues a task now must not grant it a task that its answer would not carry.
    assert claims.waiters["a"].may_go()
    assert claims.waits.take("coding") is None


def test_a_task_queued_wakes_a_claim_between_attempts_before_one_a_write_has_taken() -> None:
    claims = Claims()
    claims.wait("taken", ["coding"])
    attempting = claims.waits.enter(asking(["coding"]), 5.0)  # its first attempt under way
    assert attempting is not None
    assert claims.waits.take("coding") is not None
    # Another write queued a task that no claim took: its wake goes to the claim that can
    # use it, which attempts again at once, not to the one that a write will answer.
    claims.waits.queued(Counter(coding=1))
    assert not attempting.listen(lambda: None)


def test_a_wake_that_only_a_taken_claim_could_hear_is_kept_for_it_when_given_back() -> None:
    claims = Claims()
    claims.wait("a", ["coding"])
    waiter, listener = claims.waits.take("coding") or (None, None)
    assert waiter is not None and listener is not None
    claims.waits.queued(Counter(coding=1))
    claims.waits.give_back(waiter, listener)
    assert claims.woken == Counter(a=1)


def test_a_claim_leaves_the_waits_once_however_often_it_is_told_to() -> None:
    claims = Claims(limit=2)
    claims.wait("a", ["coding"])
    claims.wait("b", ["coding"])
    claims.waits.queued(Counter(coding=1))
    claims.waiters["a"].leave()
    claims.waiters["a"].leave()  # a claim refused after it was served again leaves twice
    assert claims.woken == Counter(a=1, b=1)  # its unused wake passed on once
    assert claims.waits.enter(asking(["coding"]), 5.0) is not None
    assert claims.waits.enter(asking(["coding"]), 5.0) is None
