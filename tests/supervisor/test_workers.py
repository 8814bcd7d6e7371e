"""The supervisor's kept threads (`supervisor/workers.py`): routines and blocking requests run
on threads that outlive them, and never wait behind one another.

Real threads and a real event loop; a routine that blocks waits on a `threading.Event`.
One test runs `stateous supervise` and reads what its routines saw of their thread;
another runs a supervisor in a thread of the test beside a real `stateous serve`.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from stateous.supervisor.running import Beside
from stateous.supervisor.workers import Workers
from tests.control.serving import Launcher
from tests.supervisor.support import Supervisors, wait_until, write_folder, write_graph


def test_calls_in_a_row_run_on_one_kept_daemon_thread() -> None:
    async def main() -> list[threading.Thread]:
        workers = Workers()
        try:
            return [await workers.run(threading.current_thread) for _ in range(3)]
        finally:
            workers.close()

    first, second, third = asyncio.run(main())
    assert first is second is third
    assert first is not threading.main_thread() and first.daemon


def test_a_call_never_waits_behind_one_that_blocks() -> None:
    release = threading.Event()

    async def main() -> tuple[str, bool]:
        workers = Workers()
        try:
            stuck = workers.run(release.wait, 10)
            quick = await asyncio.wait_for(workers.run(str.upper, "done"), 5)
            still = not stuck.done()
            release.set()
            await stuck
            return quick, still
        finally:
            workers.close()

    assert asyncio.run(main()) == ("DONE", True)


def test_an_exception_raised_on_the_thread_is_raised_to_the_awaiting_task() -> None:
    def fail(text: str) -> None:
        raise ValueError(text)

    async def main() -> None:
        workers = Workers()
        try:
            await workers.run(fail, "no good")
        finally:
            workers.close()

    with pytest.raises(ValueError, match="no good"):
        asyncio.run(main())


def test_a_cancelled_call_runs_on_and_its_late_result_is_dropped() -> None:
    release, ended = threading.Event(), threading.Event()

    def slow() -> str:
        release.wait(10)
        ended.set()
        return "late"

    async def main() -> None:
        workers = Workers()
        try:
            call = workers.run(slow)
            call.cancel()
            release.set()
            assert await asyncio.to_thread(ended.wait, 5)
            await asyncio.sleep(0.05)  # the late result reaches the loop, which drops it
            assert await workers.run(str.lower, "X") == "x"
        finally:
            workers.close()

    asyncio.run(main())


def test_close_ends_the_idle_threads_and_a_busy_one_after_its_call() -> None:
    release = threading.Event()

    def named() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "stateous-worker"]

    before = set(named())

    async def main() -> None:
        workers = Workers()
        busy = workers.run(release.wait, 10)
        await workers.run(time.sleep, 0)
        assert len(set(named()) - before) == 2
        workers.close()
        release.set()
        await busy

    asyncio.run(main())
    wait_until(lambda: set(named()) <= before, "the threads ended", timeout=5)


def test_the_def_routines_of_a_real_supervisor_run_on_a_few_kept_threads(
    launcher: Launcher, supervisors: Supervisors, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph)
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    # Each routine writes how many routines its thread ran, itself included (a thread-local).
    counting = """
    import threading

    ran = threading.local()


    def count() -> None:
        ran.count = getattr(ran, "count", 0) + 1
        with (HERE / "counts").open("a") as counts:
            counts.write(f"{ran.count}\\n")


    @on_state(states.draft)
    def draft(ctx: ItemContext) -> events.submitted:
        count()
        return events.submitted


    @on_state(states.review)
    def review(ctx: ItemContext) -> events.reviewed:
        count()
        return events.reviewed(Verdict(approved=True))
    """
    folder = write_folder(tmp_path / "box-1", served.url, graph, counting, tasks=1)
    supervisors.serving(folder)
    for number in range(10):
        token = {"token": f"T-{number}", "context": {"title": "t"}}
        assert served.request("POST", "/tokens", token)[0] == 201
    for number in range(10):
        wait_until(
            lambda n=number: served.ok("GET", f"/tokens/T-{n}")["status"] == "completed",
            f"T-{number} completed",
        )

    counts = (folder / "counts").read_text().split()
    assert len(counts) == 20
    # A thread's first routine writes 1: the 20 routines, one at a time, ran on a few
    # threads (they share them with the requests), not on a thread each.
    assert counts.count("1") <= 8


def test_a_supervisor_sends_its_requests_on_its_kept_threads_not_asyncio_s_executor(
    launcher: Launcher, tmp_path: Path
) -> None:
    graph = tmp_path / "orders.json"
    write_graph(graph)
    served = launcher.serve(graph, tmp_path / "orders.sqlite")
    folder = write_folder(tmp_path / "box-1", served.url, graph)
    before = {thread.name for thread in threading.enumerate()}
    beside = Beside(folder, served.url)
    beside.start()
    try:
        for number in range(3):
            token = {"token": f"T-{number}", "context": {"title": "t"}}
            assert served.request("POST", "/tokens", token)[0] == 201
        for number in range(3):
            wait_until(
                lambda n=number: served.ok("GET", f"/tokens/T-{n}")["status"] == "completed",
                f"T-{number} completed",
            )
        names = {thread.name for thread in threading.enumerate()} - before
    finally:
        beside.request_stop()
        beside.wait()

    assert beside.code == 0
    assert "stateous-worker" in names
    assert not [name for name in names if name.startswith("asyncio_")]
