"""The waiting room: the connections of claims that wait for a task, out of the loop.

A claim that waits (`waiting_claims.py`) holds neither a request thread nor a place in the
server's loop, which looks at every connection it holds at each turn: the server hands
its connection here, and one thread watches all of them at once. A connection leaves
the room, back to the loop to be served again, when its claim is woken, when its wait
ends, or when its client sends more (its wait ends then, so that what it sent is
answered in order); it is closed when its client leaves. When the control plane stops,
each claim still here is answered with nothing and its connection closed.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from stateous.control.waiting_claims import Waiter

#: The answer to a claim still waiting when the control plane stops.
STOPPED = b"HTTP/1.1 204 No Content\r\nConnection: close\r\nServer: stateous\r\n\r\n"


class Seat(Protocol):
    """A connection whose claim waits: its socket and waiter, and how it goes back."""

    socket: socket.socket

    @property
    def waiter(self) -> Waiter: ...

    def resume(self) -> None:
        """Go back to the loop and serve the claim again (called in the loop's thread)."""

    def close_now(self) -> None:
        """Close the connection."""


class WaitingRoom:
    """The seats of the claims that wait, watched by one thread started at the first."""

    def __init__(self, to_loop: Callable[[Callable[[], None]], None]) -> None:
        #: Runs a function in the loop's thread, soon.
        self._to_loop = to_loop
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._bell, self._ringer = socket.socketpair()
        self._bell.setblocking(False)
        self._selector.register(self._bell, selectors.EVENT_READ)
        self._seats: set[Seat] = set()
        self._thread: threading.Thread | None = None
        self._closed = False

    def seat(self, seat: Seat) -> None:
        """Take a connection in until its claim is woken, its wait ends or its client acts."""
        waiter = seat.waiter  # read once: the seat may be back in the loop before the end
        with self._lock:
            taken = not self._closed
            if taken:
                self._seats.add(seat)
                self._selector.register(seat.socket, selectors.EVENT_READ, seat)
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._watch, name="stateous-waiting-room", daemon=True
                    )
                    self._thread.start()
        if not taken:
            _answer_stopped(seat)
            waiter.leave()
            return
        self._ring()  # its deadline may be the nearest
        if not waiter.listen(lambda: self._release(seat)):
            self._release(seat)  # woken already, between its attempt and now

    def close(self) -> None:
        """Answer every claim still waiting with nothing and close its connection."""
        with self._lock:
            self._closed = True
            seats, self._seats = self._seats, set()
            for seat in seats:
                self._selector.unregister(seat.socket)
        for seat in seats:
            _stop(seat)
        self._ring()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _ring(self) -> None:
        # A full bell wakes the thread all the same.
        with contextlib.suppress(OSError):
            self._ringer.send(b"\0")

    def _release(self, seat: Seat, sent: bytes | None = None) -> None:
        """Let a seat go: back to the loop, or closed when its client left (`sent` is what
        its client sent meanwhile, when it acted) or when the control plane stops."""
        with self._lock:
            if seat not in self._seats:
                return  # released already
            self._seats.discard(seat)
            self._selector.unregister(seat.socket)
        if sent:
            seat.waiter.end_wait()
        if seat.waiter.stopping():
            _stop(seat)
        elif sent == b"":
            seat.close_now()
            seat.waiter.leave()
        else:
            self._to_loop(seat.resume)

    def _watch(self) -> None:
        """The room's thread: wait for a client to act or the nearest wait to end."""
        while True:
            with self._lock:
                if self._closed:
                    break
                waiting = [seat for seat in self._seats if _watched(seat.waiter)]
                nearest = min((seat.waiter.deadline for seat in waiting), default=None)
            timeout = None if nearest is None else max(0.0, nearest - time.monotonic())
            for key, _ in self._selector.select(timeout):
                if key.fileobj is self._bell:
                    _drain(self._bell)
                else:
                    self._client_acted(key.data)
            now = time.monotonic()
            with self._lock:
                over = [
                    seat
                    for seat in self._seats
                    if seat.waiter.deadline <= now and _watched(seat.waiter)
                ]
            for seat in over:
                if seat.waiter.may_go():
                    self._release(seat)
        self._selector.close()
        self._bell.close()
        self._ringer.close()

    def _client_acted(self, seat: Seat) -> None:
        """A waiting client left or sent more: close, or end its wait and serve it again."""
        try:
            sent = seat.socket.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return  # nothing to read after all (a wake from an earlier seat)
        except OSError:
            sent = b""
        if not seat.waiter.may_go() and sent:
            return  # a write that took the claim serves it again in a moment
        self._release(seat, sent)


def _drain(bell: socket.socket) -> None:
    with contextlib.suppress(BlockingIOError):
        while bell.recv(4096):
            pass


def _watched(waiter: Waiter) -> bool:
    """Whether the room watches a claim's deadline: not once a write that holds it has been
    told its wait is over (`may_go`), since that write serves it again, its wait over or not;
    a claim the write gives back unwoken waits on to its deadline, which the room watches."""
    return not (waiter.taken and waiter.woken)


def _stop(seat: Seat) -> None:
    """End a waiting claim as the control plane stops: `204` when no write granted it a
    task; else its connection is cut without an answer, and its client, which asks again
    with the same request id, is given that task by the control plane that serves next."""
    if seat.waiter.may_be_granted():
        seat.close_now()
    else:
        _answer_stopped(seat)
    seat.waiter.leave()


def _answer_stopped(seat: Seat) -> None:
    """Answer a waiting claim with nothing as the control plane stops, and close it."""
    with contextlib.suppress(OSError):
        seat.socket.send(STOPPED)
    seat.close_now()
