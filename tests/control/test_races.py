"""Races on one control plane: many threads, released together, on one SQLite file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from stateous.model.wire import Duplicate
from tests.control.support import Backend, Plane, counts_drift, orders, plane_for

THREADS = 8


@pytest.fixture
def plane(backend: Backend) -> Iterator[Plane]:
    served = plane_for(orders(), backend)
    yield served
    drift = counts_drift(served.store)
    served.store.close()
    assert drift == {}, "a change run again, or run beside another, counted wrong"


def together(work: Callable[[int], Any], threads: int = THREADS) -> list[Any]:
    """Run `work(i)` in threads released at the same moment; return the results in order."""
    barrier = threading.Barrier(threads)
    results: list[Any] = [None] * threads

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = work(index)
        except Exception as ex:
            results[index] = ex

    workers = [threading.Thread(target=run, args=(index,)) for index in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_two_claims_for_one_task_one_wins(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    grants = together(lambda index: plane.engine.claim(f"box-{index}", ["draft"]))
    won = [grant for grant in grants if grant is not None]
    assert len(won) == 1
    assert plane.kinds("A").count("task_claimed") == 1


def test_many_fires_on_one_token_serialize(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    rounds = 10

    def fire(index: int) -> int:
        for _ in range(rounds):
            plane.engine.fire("A", "remind")
        return index

    together(fire)
    history = plane.engine.history("A")
    assert [entry.seq for entry in history] == list(range(1, len(history) + 1))
    token = plane.engine.get("A")
    assert token.visit == 1 + THREADS * rounds
    assert [entry.kind for entry in history].count("task_queued") == 1 + THREADS * rounds
    live = plane.store.read(
        lambda tx: tx.execute("SELECT count(*) FROM tasks WHERE token = 'A' AND status = 'queued'")
    )
    assert live == [(1,)]


def test_the_same_key_from_eight_threads_applies_once(plane: Plane) -> None:
    plane.engine.start("A", {"title": "x"})
    answers = together(lambda index: plane.engine.fire("A", "submitted", None, "delivery-1"))
    duplicates = [answer for answer in answers if isinstance(answer, Duplicate)]
    assert len(duplicates) == THREADS - 1
    assert plane.kinds("A").count("event_accepted") == 2  # __started__, then submitted once
    assert plane.engine.get("A").state == "review"


def test_claims_from_many_supervisors_never_share_a_task(plane: Plane) -> None:
    for index in range(40):
        plane.engine.start(f"T-{index}", {"title": "x"})

    def claim_all(index: int) -> list[int]:
        got = []
        while (grant := plane.engine.claim(f"box-{index}", ["draft"])) is not None:
            got.append(grant.task)
        return got

    results = together(claim_all)
    tasks = [task for got in results for task in got]
    assert sorted(tasks) == list(range(1, 41))


def test_one_new_token_started_from_eight_threads_is_made_once(plane: Plane) -> None:
    answers = together(lambda index: plane.engine.start("A", {"title": f"from {index}"}))
    assert [made for _, made in answers].count(True) == 1, answers
    assert {view.token for view, _ in answers} == {"A"}
    assert len({view.context["title"] for view, _ in answers}) == 1
    assert plane.kinds("A").count("started") == 1
