"""The outbox's sender: the messages of each task in order, on a stream of their own.

Each task with messages in the outbox gets a stream, up to `SENDING` at once, which
sends them one after another on a kept connection and ends when its task has none
left. No task's report waits for another's: sending the outbox in rounds (four lanes,
each round waiting for the slowest) kept a busy supervisor's reports back, since a
report kept just after a round began waited for the whole round, and the control
plane saw few reports at once to commit together. A stream reads its task's next
message from the outbox just before it sends it, so a message of an attempt dropped
meanwhile is never sent, and one kept while the stream runs goes next on it. Which tasks
have messages the sender asks the outbox once, at its start; after that each message kept
names its task, so a busy sender does not ask the outbox again at every message and every
stream's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from stateous.supervisor.answers import BoundedConnection
from stateous.supervisor.outbox import Message, Outbox

#: How many tasks' messages are sent at once; one task's messages always go in order.
SENDING = 16


class Streams:
    """The sender's loop and its streams; `send` sends one message until it lands or is
    dropped, `halted` tells that sending must end (a stop while the outbox waits)."""

    def __init__(
        self,
        outbox: Outbox,
        connect: Callable[[], BoundedConnection],
        send: Callable[[BoundedConnection, Message], Awaitable[None]],
        halted: Callable[[], bool],
    ) -> None:
        self.outbox = outbox
        self.connect = connect
        self.send = send
        self.halted = halted
        #: Set when a message is kept, a stream ends or a stop comes: the loop looks again.
        self.wake = asyncio.Event()
        #: Set while the outbox holds nothing.
        self.drained = asyncio.Event()
        self._streams: dict[int, asyncio.Task[None]] = {}
        #: The tasks with messages kept and no stream started since, oldest first.
        self._waiting: dict[int, None] = {}
        self._idle: list[BoundedConnection] = []
        self._failed: list[BaseException] = []

    def kept(self, task: int) -> None:
        """A message of `task` waits: the outbox is not drained, and the loop has work."""
        self.drained.clear()
        self._waiting[task] = None
        self.wake.set()

    async def run(self) -> None:
        """Start a stream for each task with messages, until a stop finds the outbox
        waiting; a stream that fails ends the sender with its error."""
        self._waiting.update(dict.fromkeys(self.outbox.tasks()))
        try:
            while True:
                for task in list(self._waiting):
                    if len(self._streams) >= SENDING:
                        break
                    # A task whose stream still runs waits for its end: its next stream
                    # sends what it did not.
                    if task not in self._streams:
                        del self._waiting[task]
                        self._start(task)
                if not self._waiting and not self._streams:
                    self.drained.set()
                if self.halted():
                    await asyncio.gather(*self._streams.values(), return_exceptions=True)
                    return
                await self.wake.wait()
                self.wake.clear()
                if self._failed:
                    raise self._failed[0]
        finally:
            for stream in self._streams.values():
                stream.cancel()
            for connection in self._idle:
                connection.close()

    def _start(self, task: int) -> None:
        stream = asyncio.create_task(self._stream(task))
        self._streams[task] = stream

        def ended(done: asyncio.Task[None]) -> None:
            self._streams.pop(task, None)
            if not done.cancelled() and done.exception() is not None:
                self._failed.append(done.exception())  # type: ignore[arg-type]
            self.wake.set()

        stream.add_done_callback(ended)

    async def _stream(self, task: int) -> None:
        connection = self._idle.pop() if self._idle else self.connect()
        try:
            while (message := self.outbox.next_of(task)) is not None:
                await self.send(connection, message)
                if self.halted():
                    return
        finally:
            self._idle.append(connection)
