"""A live stream's connection, once the HTTP server has handed its socket over.

The streams' thread (`streams.py`) owns the socket from then on: it is out of the
server's loop, so an idle stream costs the loop nothing at each of its turns. The
thread writes without blocking, keeping what the socket cannot take yet, and polls
every stream's socket at once (`Poller`, with a pipe that wakes it) to learn when a
client has gone or can take more. A client that leaves
more than `UNREAD_LIMIT` bytes unread is cut; it reconnects and loses nothing.
"""

from __future__ import annotations

import os
import select
import socket
from contextlib import suppress

from stateous.model.limits import UNREAD_LIMIT

#: The final chunk of an answer framed in chunks.
LAST_CHUNK = b"0\r\n\r\n"
#: What a stream's socket is always polled for: what its client sends, or its end.
READING = select.POLLIN | select.POLLPRI


class Outlet:
    """One stream's socket: `send` queues and writes, `flush` writes what waits, `alive`
    reads what the client sent (nothing is expected), `end` closes the answer."""

    def __init__(self, sock: socket.socket, chunked: bool, head: bytes) -> None:
        self.sock = sock
        #: The answer is framed in chunks (HTTP/1.1), else it ends with the connection.
        self.chunked = chunked
        #: Bytes not yet taken by the socket, the answer's headers first.
        self.pending = bytearray(head)
        self.ended = False
        #: The socket's descriptor, kept for the poll after the socket is closed.
        self.fd = sock.fileno()
        sock.setblocking(False)

    @property
    def waiting(self) -> bool:
        """Whether bytes wait for the socket to take them."""
        return bool(self.pending)

    def send(self, data: bytes) -> bool:
        """Queue `data` and write what the socket takes; False when the client is gone or
        leaves too much unread."""
        if self.ended:
            return False
        self.pending += b"%X\r\n%s\r\n" % (len(data), data) if self.chunked else data
        return len(self.pending) <= UNREAD_LIMIT and self.flush()

    def flush(self) -> bool:
        """Write what waits, as far as the socket takes it now; False when it is closed."""
        try:
            while self.pending:
                sent = self.sock.send(self.pending)
                del self.pending[:sent]
        except BlockingIOError:
            return True
        except OSError:
            return False
        return True

    def alive(self) -> bool:
        """Read what the client sent (and drop it); False once it has closed."""
        try:
            return bool(self.sock.recv(4096))
        except BlockingIOError:
            return True
        except OSError:
            return False

    def end(self) -> None:
        """End the answer with what the socket takes now, and close the connection."""
        if self.ended:
            return
        self.ended = True
        if self.chunked:
            self.pending += LAST_CHUNK
        self.flush()
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class Poller:
    """The sockets of the open streams and a pipe that wakes their thread, in one `poll`.

    Each socket is polled for what its client sends (or its close), and for writing
    too while bytes wait for it; the registrations stay from one wait to the next.
    """

    def __init__(self) -> None:
        self._poll = select.poll()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._poll.register(self._wake_read, select.POLLIN)
        self._outlets: dict[int, Outlet] = {}
        #: The outlets polled for writing now.
        self._writing: set[int] = set()

    def add(self, outlet: Outlet) -> None:
        self._outlets[outlet.fd] = outlet
        self._poll.register(outlet.fd, READING)
        self.watch(outlet)

    def remove(self, outlet: Outlet) -> None:
        """Poll it no more (before it is closed)."""
        if self._outlets.pop(outlet.fd, None) is not None:
            self._poll.unregister(outlet.fd)
            self._writing.discard(outlet.fd)

    def watch(self, outlet: Outlet) -> None:
        """Poll it for writing while bytes wait for it, and only then."""
        if outlet.waiting == (outlet.fd in self._writing) or outlet.fd not in self._outlets:
            return
        if outlet.waiting:
            self._writing.add(outlet.fd)
            self._poll.modify(outlet.fd, READING | select.POLLOUT)
        else:
            self._writing.discard(outlet.fd)
            self._poll.modify(outlet.fd, READING)

    def wake(self) -> None:
        """Make the wait return now (from any thread)."""
        with suppress(BlockingIOError):  # the pipe is full: woken already
            os.write(self._wake_write, b"\0")

    def wait(self, seconds: float) -> list[Outlet]:
        """Wait for a wake-up, a socket's event or the end of `seconds`; write what waits
        for sockets that can take it, and answer the outlets whose client is gone."""
        gone = []
        for fd, flags in self._poll.poll(max(0, int(seconds * 1000))):
            if fd == self._wake_read:
                with suppress(BlockingIOError):
                    os.read(self._wake_read, 4096)
                continue
            outlet = self._outlets.get(fd)
            if outlet is None:
                continue
            if flags & ~select.POLLOUT and not outlet.alive():
                gone.append(outlet)
            elif flags & select.POLLOUT:
                if outlet.flush():
                    self.watch(outlet)
                else:
                    gone.append(outlet)
        return gone

    def close(self) -> None:
        os.close(self._wake_read)
        os.close(self._wake_write)
