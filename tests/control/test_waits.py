"""The waiting claims' wake-ups, in-process with real threads: one claim woken per task
queued, and a wake that its claim leaves unused passed on to the others."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from stateous.control.waits import Waits


class Claims:
    """Claims waiting on one `Waits`, each counting its attempts; none is ever granted."""

    def __init__(self, waits: Waits) -> None:
        self.waits = waits
        self.attempts: Counter[str] = Counter()
        self.threads: list[threading.Thread] = []

    def wait(self, name: str, states: list[str], gone: Callable[[], bool] | None = None) -> None:
        def attempt() -> None:
            self.attempts[name] += 1

        thread = threading.Thread(target=self.waits.wait, args=(states, 5.0, attempt, gone))
        thread.start()
        self.threads.append(thread)

    def settle(self) -> None:
        time.sleep(0.3)

    def end(self) -> None:
        self.waits.close()
        for thread in self.threads:
            thread.join(timeout=5)


def test_a_task_queued_wakes_one_waiting_claim_of_its_state_the_longest_waiting() -> None:
    claims = Claims(Waits(8))
    for name in ("first", "second", "third"):
        claims.wait(name, ["coding"])
        claims.settle()
    claims.wait("elsewhere", ["review"])
    claims.settle()
    claims.waits.queued(Counter({"coding": 1}))
    claims.settle()
    assert claims.attempts == Counter(first=2, second=1, third=1, elsewhere=1)
    claims.waits.queued(Counter({"coding": 2, "review": 1}))
    claims.settle()
    assert claims.attempts == Counter(first=3, second=2, third=1, elsewhere=2)
    claims.end()


def test_a_write_that_may_have_made_any_task_claimable_wakes_every_claim() -> None:
    claims = Claims(Waits(8))
    claims.wait("a", ["coding"])
    claims.wait("b", ["review"])
    claims.settle()
    claims.waits.queued(None)
    claims.settle()
    assert claims.attempts == Counter(a=2, b=2)
    claims.end()


def test_a_claim_woken_whose_client_left_passes_its_wake_to_the_others() -> None:
    claims = Claims(Waits(8))
    left = threading.Event()
    claims.wait("leaving", ["coding"], gone=left.is_set)
    claims.settle()
    claims.wait("staying", ["coding"])
    claims.settle()
    left.set()
    claims.waits.queued(Counter({"coding": 1}))
    claims.settle()
    # The first claim is woken, sees its client gone and leaves: the second claims instead.
    assert claims.attempts == Counter(leaving=1, staying=2)
    claims.end()
