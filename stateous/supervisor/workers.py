"""The supervisor's kept threads: where `def` routines and blocking HTTP requests run.

Starting a thread for each routine, or handing each request to asyncio's executor
(its futures, locks and semaphore), cost the supervisor more CPU than the work
itself. A call goes to a thread that is idle, or to a new one when none is, so no
call ever waits behind another: a routine that blocks, or a claim that waits on
the control plane, holds only its own thread. The threads are daemons, so a forced
stop never waits for a routine; they live until `close`, and a call cancelled on the
loop runs on and its late result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any

#: A call for a thread: the loop to answer on, its future, the function and its arguments.
_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """Give a call's outcome to its future, on the loop, unless it was cancelled."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class Workers:
    """Daemon threads kept for blocking calls; one call at a time each, none queued."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: Threads waiting for a call that no call has been promised to.
        self._idle = 0
        self._threads = 0

    def run(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Call `function(*args)` on a kept thread; the future has what it returns or raises."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            start = not self._idle
            if start:
                self._threads += 1
            else:
                self._idle -= 1
        self._calls.put((loop, future, function, args))
        if start:
            threading.Thread(target=self._serve, name="stateous-worker", daemon=True).start()
        return future

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            loop, future, function, args = call
            result, error = None, None
            try:
                result = function(*args)
            except BaseException as ex:
                error = ex
            # Idle before the loop hears of it: the next call it makes may come here.
            with self._lock:
                self._idle += 1
            # A loop that has closed belongs to a supervisor that has ended: nothing waits.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result, error)
            del call, future, result, error

    def close(self) -> None:
        """End the threads: the idle ones now, a busy one once its call returns."""
        with self._lock:
            threads, self._threads, self._idle = self._threads, 0, 0
        for _ in range(threads):
            self._calls.put(None)
