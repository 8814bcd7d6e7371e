"""The waiting room with real sockets and its real thread, beside the waits: a claim that
the room lets go cannot be handed a task any more, a claim a write gave back is still let
go at the end of its wait, and a stop answers `204` only to claims no write has granted."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from stateous.control.http.parked_claims import STOPPED, WaitingRoom
from stateous.control.store import Queues
from stateous.control.waiting_claims import Ask, Waiter, Waits
from stateous.model.wire import Grant

GRANT = Grant(task=7, token="T-1", state="coding", visit=1, attempt=1, context={}, lease=120)


class Seat:
    """A waiting claim's connection: the room's end of a socket pair, and the client's."""

    def __init__(self, waiter: Waiter) -> None:
        self._waiter = waiter
        self.socket, self.client = socket.socketpair()
        self.client.settimeout(5)
        #: Set when the room sends it back to the loop to be served again.
        self.resumed = threading.Event()

    @property
    def waiter(self) -> Waiter:
        return self._waiter

    def resume(self) -> None:
        self.resumed.set()  # served again: its claim is answered from here

    def close_now(self) -> None:
        self.socket.close()

    def heard(self) -> bytes:
        """What its client reads until the connection closes."""
        heard = b""
        while chunk := self.client.recv(4096):
            heard += chunk
        return heard


@pytest.fixture
def room() -> Iterator[WaitingRoom]:
    room = WaitingRoom(lambda function: function())  # the loop's work done at once
    yield room
    room.close()


def seated(room: WaitingRoom, waits: Waits, seconds: float) -> Seat:
    waiter = waits.enter(Ask("s1", Queues(["coding"]), "r-1", None), seconds)
    assert waiter is not None
    seat = Seat(waiter)
    room.seat(seat)
    return seat


def test_a_claim_whose_wait_ends_is_let_go_and_no_write_can_take_it_then(
    room: WaitingRoom,
) -> None:
    waits = Waits(8)
    seat = seated(room, waits, 0.2)
    assert seat.resumed.wait(5)
    # Served again, it is about to be answered `204`: a task queued now is not its.
    assert waits.take("coding") is None


def test_a_claim_a_write_gave_back_is_let_go_when_its_wait_ends(room: WaitingRoom) -> None:
    waits = Waits(8)
    began = time.monotonic()
    held = seated(room, waits, 1.0)
    taken = waits.take("coding")
    assert taken is not None and taken[0] is held.waiter
    other = seated(room, waits, 0.3)  # the room looks again while the write holds `held`
    assert other.resumed.wait(5)
    waits.give_back(*taken)  # the write could not hand it its task
    assert held.resumed.wait(5)
    assert 0.9 <= time.monotonic() - began < 2.0


@pytest.mark.parametrize("handed_first", [False, True])
def test_a_stop_answers_204_only_to_the_claims_no_write_has_granted(
    room: WaitingRoom, handed_first: bool
) -> None:
    waits = Waits(8)
    granted = seated(room, waits, 30)
    idle = seated(room, waits, 30)
    taken = waits.take("coding")
    assert taken is not None and taken[0] is granted.waiter
    if handed_first:
        waits.close()
        waits.hand(*taken, GRANT)  # its write commits as the stop begins
        room.close()
    else:
        waits.close()
        room.close()
        waits.hand(*taken, GRANT)  # its write commits after the room closed
    assert idle.heard() == STOPPED
    # The claim granted a task is cut without an answer: its client asks again with the
    # same request id, and the control plane that serves next gives it the same task.
    assert granted.heard() == b""
    assert not granted.resumed.is_set()
